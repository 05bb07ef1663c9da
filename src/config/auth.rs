//! `[auth]`: who may call which endpoint group — API keys (inline and in
//! a keys file), the groups open to all, and Triton's restricted APIs.
//! Groups are a type ([`Group`]): a name in the configuration, the keys
//! file or `--http-restricted-api` that is not a group is refused when it
//! is read, and the code names groups as variants, so a typo does not
//! compile (a misspelled group would have been silently unprotected).

use serde::{Deserialize, Serialize};

/// An endpoint group: Triton's `--http-restricted-api` groups, plus
/// `admin` (tensorgate's own listing). Written in the configuration as
/// Triton names them (`model-repository`, ...). Every route of both
/// fronts belongs to one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Group {
    Health,
    Metadata,
    ModelConfig,
    Statistics,
    Inference,
    Trace,
    Logging,
    ModelRepository,
    SharedMemory,
    Admin,
}

impl Group {
    /// Every group, in Triton's order.
    pub const ALL: [Group; 10] = [
        Group::Health,
        Group::Metadata,
        Group::ModelConfig,
        Group::Statistics,
        Group::Inference,
        Group::Trace,
        Group::Logging,
        Group::ModelRepository,
        Group::SharedMemory,
        Group::Admin,
    ];

    /// The group's name, as the configuration and Triton write it.
    pub fn name(self) -> &'static str {
        match self {
            Group::Health => "health",
            Group::Metadata => "metadata",
            Group::ModelConfig => "model-config",
            Group::Statistics => "statistics",
            Group::Inference => "inference",
            Group::Trace => "trace",
            Group::Logging => "logging",
            Group::ModelRepository => "model-repository",
            Group::SharedMemory => "shared-memory",
            Group::Admin => "admin",
        }
    }

    /// The group a name names, or why it names none.
    pub fn read(name: &str) -> Result<Group, String> {
        Group::ALL
            .into_iter()
            .find(|g| g.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Group::ALL.iter().map(|g| g.name()).collect();
                format!(
                    "unknown endpoint group {name:?} (one of {})",
                    names.join(", ")
                )
            })
    }
}

impl std::fmt::Display for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// API keys. Off while no key is configured (inline or in the file).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Auth {
    /// Keys inline.
    pub keys: Vec<ApiKey>,
    /// A file of keys, one per line: `<key> [group,group...]` (`#`
    /// comments). Re-read when it changes (rotation without restart).
    pub keys_file: Option<std::path::PathBuf>,
    /// How often the keys file's modification time is looked at (0: on
    /// every request that needs a key).
    pub keys_file_check_ms: u64,
    /// Endpoint groups anyone may call without a key.
    pub open_groups: Vec<Group>,
    /// Triton's `--http-restricted-api=<group,...>:<header>=<value>`: those
    /// groups answer 403 unless the request carries the header with exactly
    /// that value (checked before the API keys).
    pub restricted_api: Vec<RestrictedApi>,
}

/// One `--http-restricted-api` entry, in Triton's form
/// `model-repository,logging:admin-key=secret`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(try_from = "String", into = "String")]
pub struct RestrictedApi {
    pub groups: Vec<Group>,
    pub header: String,
    pub value: String,
}

/// Written back in the same form (`tensorgate check-config` prints it).
impl From<RestrictedApi> for String {
    fn from(r: RestrictedApi) -> String {
        let groups: Vec<&str> = r.groups.iter().map(|g| g.name()).collect();
        format!("{}:{}={}", groups.join(","), r.header, r.value)
    }
}

impl TryFrom<String> for RestrictedApi {
    type Error = String;

    fn try_from(text: String) -> Result<RestrictedApi, String> {
        let form = || format!("restricted API {text:?}: the form is <group,...>:<header>=<value>");
        let (groups, setting) = text.split_once(':').ok_or_else(form)?;
        let (header, value) = setting.split_once('=').ok_or_else(form)?;
        if groups.split(',').any(str::is_empty) || header.is_empty() || value.is_empty() {
            return Err(form());
        }
        let groups = groups
            .split(',')
            .map(Group::read)
            .collect::<Result<Vec<Group>, String>>()?;
        Ok(RestrictedApi {
            groups,
            header: header.to_string(),
            value: value.to_string(),
        })
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ApiKey {
    pub key: String,
    /// Groups this key may call; empty: all.
    #[serde(default)]
    pub groups: Vec<Group>,
    /// The key's name: what a route's `api_key` (and `sticky_api_key`)
    /// matches, so a rule never holds a secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// What [`Config::without_secrets`] shows in place of a secret.
pub(crate) const SECRET_SHOWN: &str = "***";

impl Default for Auth {
    fn default() -> Auth {
        Auth {
            keys: Vec::new(),
            keys_file: None,
            keys_file_check_ms: 1000,
            // Load balancers and Kubernetes probe health without keys.
            open_groups: vec![Group::Health],
            restricted_api: Vec::new(),
        }
    }
}

impl Auth {
    pub(super) fn validate(&self) -> Result<(), String> {
        let restricted: Vec<&Group> = self.restricted_api.iter().flat_map(|r| &r.groups).collect();
        if let Some(twice) = restricted
            .iter()
            .enumerate()
            .find_map(|(i, g)| restricted[..i].contains(g).then_some(g))
        {
            return Err(format!(
                "auth.restricted_api: group \"{}\" can not be in more than one entry",
                twice.name()
            ));
        }
        if self.keys.iter().any(|k| k.key.trim().is_empty()) {
            return Err("auth.keys: a key must not be empty".into());
        }
        if let Some(path) = &self.keys_file {
            std::fs::metadata(path)
                .map_err(|e| format!("auth.keys_file {}: {e}", path.display()))?;
        }
        Ok(())
    }
}
