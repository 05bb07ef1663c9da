//! Workload `w6`: the add_sub request with its tensors in system shared
//! memory, for a gateway in bridge mode on this host (`[shared_memory]
//! mode = "bridge"`, docs/shared-memory.md). One object in `--shm-dir`
//! holds four windows (INPUT0, INPUT1, OUTPUT0, OUTPUT1); two regions are
//! registered with the gateway before the load (inputs, outputs) and
//! unregistered after it, and the object is removed when the run ends.
//! Every connection sends the same request, so concurrent answers write
//! the same bytes into the output windows.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::json;

use crate::link::{Link, Target};
use crate::workload::{f32s, le_bytes};

/// How often an unregistration refused as "in use" is asked again.
const IN_USE_RETRY: Duration = Duration::from_millis(50);

/// The object and the two regions of one run.
pub(crate) struct Regions {
    path: PathBuf,
    key: String,
    inputs: String,
    outputs: String,
    /// Bytes per tensor.
    size: usize,
}

impl Regions {
    /// Creates the object in `dir` with both inputs in place.
    pub(crate) fn create(dir: &Path, a: &[f32], b: &[f32]) -> Result<Regions, String> {
        let name = format!("tensorgate-load-{}", std::process::id());
        let regions = Regions {
            path: dir.join(&name),
            key: format!("/{name}"),
            inputs: format!("{name}-in"),
            outputs: format!("{name}-out"),
            size: a.len() * 4,
        };
        let fail = |e: io::Error| format!("shared memory {}: {e}", regions.path.display());
        let file = File::create(&regions.path).map_err(fail)?;
        file.set_len(4 * regions.size as u64).map_err(fail)?;
        file.write_all_at(&le_bytes(a), 0).map_err(fail)?;
        file.write_all_at(&le_bytes(b), regions.size as u64)
            .map_err(fail)?;
        Ok(regions)
    }

    /// The JSON body naming the windows, and its header.
    pub(crate) fn body(&self) -> (Vec<u8>, Vec<String>) {
        let n = self.size / 4;
        let window = |region: &str, at: usize| {
            json!({"shared_memory_region": region, "shared_memory_offset": at,
                   "shared_memory_byte_size": self.size})
        };
        let body = json!({
            "inputs": [
                {"name": "INPUT0", "shape": [n], "datatype": "FP32",
                 "parameters": window(&self.inputs, 0)},
                {"name": "INPUT1", "shape": [n], "datatype": "FP32",
                 "parameters": window(&self.inputs, self.size)},
            ],
            "outputs": [
                {"name": "OUTPUT0", "parameters": window(&self.outputs, 0)},
                {"name": "OUTPUT1", "parameters": window(&self.outputs, self.size)},
            ],
        });
        let headers = vec!["Content-Type: application/json".to_string()];
        (body.to_string().into_bytes(), headers)
    }

    /// Registers both regions with the gateway at `target`.
    pub(crate) async fn register(&self, target: Target, host: &str) -> Result<(), String> {
        for (name, offset) in [(&self.inputs, 0), (&self.outputs, 2 * self.size)] {
            let body = json!({"key": self.key, "offset": offset, "byte_size": 2 * self.size});
            let path = format!("/v2/systemsharedmemory/region/{name}/register");
            post(target, host, &path, &body.to_string()).await?;
        }
        Ok(())
    }

    /// Unregisters both regions (what a client does when it is done). A
    /// request the load cut off at the window's end may still hold the
    /// output region in the gateway until its upstream call ends: "in use"
    /// is asked again until `patience` has passed.
    pub(crate) async fn unregister(
        &self,
        target: Target,
        host: &str,
        patience: Duration,
    ) -> Result<(), String> {
        let until = Instant::now() + patience;
        for name in [&self.inputs, &self.outputs] {
            let path = format!("/v2/systemsharedmemory/region/{name}/unregister");
            loop {
                match post(target, host, &path, "").await {
                    Err(e) if e.contains("currently in use") && Instant::now() < until => {
                        tokio::time::sleep(IN_USE_RETRY).await;
                    }
                    done => break done?,
                }
            }
        }
        Ok(())
    }

    /// OUTPUT0 and OUTPUT1 as the output windows hold them now.
    pub(crate) fn outputs(&self) -> Result<[Vec<f32>; 2], String> {
        let read = |at: usize| -> io::Result<Vec<f32>> {
            let mut raw = vec![0u8; self.size];
            File::open(&self.path)?.read_exact_at(&mut raw, at as u64)?;
            Ok(f32s(&raw))
        };
        let fail = |e: io::Error| format!("shared memory {}: {e}", self.path.display());
        Ok([
            read(2 * self.size).map_err(fail)?,
            read(3 * self.size).map_err(fail)?,
        ])
    }
}

impl Drop for Regions {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// POSTs `body` to `path`; anything but 200 is the error.
async fn post(target: Target, host: &str, path: &str, body: &str) -> Result<(), String> {
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut link = Link::connect(target)
        .await
        .map_err(|e| format!("{path}: {e}"))?;
    let answer = link
        .exchange(&Bytes::from(request), true)
        .await
        .map_err(|e| format!("{path}: {e}"))?;
    match answer.status {
        200 => Ok(()),
        status => Err(format!(
            "{path}: status {status}: {}",
            String::from_utf8_lossy(&answer.body)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_object_holds_the_inputs_and_the_body_names_the_windows() {
        let dir = std::env::temp_dir();
        let (a, b) = (vec![1.0, 2.0], vec![3.0, 4.0]);
        let regions = Regions::create(&dir, &a, &b).unwrap();
        let object = std::fs::read(&regions.path).unwrap();
        assert_eq!(object.len(), 32);
        assert_eq!(f32s(&object[..16]), [1.0, 2.0, 3.0, 4.0]);
        let (body, _) = regions.body();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let input1 = &body["inputs"][1]["parameters"];
        assert_eq!(input1["shared_memory_region"], regions.inputs.as_str());
        assert_eq!(input1["shared_memory_offset"], 8);
        assert_eq!(
            body["outputs"][1]["parameters"]["shared_memory_byte_size"],
            8
        );
        assert_eq!(regions.outputs().unwrap(), [vec![0.0; 2], vec![0.0; 2]]);
        let path = regions.path.clone();
        drop(regions);
        assert!(!path.exists());
    }
}
