//! Who may call what, and how much: Triton's restricted APIs (a header and
//! its value per endpoint group, 403), API keys per endpoint group (401/403),
//! per-client rate and concurrency limits (429 + `Retry-After`) and the
//! global in-flight cap (503 + `Retry-After`, rather than unbounded
//! queueing). Runs once per request, after classification and before any
//! upstream call. Keys come from the config and from a keys file that is
//! re-read when it changes (rotation without restart).

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use pingora_limits::inflight::{Guard as InflightSlot, Inflight};
use pingora_limits::rate::Rate;

use crate::config::{Auth, Group, Limits};
use crate::error::{Error, Kind, Result};
use crate::metrics::Metrics;

/// The keys, each with what it may call and its name.
type Keys = HashMap<String, KeyEntry>;

/// One key's entry: the groups it may call (`None`: all) and its name
/// (what a route's `api_key` matches; never the key itself).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct KeyEntry {
    groups: Option<Vec<Group>>,
    name: Option<Arc<str>>,
}

pub(crate) struct Guard {
    /// Triton's restricted APIs: group → (header, value).
    restricted: HashMap<Group, (String, String)>,
    open_groups: Vec<Group>,
    inline: Keys,
    file: Option<KeysFile>,
    rate_limit: u64,
    rate: Rate,
    concurrency_limit: u64,
    per_client: Inflight,
    max_inflight: i64,
    inflight: Arc<AtomicI64>,
}

/// What an admitted request holds until it is answered.
pub(crate) struct Permit {
    _client: Option<InflightSlot>,
    _global: Option<GlobalSlot>,
    /// The name of the API key the request carries, if it has one.
    key_name: Option<Arc<str>>,
}

impl Permit {
    /// The name of the API key the request was admitted with.
    pub(crate) fn key_name(&self) -> Option<&Arc<str>> {
        self.key_name.as_ref()
    }
}

struct GlobalSlot(Arc<AtomicI64>);

impl Drop for GlobalSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, SeqCst);
    }
}

struct KeysFile {
    path: PathBuf,
    check_every: Duration,
    state: Mutex<FileState>,
}

struct FileState {
    checked: Option<Instant>,
    modified: Option<SystemTime>,
    keys: Arc<Keys>,
}

impl Guard {
    pub(crate) fn new(auth: &Auth, limits: &Limits) -> Guard {
        let inline = auth
            .keys
            .iter()
            .map(|k| {
                let entry = KeyEntry {
                    groups: (!k.groups.is_empty()).then(|| k.groups.clone()),
                    name: k.name.as_deref().map(Arc::from),
                };
                (k.key.clone(), entry)
            })
            .collect();
        let restricted = auth
            .restricted_api
            .iter()
            .flat_map(|r| {
                r.groups
                    .iter()
                    .map(|g| (*g, (r.header.clone(), r.value.clone())))
            })
            .collect();
        Guard {
            restricted,
            open_groups: auth.open_groups.clone(),
            inline,
            file: auth.keys_file.clone().map(|path| KeysFile {
                path,
                check_every: Duration::from_millis(auth.keys_file_check_ms),
                state: Mutex::new(FileState {
                    checked: None,
                    modified: None,
                    keys: Arc::default(),
                }),
            }),
            rate_limit: limits.rate_per_client,
            rate: Rate::new(Duration::from_secs(1)),
            concurrency_limit: limits.concurrency_per_client,
            per_client: Inflight::new(),
            max_inflight: limits.max_inflight as i64,
            inflight: Arc::default(),
        }
    }

    /// Triton's restricted APIs (`--http-restricted-api`), checked before
    /// anything else: a restricted group needs its header (`header` looks
    /// one up by name, case-insensitively) with exactly the configured
    /// value; else Triton's 403 text naming the header (as JSON).
    pub(crate) fn restricted<'a>(
        &self,
        group: Group,
        header: impl Fn(&str) -> Option<&'a [u8]>,
        metrics: &Metrics,
    ) -> Result<()> {
        let Some((name, value)) = self.restricted.get(&group) else {
            return Ok(());
        };
        if header(name) == Some(value.as_bytes()) {
            return Ok(());
        }
        metrics.rejected.with_label_values(&["auth"]).inc();
        Err(Error::new(
            Kind::Forbidden,
            format!("This API is restricted, expecting header '{name}'"),
        ))
    }

    fn auth_enabled(&self) -> bool {
        self.file.is_some() || !self.inline.is_empty()
    }

    /// Admits a request to `group` from `peer` with `credential` (the
    /// bearer token), or says why not (and counts the refusal).
    pub(crate) fn admit(
        &self,
        group: Group,
        credential: Option<&str>,
        peer: Option<IpAddr>,
        metrics: &Metrics,
    ) -> Result<Permit> {
        let refuse = |reason: &str, error: Error| {
            metrics.rejected.with_label_values(&[reason]).inc();
            Err(error)
        };
        let key_name = match self.authorize(group, credential) {
            Ok(name) => name,
            Err(e) => return refuse("auth", e),
        };
        let global = if self.max_inflight > 0 {
            let slot = GlobalSlot(self.inflight.clone());
            if self.inflight.fetch_add(1, SeqCst) + 1 > self.max_inflight {
                return refuse(
                    "overload",
                    Error::new(
                        Kind::Overloaded,
                        "tensorgate is at its in-flight limit; retry later",
                    ),
                );
            }
            Some(slot)
        } else {
            None
        };
        if self.rate_limit == 0 && self.concurrency_limit == 0 {
            return Ok(Permit {
                _client: None,
                _global: global,
                key_name,
            });
        }
        let client = credential
            .map(|c| format!("key:{c}"))
            .or_else(|| peer.map(|p| format!("ip:{p}")))
            .unwrap_or_default();
        if self.rate_limit > 0 && self.rate.observe(&client, 1) as u64 > self.rate_limit {
            return refuse(
                "rate",
                Error::new(
                    Kind::TooManyRequests,
                    format!(
                        "rate limit of {} requests per second exceeded",
                        self.rate_limit
                    ),
                ),
            );
        }
        let slot = if self.concurrency_limit > 0 {
            let (slot, now) = self.per_client.incr(&client, 1);
            if now as u64 > self.concurrency_limit {
                return refuse(
                    "concurrency",
                    Error::new(
                        Kind::TooManyRequests,
                        format!(
                            "concurrency limit of {} requests in flight exceeded",
                            self.concurrency_limit
                        ),
                    ),
                );
            }
            Some(slot)
        } else {
            None
        };
        Ok(Permit {
            _client: slot,
            _global: global,
            key_name,
        })
    }

    /// The name of the key `credential` is, if it is a known key with a
    /// name (no admission: nothing counted).
    pub(crate) fn key_name(&self, credential: Option<&str>) -> Option<Arc<str>> {
        let key = credential?;
        if let Some(entry) = self.inline.get(key) {
            return entry.name.clone();
        }
        let file_keys = self.file.as_ref().map(KeysFile::current)?;
        file_keys.get(key).and_then(|e| e.name.clone())
    }

    /// Whether `credential` may call `group`; `Ok` with the key's name
    /// when it is a known key that has one (an open group admits any
    /// request, and still names a known key).
    fn authorize(&self, group: Group, credential: Option<&str>) -> Result<Option<Arc<str>>> {
        if !self.auth_enabled() {
            return Ok(None);
        }
        let open = self.open_groups.contains(&group);
        let Some(key) = credential else {
            return match open {
                true => Ok(None),
                false => Err(Error::new(
                    Kind::Unauthorized,
                    format!("an API key is required for the '{group}' endpoints"),
                )),
            };
        };
        let file_keys = self.file.as_ref().map(KeysFile::current);
        let entry = self
            .inline
            .get(key)
            .or_else(|| file_keys.as_ref().and_then(|k| k.get(key)));
        match entry {
            _ if open => Ok(entry.and_then(|e| e.name.clone())),
            None => Err(Error::new(Kind::Unauthorized, "invalid API key")),
            Some(KeyEntry {
                groups: Some(groups),
                ..
            }) if !groups.contains(&group) => Err(Error::new(
                Kind::Forbidden,
                format!("this API key may not call the '{group}' endpoints"),
            )),
            Some(entry) => Ok(entry.name.clone()),
        }
    }
}

impl KeysFile {
    /// The keys, re-read when the file's modification time changed (looked
    /// at most every `check_every`). A file that cannot be read keeps
    /// the previous keys (and says so in the log).
    fn current(&self) -> Arc<Keys> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state
            .checked
            .is_some_and(|t| t.elapsed() < self.check_every)
        {
            return state.keys.clone();
        }
        state.checked = Some(Instant::now());
        let modified = std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .ok();
        if modified.is_some() && modified != state.modified {
            let read = std::fs::read_to_string(&self.path).map_err(|e| e.to_string());
            match read.and_then(|text| parse_keys(&text)) {
                Ok(keys) => {
                    state.keys = Arc::new(keys);
                    state.modified = modified;
                    tracing::info!(file = %self.path.display(), keys = state.keys.len(), "API keys loaded");
                }
                Err(e) => {
                    tracing::error!(file = %self.path.display(), error = %e, "cannot use the keys file; keeping the previous keys")
                }
            }
        }
        state.keys.clone()
    }
}

/// `<key> [group,group...]` per line; blank lines and `#` comments
/// skipped. A group that is not one refuses the whole file, naming its
/// line (the caller keeps the keys it had).
pub(crate) fn parse_keys(text: &str) -> std::result::Result<Keys, String> {
    let mut keys = Keys::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut parts = line.split_whitespace();
        let key = parts.next().unwrap_or_default().to_string();
        let (named, groups): (Vec<&str>, Vec<&str>) = parts.partition(|p| p.starts_with("name="));
        let name = match named.as_slice() {
            [] => None,
            [named] => Some(Arc::from(&named["name=".len()..])),
            _ => return Err(format!("line {}: one name= per key", number + 1)),
        };
        let groups = groups
            .iter()
            .flat_map(|p| p.split(','))
            .filter(|g| !g.is_empty())
            .map(Group::read)
            .collect::<std::result::Result<Vec<Group>, String>>()
            .map_err(|e| format!("line {}: {e}", number + 1))?;
        let groups = (!groups.is_empty()).then_some(groups);
        keys.insert(key, KeyEntry { groups, name });
    }
    Ok(keys)
}

/// The bearer token of an `Authorization` header value.
pub(crate) fn bearer(value: Option<&[u8]>) -> Option<&str> {
    let value = std::str::from_utf8(value?).ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ApiKey;

    fn guard(keys: &[(&str, &[Group])], limits: Limits) -> Guard {
        let auth = Auth {
            keys: keys
                .iter()
                .map(|(k, g)| ApiKey {
                    key: k.to_string(),
                    groups: g.to_vec(),
                    name: None,
                })
                .collect(),
            ..Auth::default()
        };
        Guard::new(&auth, &limits)
    }

    fn status(r: Result<Permit>) -> u16 {
        r.map_or_else(|e| e.status(), |_| 200)
    }

    #[test]
    fn keys_open_forbid_and_refuse_by_group() {
        let g = guard(
            &[("all", &[]), ("infer-only", &[Group::Inference])],
            Limits::default(),
        );
        let m = Metrics::new();
        assert_eq!(status(g.admit(Group::Health, None, None, &m)), 200);
        assert_eq!(status(g.admit(Group::Inference, None, None, &m)), 401);
        assert_eq!(
            status(g.admit(Group::Inference, Some("nope"), None, &m)),
            401
        );
        assert_eq!(
            status(g.admit(Group::Inference, Some("infer-only"), None, &m)),
            200
        );
        assert_eq!(
            status(g.admit(Group::ModelRepository, Some("infer-only"), None, &m)),
            403
        );
        assert_eq!(
            status(g.admit(Group::ModelRepository, Some("all"), None, &m)),
            200
        );
    }

    #[test]
    fn without_keys_everything_is_open() {
        let g = guard(&[], Limits::default());
        assert_eq!(
            status(g.admit(Group::ModelRepository, None, None, &Metrics::new())),
            200
        );
    }

    #[test]
    fn concurrency_and_global_caps_hold_until_permits_drop() {
        let limits = Limits {
            concurrency_per_client: 2,
            max_inflight: 3,
            ..Limits::default()
        };
        let g = guard(&[], limits);
        let m = Metrics::new();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let p1 = g.admit(Group::Inference, None, Some(a), &m).unwrap();
        let _p2 = g.admit(Group::Inference, None, Some(a), &m).unwrap();
        assert_eq!(status(g.admit(Group::Inference, None, Some(a), &m)), 429);
        let _p3 = g.admit(Group::Inference, None, Some(b), &m).unwrap();
        assert_eq!(status(g.admit(Group::Inference, None, Some(b), &m)), 503);
        drop(p1);
        assert_eq!(status(g.admit(Group::Inference, None, Some(a), &m)), 200);
    }

    #[test]
    fn the_rate_limit_counts_per_client() {
        let g = guard(
            &[],
            Limits {
                rate_per_client: 5,
                ..Limits::default()
            },
        );
        let m = Metrics::new();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let answers: Vec<u16> = (0..8)
            .map(|_| status(g.admit(Group::Inference, None, Some(a), &m)))
            .collect();
        assert_eq!(
            answers.iter().filter(|s| **s == 200).count(),
            5,
            "{answers:?}"
        );
        assert_eq!(answers.iter().filter(|s| **s == 429).count(), 3);
        let other: IpAddr = "10.0.0.9".parse().unwrap();
        assert_eq!(
            status(g.admit(Group::Inference, None, Some(other), &m)),
            200
        );
    }

    #[test]
    fn keys_files_parse_with_groups_and_comments() {
        let keys = parse_keys(
            "# ops\nk1\nk2 inference,metadata  # clients\nk3 name=team-blue inference\n\n",
        )
        .unwrap();
        let entry = |groups: Option<Vec<Group>>, name: Option<&str>| KeyEntry {
            groups,
            name: name.map(Arc::from),
        };
        assert_eq!(keys.get("k1"), Some(&entry(None, None)));
        assert_eq!(
            keys.get("k2"),
            Some(&entry(Some(vec![Group::Inference, Group::Metadata]), None))
        );
        // `name=` names the key for the routes; it is no group.
        assert_eq!(
            keys.get("k3"),
            Some(&entry(Some(vec![Group::Inference]), Some("team-blue")))
        );
        assert!(parse_keys("k1 name=a name=b\n").is_err());
        // A group that is not one refuses the file, naming the line.
        let error = parse_keys("k1\nk2 inferance\n").unwrap_err();
        assert!(
            error.starts_with("line 2: unknown endpoint group \"inferance\""),
            "{error}"
        );
        assert_eq!(bearer(Some(b"Bearer abc")), Some("abc"));
        assert_eq!(bearer(Some(b"Basic abc")), None);
    }
}
