//! `[upstreams.NAME]` and `[[routes]]`: several upstream groups and the
//! ordered rules that send each request to one of them. A group is a whole
//! `[upstream]` table (addresses, balancing, health, TLS, limits); the
//! `[upstream]` table itself (and `--upstream`) is the group named
//! `default`, so a configuration without `[upstreams]` works as before. A
//! rule matches on the model (exact names or globs), its version, a
//! request header (gRPC: a metadata key), the API key's name and the
//! front; the first that matches sends the request to one group, or
//! splits by weight between groups, may rename the model toward the
//! upstream, and may mirror a share of its inferences to another group.
//! A request no rule matches goes to `default`, if there is one.
//!
//! Checked as a whole before anything runs (and before a reload replaces
//! the rules in force), each mistake named with the rule's line in the
//! file: a group no table defines, a split whose weights add to 0, a rule
//! after one that matches everything.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// The group `[upstream]` (and `--upstream`) define.
pub const DEFAULT_GROUP: &str = "default";

/// A mirror's requests above this many bytes of tensors are not mirrored
/// (and counted): a mirrored request's tensors stay in memory until the
/// mirror's answer is in, so their size bounds what mirrors hold.
pub(crate) const DEFAULT_MIRROR_MAX_BYTES: usize = 4 << 20;
/// A mirror call gets this long (it never delays the primary answer).
pub(crate) const DEFAULT_MIRROR_TIMEOUT_MS: u64 = 10_000;
/// Mirror calls of one route in flight at once; more are skipped (and
/// counted), so a slow shadow group cannot pile requests up in memory.
pub(crate) const DEFAULT_MIRROR_MAX_INFLIGHT: usize = 64;

/// The front a request came through, as a rule names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FrontKind {
    /// The v2 HTTP/REST protocol (`/v2/...`).
    Http,
    /// The gRPC front (`GRPCInferenceService`).
    Grpc,
    /// The legacy v1 API, over HTTP (`/api/...`) or gRPC.
    V1,
    /// The OpenAI-compatible API (`/v1/...`, on the HTTP listener or
    /// `openai.listen`).
    #[serde(rename = "openai")]
    OpenAi,
}

/// One `[[routes]]` rule: what it matches (every condition given must
/// hold; none given matches every request) and where it sends.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RouteRule {
    /// The rule's name in metrics and the access log (absent:
    /// `routes[N]`, its place in the list).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Model names as the client writes them; `*` matches any run of
    /// characters, `?` any one character. Empty: any model.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
    /// The version the client asked for (`""`: none asked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// A request header (HTTP) or metadata key (gRPC) with this value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub header: Option<HeaderMatch>,
    /// The name of the API key the request carries (`auth.keys[].name`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// The front the request came through.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub front: Option<FrontKind>,
    /// Where it goes: one group ...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// ... or a split between groups, by weight.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub split: BTreeMap<String, u32>,
    /// The split's key: the value of this header (metadata key), so one
    /// client lands on one side every time, on every gateway replica. A
    /// request of a sequence (`sequence_id`) always sticks to its side.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sticky_header: Option<String>,
    /// The split's key: the API key's name.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sticky_api_key: bool,
    /// The model's name toward the upstream (the client never sees it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream_model: Option<String>,
    /// A share of its inferences copied to another group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mirror: Option<MirrorRule>,
    /// The Triton priority level of the requests it matches when they
    /// name none (1 the highest), for its group's admission queue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
    /// The rule's line in its file (for the messages of its mistakes).
    #[serde(skip)]
    pub line: Line,
}

/// Where a rule was written: for messages only, not part of its value (a
/// rule printed and read back is the same rule, on whatever line).
#[derive(Debug, Clone, Copy, Default)]
pub struct Line(pub Option<usize>);

impl PartialEq for Line {
    fn eq(&self, _: &Line) -> bool {
        true
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HeaderMatch {
    /// Compared without regard to case, as HTTP header names are.
    pub name: String,
    /// Compared exactly.
    pub value: String,
}

/// `mirror = { group = "shadow", percent = 10 }`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MirrorRule {
    pub group: String,
    /// The share of the route's inferences mirrored, 0 to 100.
    pub percent: f64,
    #[serde(default = "default_mirror_max_bytes")]
    pub max_bytes: usize,
    #[serde(default = "default_mirror_timeout_ms")]
    pub timeout_ms: u64,
    #[serde(default = "default_mirror_max_inflight")]
    pub max_inflight: usize,
    /// Floating-point outputs (FP16, BF16, FP32, FP64) agree when every
    /// element differs by at most `tolerance × max(1, |primary|)`:
    /// absolute for small values, relative for large ones (0: byte for
    /// byte). Other datatypes agree byte for byte.
    #[serde(default)]
    pub tolerance: f64,
}

fn default_mirror_max_bytes() -> usize {
    DEFAULT_MIRROR_MAX_BYTES
}

fn default_mirror_timeout_ms() -> u64 {
    DEFAULT_MIRROR_TIMEOUT_MS
}

fn default_mirror_max_inflight() -> usize {
    DEFAULT_MIRROR_MAX_INFLIGHT
}

impl RouteRule {
    /// The rule matches every request (no condition).
    pub fn matches_everything(&self) -> bool {
        self.models.is_empty()
            && self.version.is_none()
            && self.header.is_none()
            && self.api_key.is_none()
            && self.front.is_none()
    }

    /// The groups it sends to (or mirrors to).
    pub fn groups(&self) -> impl Iterator<Item = &str> {
        self.group
            .iter()
            .map(String::as_str)
            .chain(self.split.keys().map(String::as_str))
            .chain(self.mirror.iter().map(|m| m.group.as_str()))
    }

    /// The rule's label in metrics and logs: its name, or `routes[N]`.
    pub fn label(&self, index: usize) -> String {
        match &self.name {
            Some(name) => name.clone(),
            None => format!("routes[{index}]"),
        }
    }

    /// How the rule is named in messages: its index and, from a file,
    /// its line.
    pub fn named(&self, index: usize) -> String {
        match self.line.0 {
            Some(line) => format!("routes[{index}] (line {line})"),
            None => format!("routes[{index}]"),
        }
    }
}

/// Checks `rules` against the groups that exist.
pub(crate) fn validate(rules: &[RouteRule], groups: &BTreeSet<&str>) -> Result<(), String> {
    let known = || groups.iter().copied().collect::<Vec<_>>().join(", ");
    let mut labels = BTreeSet::new();
    for (index, rule) in rules.iter().enumerate() {
        let named = rule.named(index);
        if let Some(name) = &rule.name {
            let fit = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
            if !fit || name == DEFAULT_GROUP || name.starts_with("routes[") {
                return Err(format!(
                    "{named}: a rule's name is letters, digits, '_', '-' and '.', and not {DEFAULT_GROUP:?}"
                ));
            }
        }
        if !labels.insert(rule.label(index)) {
            return Err(format!(
                "{named}: another rule is named {:?} already",
                rule.label(index)
            ));
        }
        match (&rule.group, rule.split.is_empty()) {
            (Some(_), false) => return Err(format!("{named}: give a group or a split, not both")),
            (None, true) => return Err(format!("{named}: give a group or a split")),
            _ => {}
        }
        if let Some(group) = rule.groups().find(|g| !groups.contains(g)) {
            return Err(format!(
                "{named}: no group is named {group:?} (the groups: {})",
                known()
            ));
        }
        if !rule.split.is_empty() && rule.split.values().map(|w| u64::from(*w)).sum::<u64>() == 0 {
            return Err(format!("{named}: the split's weights add up to 0"));
        }
        if rule.split.is_empty() && (rule.sticky_header.is_some() || rule.sticky_api_key) {
            return Err(format!("{named}: a sticky key needs a split"));
        }
        if rule.sticky_header.is_some() && rule.sticky_api_key {
            return Err(format!(
                "{named}: one sticky key: sticky_header or sticky_api_key"
            ));
        }
        if rule.priority == Some(0) {
            return Err(format!(
                "{named}: priority is a level of 1 or more (1 the highest)"
            ));
        }
        if rule.upstream_model.as_deref() == Some("") {
            return Err(format!("{named}: upstream_model must not be empty"));
        }
        if rule.models.iter().any(String::is_empty) {
            return Err(format!("{named}: a model name must not be empty"));
        }
        if let Some(header) = &rule.header {
            if header.name.is_empty() {
                return Err(format!("{named}: the header's name must not be empty"));
            }
        }
        if let Some(mirror) = &rule.mirror {
            if mirror.percent.is_nan() || mirror.percent <= 0.0 || mirror.percent > 100.0 {
                return Err(format!(
                    "{named}: mirror.percent must be above 0 and at most 100"
                ));
            }
            if mirror.timeout_ms == 0 || mirror.max_inflight == 0 {
                return Err(format!(
                    "{named}: mirror.timeout_ms and mirror.max_inflight must be above 0"
                ));
            }
            if mirror.tolerance.is_nan() || mirror.tolerance < 0.0 {
                return Err(format!("{named}: mirror.tolerance must not be negative"));
            }
        }
        if rule.matches_everything() {
            if let Some(after) = rules.get(index + 1) {
                return Err(format!(
                    "{}: can never match, {named} before it matches every request",
                    after.named(index + 1)
                ));
            }
        }
    }
    Ok(())
}

/// A model pattern of a rule, compiled once: most patterns are a name, a
/// prefix (`resnet*`) or a suffix (`*_large`), each matched without the
/// general walk; the rest are globs ([`glob_match`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelPattern {
    Exact(String),
    Prefix(String),
    Suffix(String),
    Glob(String),
}

impl ModelPattern {
    pub fn new(pattern: &str) -> ModelPattern {
        let wild = |s: &str| s.contains(['*', '?']);
        match (pattern.strip_suffix('*'), pattern.strip_prefix('*')) {
            _ if !wild(pattern) => ModelPattern::Exact(pattern.to_string()),
            (Some(prefix), _) if !wild(prefix) => ModelPattern::Prefix(prefix.to_string()),
            (_, Some(suffix)) if !wild(suffix) => ModelPattern::Suffix(suffix.to_string()),
            _ => ModelPattern::Glob(pattern.to_string()),
        }
    }

    pub fn matches(&self, name: &str) -> bool {
        match self {
            ModelPattern::Exact(exact) => name == exact,
            ModelPattern::Prefix(prefix) => name.starts_with(prefix.as_str()),
            ModelPattern::Suffix(suffix) => name.ends_with(suffix.as_str()),
            ModelPattern::Glob(glob) => glob_match(glob, name),
        }
    }

    /// The one name it matches, if it is a name.
    pub fn exact(&self) -> Option<&str> {
        match self {
            ModelPattern::Exact(exact) => Some(exact),
            _ => None,
        }
    }
}

/// `name` matches `pattern`, where `*` is any run of characters and `?`
/// any one. Written here rather than taken from a glob crate: model names
/// are matched on every request, this allocates nothing, and `*` and `?`
/// are all a model name needs (no classes, no path separators).
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n) = (pattern.as_bytes(), name.as_bytes());
    let (mut pi, mut ni) = (0, 0);
    // Where the last `*` was, and where in `name` it matched up to.
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match p.get(pi) {
            Some(b'*') => {
                star = Some((pi, ni));
                pi += 1;
            }
            Some(b'?') => {
                pi += 1;
                ni += 1;
            }
            Some(c) if *c == n[ni] => {
                pi += 1;
                ni += 1;
            }
            _ => match star {
                // Let the last `*` take one more character.
                Some((sp, sn)) => {
                    star = Some((sp, sn + 1));
                    pi = sp + 1;
                    ni = sn + 1;
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|c| *c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_runs_and_single_characters() {
        for (pattern, name) in [
            ("add_sub", "add_sub"),
            ("resnet*", "resnet50"),
            ("resnet*", "resnet"),
            ("*", ""),
            ("*_v?", "classifier_v2"),
            ("a*b*c", "axxbyyc"),
            ("**", "x"),
        ] {
            assert!(glob_match(pattern, name), "{pattern} ~ {name}");
        }
        for (pattern, name) in [
            ("add_sub", "add_sub2"),
            ("resnet*", "resne"),
            ("?", ""),
            ("*_v?", "classifier_v"),
            ("a*b*c", "axxbyy"),
        ] {
            assert!(!glob_match(pattern, name), "{pattern} !~ {name}");
        }
    }

    #[test]
    fn compiled_patterns_match_as_globs_do() {
        let patterns = [
            "add_sub", "resnet*", "*_large", "gpt?", "a*b*c", "*", "**", "?*", "",
        ];
        let names = [
            "add_sub", "resnet50", "resnet", "x_large", "gpt4", "gpt", "axxbyyc", "",
        ];
        for pattern in patterns {
            let compiled = ModelPattern::new(pattern);
            for name in names {
                assert_eq!(
                    compiled.matches(name),
                    glob_match(pattern, name),
                    "{pattern} ~ {name}: {compiled:?}"
                );
            }
        }
        assert_eq!(
            ModelPattern::new("resnet*"),
            ModelPattern::Prefix("resnet".into())
        );
        assert_eq!(
            ModelPattern::new("*_large"),
            ModelPattern::Suffix("_large".into())
        );
        assert_eq!(ModelPattern::new("add_sub").exact(), Some("add_sub"));
    }

    #[test]
    fn a_rules_front_is_one_of_the_four() {
        for (written, front) in [
            ("http", FrontKind::Http),
            ("grpc", FrontKind::Grpc),
            ("v1", FrontKind::V1),
            ("openai", FrontKind::OpenAi),
        ] {
            let rule: RouteRule =
                toml::from_str(&format!("front = \"{written}\"\ngroup = \"g\"")).unwrap();
            assert_eq!(rule.front, Some(front));
            assert_eq!(
                toml::to_string(&rule).unwrap(),
                format!("front = \"{written}\"\ngroup = \"g\"\n")
            );
        }
        for wrong in ["open_ai", "OpenAI", "rest"] {
            let refused =
                toml::from_str::<RouteRule>(&format!("front = \"{wrong}\"\ngroup = \"g\""));
            let message = refused.unwrap_err().to_string();
            assert!(message.contains("openai"), "{wrong}: {message}");
        }
    }

    fn rule(group: &str) -> RouteRule {
        RouteRule {
            group: Some(group.into()),
            ..RouteRule::default()
        }
    }

    #[test]
    fn mistakes_are_refused_naming_the_rule_and_its_line() {
        let groups: BTreeSet<&str> = ["stable", "canary"].into();
        let refused = |rules: Vec<RouteRule>| validate(&rules, &groups).unwrap_err();
        let mut unknown = rule("canarry");
        unknown.line = Line(Some(12));
        assert_eq!(
            refused(vec![unknown]),
            "routes[0] (line 12): no group is named \"canarry\" (the groups: canary, stable)"
        );
        let zero = RouteRule {
            split: [("stable".to_string(), 0), ("canary".to_string(), 0)].into(),
            ..RouteRule::default()
        };
        assert_eq!(
            refused(vec![zero]),
            "routes[0]: the split's weights add up to 0"
        );
        let mut after = rule("canary");
        after.models = vec!["m".into()];
        after.line = Line(Some(20));
        assert_eq!(
            refused(vec![rule("stable"), after]),
            "routes[1] (line 20): can never match, routes[0] before it matches every request"
        );
        assert_eq!(
            refused(vec![RouteRule::default()]),
            "routes[0]: give a group or a split"
        );
        let mut sticky = rule("stable");
        sticky.sticky_header = Some("x-session-id".into());
        assert_eq!(
            refused(vec![sticky]),
            "routes[0]: a sticky key needs a split"
        );
        validate(&[rule("stable")], &groups).expect("one catch-all last");
    }
}
