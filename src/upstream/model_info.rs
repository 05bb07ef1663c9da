//! What the gateway must know about a model that the v2 HTTP front checks
//! before calling the upstream (v2 §2.1 step 2, v2 §2.7, v2 §3.5): its inputs,
//! outputs, batching and transaction policy. Fetched with `ModelConfig`
//! (or `ModelMetadata` from servers without it) and cached for a short time;
//! repository load/unload through the gateway invalidates the cache.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::model::ModelInfo;

type Entry = (Instant, Arc<ModelInfo>);

/// A small TTL cache: model → version → signature. Nested maps so a lookup
/// on the request path borrows the names instead of allocating a key.
pub struct ModelCache {
    ttl: Duration,
    entries: Mutex<HashMap<String, HashMap<String, Entry>>>,
}

impl ModelCache {
    pub fn new(ttl: Duration) -> ModelCache {
        ModelCache {
            ttl,
            entries: Mutex::new(HashMap::new()),
        }
    }

    pub fn get(&self, model: &str, version: &str) -> Option<Arc<ModelInfo>> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let (at, info) = entries.get(model)?.get(version)?;
        (at.elapsed() < self.ttl).then(|| info.clone())
    }

    pub fn put(&self, model: &str, version: &str, info: Arc<ModelInfo>) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .entry(model.to_string())
            .or_default()
            .insert(version.to_string(), (Instant::now(), info));
    }

    /// Drops every version of `model` (after load/unload).
    pub fn invalidate(&self, model: &str) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.remove(model);
    }
}
