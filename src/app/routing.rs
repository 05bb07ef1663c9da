//! The upstream groups and the routes between them (`[upstreams.NAME]`,
//! `[[routes]]`): which group a call goes to, under which model name, and
//! whether a share of it is mirrored. The door (`app::door`) routes every
//! call here, once, before it reaches a pool, so the same rules hold for
//! every front.
//!
//! A rule is compiled once from its configuration ([`Routing::new`]) and
//! matched on what the request told its front ([`RouteFacts`], read once:
//! the front, the headers the rules name, the API key's name) and on the
//! call's aim (model, version, sequence). Matching allocates nothing. A
//! split picks its side from a draw: the hash of the request's sticky key
//! when it has one (a `sequence_id` first, then the rule's header or API
//! key), so a client lands on one side every time, on every replica; else
//! the split's own turn, a low-discrepancy sequence, so the weights hold
//! from one request to the next, not only on average. A request is routed
//! once: its calls take that one route (`Routed`). The sides are ordered
//! by group name, so every replica splits alike whatever order its file
//! lists them in.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prometheus::{Histogram, IntCounter};

use crate::app::admission::Gate;
use crate::config::{
    Config, FrontKind, MirrorRule, ModelPattern, RouteRule, Upstream, DEFAULT_GROUP,
};
use crate::context::RouteFacts;
use crate::error::{Error, Kind, Result};
use crate::metrics::Metrics;
use crate::upstream::{ModelCache, Pool, UpstreamSettings};

/// One upstream group: its pool and what the gateway keeps of it.
pub(crate) struct UpstreamGroup {
    pub(crate) name: Arc<str>,
    pub(crate) pool: Arc<Pool>,
    /// The signatures of its models, by the names the group serves them
    /// under.
    pub(crate) models: ModelCache,
    /// The table it was made from (a reload keeps the group when it is
    /// unchanged but for its addresses).
    pub(crate) config: Upstream,
    /// Its admission control (`None`: off, every call goes on at once).
    pub(crate) gate: Option<Arc<Gate>>,
}

impl UpstreamGroup {
    fn new(name: &str, config: &Upstream, metrics: &Arc<Metrics>) -> UpstreamGroup {
        UpstreamGroup {
            name: name.into(),
            pool: Pool::new(UpstreamSettings::from_config(config), metrics.clone()),
            models: ModelCache::new(config.model_info_ttl()),
            config: config.clone(),
            gate: config
                .admission
                .enabled()
                .then(|| Gate::new(name, &config.admission, metrics)),
        }
    }
}

/// The groups and the compiled rules in force.
pub(crate) struct Routing {
    groups: BTreeMap<String, Arc<UpstreamGroup>>,
    default: Option<Arc<UpstreamGroup>>,
    rules: Vec<Rule>,
    /// The header names the rules read, lower-case, each once: what a
    /// front reads of a request for them ([`RouteFacts::headers`]).
    headers: Vec<String>,
    /// The groups clients' calls go to (the default, and every group a
    /// rule sends to): what readiness asks about.
    serving: Vec<Arc<UpstreamGroup>>,
    /// The counts of calls no rule matched (only with rules: without
    /// any, the per-backend series say it all).
    default_counts: Option<Arc<CallCounts>>,
    /// Where each group's admission headers are in [`Routing::headers`]
    /// (only groups whose admission reads one).
    gate_headers: BTreeMap<String, GateHeaders>,
}

/// The places of a group's admission headers in [`Routing::headers`].
#[derive(Debug, Clone, Copy, Default)]
struct GateHeaders {
    priority: Option<usize>,
    deadline: Option<usize>,
}

/// A compiled rule.
struct Rule {
    /// The rule's name in metrics and logs (`RouteRule::label`).
    label: Arc<str>,
    models: Vec<ModelPattern>,
    version: Option<String>,
    /// The index of the header in [`Routing::headers`], and its value.
    header: Option<(usize, String)>,
    api_key: Option<String>,
    front: Option<FrontKind>,
    to: Destination,
    upstream_model: Option<Arc<str>>,
    mirror: Option<Arc<Mirror>>,
    /// The rule as configured, for the operators' listing.
    config: RouteRule,
}

enum Destination {
    One(Side),
    /// The sides in group-name order, each with its cumulative weight.
    Split {
        sides: Vec<(Side, u64)>,
        total: u64,
        sticky: Sticky,
        /// Keyless requests routed so far: the next one's turn.
        turns: AtomicU64,
    },
}

/// The `n`th point of a Weyl sequence over the `u64` range (the golden
/// ratio's step): any run of consecutive points is spread evenly, so a
/// share of the range receives its share of any run of turns.
fn weyl(n: u64) -> u64 {
    n.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// A group a rule sends to, with the counts of its calls there.
struct Side {
    group: Arc<UpstreamGroup>,
    counts: Arc<CallCounts>,
}

/// One rule's inference calls to one group: counted, and timed, through
/// series made once (`Metrics::route_calls`, `route_seconds`).
pub(crate) struct CallCounts {
    ok: IntCounter,
    error: IntCounter,
    seconds: Histogram,
}

impl CallCounts {
    fn new(metrics: &Metrics, rule: &str, group: &str) -> CallCounts {
        let calls = |outcome| {
            metrics
                .route_calls
                .with_label_values(&[rule, group, outcome])
        };
        CallCounts {
            ok: calls("ok"),
            error: calls("error"),
            seconds: metrics.route_seconds.with_label_values(&[rule, group]),
        }
    }

    /// A call ended (`took`: a unary call's time; a stream's is not).
    pub(crate) fn record(&self, ok: bool, took: Option<Duration>) {
        match ok {
            true => self.ok.inc(),
            false => self.error.inc(),
        }
        if let Some(took) = took {
            self.seconds.observe(took.as_secs_f64());
        }
    }
}

/// The key that keeps a client on one side of a split.
#[derive(Clone, Copy)]
enum Sticky {
    None,
    /// The value of the header at this index of [`Routing::headers`].
    Header(usize),
    ApiKey,
}

/// A rule's mirror: where, how much, within what, and its counts.
pub(crate) struct Mirror {
    pub(crate) group: Arc<UpstreamGroup>,
    pub(crate) rule: MirrorRule,
    /// Mirror calls of the rule in flight now (`rule.max_inflight` at
    /// most).
    pub(crate) inflight: Arc<tokio::sync::Semaphore>,
    /// Inferences the rule has seen, for the share mirrored.
    seen: AtomicU64,
    pub(crate) counts: MirrorCounts,
}

/// Why a request the share picked was not mirrored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Skip {
    /// Its message is above `max_bytes`.
    Size,
    /// `max_inflight` mirror calls are running.
    Inflight,
    /// Its tensors are still arriving (a streamed body): never held.
    Streamed,
    /// Its answer goes into shared memory, not through the gateway.
    SharedMemory,
}

/// What a mirror's answer said next to the primary's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Agree,
    Differ,
    /// A call failed, or the primary's answer was above `max_bytes`.
    Uncompared,
}

/// A mirror's series, made once.
pub(crate) struct MirrorCounts {
    ok: IntCounter,
    error: IntCounter,
    skipped: [IntCounter; 4],
    verdicts: [IntCounter; 3],
}

impl MirrorCounts {
    fn new(metrics: &Metrics, rule: &str, group: &str) -> MirrorCounts {
        let calls = |outcome| {
            metrics
                .mirror_calls
                .with_label_values(&[rule, group, outcome])
        };
        let skipped = |reason| metrics.mirror_skipped.with_label_values(&[rule, reason]);
        let verdict = |verdict| metrics.mirror_agreement.with_label_values(&[rule, verdict]);
        MirrorCounts {
            ok: calls("ok"),
            error: calls("error"),
            skipped: [
                skipped("size"),
                skipped("inflight"),
                skipped("streamed"),
                skipped("shared_memory"),
            ],
            verdicts: [verdict("agree"), verdict("differ"), verdict("uncompared")],
        }
    }

    pub(crate) fn call(&self, ok: bool) {
        match ok {
            true => self.ok.inc(),
            false => self.error.inc(),
        }
    }

    pub(crate) fn skipped(&self, why: Skip) {
        self.skipped[why as usize].inc();
    }

    pub(crate) fn verdict(&self, verdict: Verdict) {
        self.verdicts[verdict as usize].inc();
    }
}

impl Mirror {
    /// This inference is in the share mirrored: the `n`th of the rule is
    /// when its place on a low-discrepancy sequence falls below the
    /// percentage, so the share holds over any run of requests.
    pub(crate) fn picks(&self) -> bool {
        let point = weyl(self.seen.fetch_add(1, Ordering::Relaxed)) as f64 / 2f64.powi(64);
        point * 100.0 < self.rule.percent
    }

    pub(crate) fn timeout(&self) -> Duration {
        Duration::from_millis(self.rule.timeout_ms)
    }
}

/// Where a call goes, decided once for it.
#[derive(Clone)]
pub(crate) struct Routed {
    pub(crate) group: Arc<UpstreamGroup>,
    /// The model's name toward the upstream, when the route renames it.
    pub(crate) upstream_model: Option<Arc<str>>,
    /// The rule that matched (`None`: the default group).
    pub(crate) rule: Option<Arc<str>>,
    pub(crate) mirror: Option<Arc<Mirror>>,
    /// Where its inference calls are counted (`None`: no rules).
    pub(crate) counts: Option<Arc<CallCounts>>,
    /// What the request's headers and its rule say of its admission (only
    /// for a group with admission control).
    pub(crate) admission: Admitting,
}

/// What the routing learnt of a call's admission: the priority level of
/// the group's `priority_header` (else of the rule), the deadline of its
/// `deadline_header` (milliseconds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Admitting {
    pub(crate) priority: Option<u32>,
    pub(crate) deadline: Option<Duration>,
}

impl Routed {
    /// The model's name toward the upstream: the route's rename, or the
    /// client's own.
    pub(crate) fn model<'a>(&'a self, client: &'a str) -> &'a str {
        self.upstream_model.as_deref().unwrap_or(client)
    }
}

#[cfg(test)]
impl Routed {
    /// A route to a group `default` of the default table, for unit tests.
    pub(crate) fn for_tests() -> Routed {
        let metrics = Arc::new(Metrics::new());
        Routed {
            group: Arc::new(UpstreamGroup::new(
                DEFAULT_GROUP,
                &Upstream::default(),
                &metrics,
            )),
            upstream_model: None,
            rule: None,
            mirror: None,
            counts: None,
            admission: Admitting::default(),
        }
    }
}

impl Routing {
    /// The groups and rules of `config` (validated), the groups of `kept`
    /// reused where their tables did not change (their pools keep their
    /// backends' health and connections) but for their addresses.
    pub(crate) fn new(config: &Config, kept: Option<&Routing>, metrics: &Arc<Metrics>) -> Routing {
        let groups: BTreeMap<String, Arc<UpstreamGroup>> = config
            .groups()
            .into_iter()
            .map(|(name, table)| {
                let old = kept.and_then(|k| k.groups.get(name));
                let group = match old {
                    Some(old) if same_but_addresses(&old.config, table) => {
                        old.pool.set_addresses(table.addresses.clone());
                        old.clone()
                    }
                    _ => Arc::new(UpstreamGroup::new(name, table, metrics)),
                };
                (name.to_string(), group)
            })
            .collect();
        let mut headers: Vec<String> = Vec::new();
        let mut header_index = |name: &str| {
            let name = name.to_ascii_lowercase();
            match headers.iter().position(|h| *h == name) {
                Some(at) => at,
                None => {
                    headers.push(name);
                    headers.len() - 1
                }
            }
        };
        let rules: Vec<Rule> = config
            .routes
            .iter()
            .enumerate()
            .filter_map(|(index, rule)| compile(index, rule, &groups, &mut header_index, metrics))
            .collect();
        let gate_headers = groups
            .iter()
            .filter(|(_, group)| group.gate.is_some())
            .map(|(name, group)| {
                let admission = &group.config.admission;
                let at = GateHeaders {
                    priority: admission.priority_header.as_deref().map(&mut header_index),
                    deadline: admission.deadline_header.as_deref().map(&mut header_index),
                };
                (name.clone(), at)
            })
            .filter(|(_, at)| at.priority.is_some() || at.deadline.is_some())
            .collect();
        let default = groups.get(DEFAULT_GROUP).cloned();
        let mut serving: Vec<Arc<UpstreamGroup>> = default.iter().cloned().collect();
        for group in rules.iter().flat_map(|rule| rule.to.groups()) {
            if !serving.iter().any(|g| Arc::ptr_eq(g, group)) {
                serving.push(group.clone());
            }
        }
        let default_counts = match (&default, rules.is_empty()) {
            (Some(group), false) => Some(Arc::new(CallCounts::new(
                metrics,
                DEFAULT_GROUP,
                &group.name,
            ))),
            _ => None,
        };
        Routing {
            default,
            groups,
            rules,
            headers,
            serving,
            default_counts,
            gate_headers,
        }
    }

    /// Clients' calls reach `group` (it is the default, or a rule sends to
    /// it).
    pub(crate) fn serves(&self, group: &Arc<UpstreamGroup>) -> bool {
        self.serving.iter().any(|g| Arc::ptr_eq(g, group))
    }

    /// The rules in force, in order: each label and configuration.
    pub(crate) fn rules(&self) -> impl Iterator<Item = (&str, &RouteRule)> {
        self.rules.iter().map(|rule| (&*rule.label, &rule.config))
    }

    /// The renames of the rules: the client's name of a model (each name
    /// a rule gives that is not a pattern), its name upstream, and the
    /// groups the rule sends to.
    pub(crate) fn renames(&self) -> impl Iterator<Item = (&str, &str, Vec<&Arc<UpstreamGroup>>)> {
        self.rules.iter().flat_map(|rule| {
            let upstream = rule.upstream_model.as_deref();
            rule.models
                .iter()
                .filter_map(move |m| Some((m.exact()?, upstream?, rule.to.groups())))
        })
    }

    /// A route to each group clients' calls reach, in name order (for a
    /// server-wide listing over them all).
    pub(crate) fn serving_routes(&self) -> Vec<Routed> {
        let mut serving = self.serving.clone();
        serving.sort_by(|a, b| a.name.cmp(&b.name));
        serving.iter().map(|group| self.to_default(group)).collect()
    }

    /// Some group that takes clients' calls has a usable backend.
    pub(crate) fn serving_usable(&self) -> bool {
        self.serving.iter().any(|group| group.pool.any_usable())
    }

    /// Some rule is in force (without any, every call goes to `default`).
    pub(crate) fn has_rules(&self) -> bool {
        !self.rules.is_empty()
    }

    /// What a front reads of a request for the routes is needed: some rule
    /// is in force, or some group's admission reads a header.
    pub(crate) fn reads_requests(&self) -> bool {
        self.has_rules() || !self.headers.is_empty()
    }

    /// The header names the rules read (see [`RouteFacts::headers`]).
    pub(crate) fn headers(&self) -> &[String] {
        &self.headers
    }

    /// Every group, by name.
    pub(crate) fn groups(&self) -> impl Iterator<Item = &Arc<UpstreamGroup>> {
        self.groups.values()
    }

    /// Where a call about `model` (`None`: server-wide) goes: the first
    /// rule that matches, else the default group; a server-wide call to
    /// the default group, or the first group. No rule and no default
    /// group: the client's 404, naming the model.
    pub(crate) fn route(
        &self,
        facts: &RouteFacts,
        model: Option<&str>,
        version: Option<&str>,
        sequence: Option<&[u8]>,
    ) -> Result<Routed> {
        let Some(model) = model else {
            let group = self
                .default
                .as_ref()
                .or_else(|| self.groups.values().next());
            return match group {
                Some(group) => Ok(self.to_default(group)),
                None => Err(Error::internal("no upstream group")),
            };
        };
        for rule in &self.rules {
            if rule.matches(facts, model, version) {
                let side = rule
                    .to
                    .side(facts, sequence)
                    .ok_or_else(|| Error::internal("a split without sides"))?;
                return Ok(Routed {
                    admission: self.admitting(&side.group, facts, rule.config.priority),
                    group: side.group.clone(),
                    upstream_model: rule.upstream_model.clone(),
                    rule: Some(rule.label.clone()),
                    mirror: rule.mirror.clone(),
                    counts: Some(side.counts.clone()),
                });
            }
        }
        match &self.default {
            Some(group) => Ok(Routed {
                admission: self.admitting(group, facts, None),
                ..self.to_default(group)
            }),
            None => Err(Error::new(
                Kind::NotFound,
                format!("no route matches model '{model}'"),
            )),
        }
    }

    /// The route to `group` when no rule matched.
    fn to_default(&self, group: &Arc<UpstreamGroup>) -> Routed {
        Routed {
            group: group.clone(),
            upstream_model: None,
            rule: None,
            mirror: None,
            counts: self.default_counts.clone(),
            admission: Admitting::default(),
        }
    }

    /// What `facts` (and the rule's `priority`) say of a call's admission
    /// to `group`: nothing is read for a group without admission control.
    /// A header that is not a positive number says nothing.
    fn admitting(
        &self,
        group: &UpstreamGroup,
        facts: &RouteFacts,
        rule_priority: Option<u32>,
    ) -> Admitting {
        if group.gate.is_none() {
            return Admitting::default();
        }
        let at = self
            .gate_headers
            .get(&*group.name)
            .copied()
            .unwrap_or_default();
        let number = |at: Option<usize>| {
            let value = facts.headers.get(at?)?.as_ref()?;
            let n: u64 = std::str::from_utf8(value).ok()?.trim().parse().ok()?;
            (n > 0).then_some(n)
        };
        Admitting {
            priority: number(at.priority)
                .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
                .or(rule_priority),
            deadline: number(at.deadline).map(Duration::from_millis),
        }
    }
}

impl Rule {
    /// Every condition holds, the cheapest looked at first.
    fn matches(&self, facts: &RouteFacts, model: &str, version: Option<&str>) -> bool {
        if self.front.is_some_and(|front| facts.front != Some(front)) {
            return false;
        }
        if !self.models.is_empty() && !self.models.iter().any(|m| m.matches(model)) {
            return false;
        }
        if let Some(wanted) = &self.version {
            if version.unwrap_or("") != wanted {
                return false;
            }
        }
        if let Some((at, value)) = &self.header {
            let got = facts.headers.get(*at).and_then(Option::as_deref);
            if got != Some(value.as_bytes()) {
                return false;
            }
        }
        if let Some(wanted) = &self.api_key {
            if facts.key_name.as_deref() != Some(wanted.as_str()) {
                return false;
            }
        }
        true
    }
}

impl Destination {
    /// The groups it sends to.
    fn groups(&self) -> Vec<&Arc<UpstreamGroup>> {
        match self {
            Destination::One(side) => vec![&side.group],
            Destination::Split { sides, .. } => sides.iter().map(|(side, _)| &side.group).collect(),
        }
    }

    /// The side a call goes to: the one, or the split's side for the
    /// call's draw.
    fn side(&self, facts: &RouteFacts, sequence: Option<&[u8]>) -> Option<&Side> {
        let (sides, total, sticky, turns) = match self {
            Destination::One(side) => return Some(side),
            Destination::Split {
                sides,
                total,
                sticky,
                turns,
            } => (sides, *total, *sticky, turns),
        };
        let key = sequence.or(match sticky {
            Sticky::None => None,
            Sticky::Header(at) => facts.headers.get(at).and_then(Option::as_deref),
            Sticky::ApiKey => facts.key_name.as_deref().map(str::as_bytes),
        });
        let draw = match key {
            Some(key) => stable_hash(key),
            None => weyl(turns.fetch_add(1, Ordering::Relaxed)),
        };
        // The draw's place in [0, total), without a division's bias.
        let point = ((u128::from(draw) * u128::from(total)) >> 64) as u64;
        sides
            .iter()
            .find(|(_, below)| point < *below)
            .or(sides.last())
            .map(|(side, _)| side)
    }
}

/// A key's draw, the same on every replica and release: FNV-1a over its
/// bytes, then spread over the whole range (splitmix64's finish), so keys
/// that differ in one byte land far apart. Written here: the hash must
/// never change with a library's version.
pub(crate) fn stable_hash(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in key {
        h ^= u64::from(*byte);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// A rule compiled against the groups (`None` only for a rule naming a
/// group that does not exist, which validation refuses first).
fn compile(
    index: usize,
    rule: &RouteRule,
    groups: &BTreeMap<String, Arc<UpstreamGroup>>,
    header_index: &mut impl FnMut(&str) -> usize,
    metrics: &Metrics,
) -> Option<Rule> {
    let label = rule.label(index);
    let group = |name: &str| groups.get(name).cloned();
    let side = |name: &str| {
        Some(Side {
            group: group(name)?,
            counts: Arc::new(CallCounts::new(metrics, &label, name)),
        })
    };
    let to = match (&rule.group, rule.split.is_empty()) {
        (Some(name), _) => side(name).map(Destination::One),
        (None, false) => {
            let mut below = 0;
            let sides = rule
                .split
                .iter()
                .filter(|(_, weight)| **weight > 0)
                .filter_map(|(name, weight)| {
                    below += u64::from(*weight);
                    Some((side(name)?, below))
                })
                .collect();
            let sticky = match (&rule.sticky_header, rule.sticky_api_key) {
                (Some(header), _) => Sticky::Header(header_index(header)),
                (None, true) => Sticky::ApiKey,
                (None, false) => Sticky::None,
            };
            Some(Destination::Split {
                sides,
                total: below,
                sticky,
                turns: AtomicU64::new(0),
            })
        }
        (None, true) => None,
    }?;
    Some(Rule {
        models: rule.models.iter().map(|m| ModelPattern::new(m)).collect(),
        version: rule.version.clone(),
        header: rule
            .header
            .as_ref()
            .map(|h| (header_index(&h.name), h.value.clone())),
        api_key: rule.api_key.clone(),
        front: rule.front,
        to,
        upstream_model: rule.upstream_model.as_deref().map(Arc::from),
        config: rule.clone(),
        mirror: rule.mirror.as_ref().and_then(|m| {
            Some(Arc::new(Mirror {
                group: group(&m.group)?,
                inflight: Arc::new(tokio::sync::Semaphore::new(m.max_inflight)),
                seen: AtomicU64::new(0),
                counts: MirrorCounts::new(metrics, &label, &m.group),
                rule: m.clone(),
            }))
        }),
        label: label.into(),
    })
}

/// Two group tables that differ at most in their addresses (which a pool
/// takes while it runs).
fn same_but_addresses(old: &Upstream, new: &Upstream) -> bool {
    let mut new = new.clone();
    new.addresses = old.addresses.clone();
    *old == new
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The routing of a configuration text (its groups' addresses never
    /// dialled: no call is made).
    fn routing(text: &str) -> Routing {
        let config = Config::from_toml(text).expect("parses");
        config.validate().expect("valid");
        Routing::new(&config, None, &Arc::new(Metrics::new()))
    }

    const GROUPS: &str = r#"
[upstreams.stable]
addresses = ["127.0.0.1:1"]
[upstreams.canary]
addresses = ["127.0.0.1:2"]
[upstreams.shadow]
addresses = ["127.0.0.1:3"]
"#;

    fn facts(front: FrontKind) -> RouteFacts {
        RouteFacts::of(front)
    }

    /// The group and rule a call about `model` takes.
    fn went(routing: &Routing, facts: &RouteFacts, model: &str) -> (String, Option<String>) {
        let routed = routing
            .route(facts, Some(model), None, None)
            .expect("routed");
        (
            routed.group.name.to_string(),
            routed.rule.as_deref().map(str::to_string),
        )
    }

    #[test]
    fn the_first_rule_that_matches_wins_and_the_rest_go_to_default() {
        let routing = routing(&format!(
            r#"{GROUPS}
[upstream]
addresses = ["127.0.0.1:4"]

[[routes]]
name = "blue-tenant"
models = ["classifier"]
header = {{ name = "X-Tenant", value = "blue" }}
group = "canary"
upstream_model = "classifier_v2"

[[routes]]
models = ["resnet*", "add_?ub"]
front = "grpc"
group = "stable"

[[routes]]
models = ["classifier"]
version = "3"
group = "shadow"
"#
        ));
        assert_eq!(routing.headers(), ["x-tenant"]);
        let mut blue = facts(FrontKind::Http);
        blue.headers = vec![Some(bytes::Bytes::from_static(b"blue"))];
        let routed = routing
            .route(&blue, Some("classifier"), None, None)
            .unwrap();
        assert_eq!(&*routed.group.name, "canary");
        assert_eq!(routed.model("classifier"), "classifier_v2");
        assert_eq!(routed.rule.as_deref(), Some("blue-tenant"));
        let http = facts(FrontKind::Http);
        let grpc = facts(FrontKind::Grpc);
        assert_eq!(
            went(&routing, &http, "classifier"),
            ("default".into(), None)
        );
        assert_eq!(
            went(&routing, &grpc, "resnet50"),
            ("stable".into(), Some("routes[1]".into()))
        );
        assert_eq!(went(&routing, &grpc, "add_sub").0, "stable");
        assert_eq!(went(&routing, &http, "resnet50").0, "default");
        let v3 = routing
            .route(&http, Some("classifier"), Some("3"), None)
            .unwrap();
        assert_eq!(&*v3.group.name, "shadow");
        // A server-wide call goes to the default group.
        let any = routing.route(&grpc, None, None, None).unwrap();
        assert_eq!(&*any.group.name, "default");
    }

    #[test]
    fn the_openai_front_is_a_front_of_its_own() {
        let routing = routing(&format!(
            "{GROUPS}\n[upstream]\naddresses = [\"127.0.0.1:4\"]\n\n\
             [[routes]]\nfront = \"openai\"\nmodels = [\"llama_vllm\"]\ngroup = \"canary\"\n\n\
             [[routes]]\nfront = \"v1\"\ngroup = \"shadow\"\n"
        ));
        let openai = facts(FrontKind::OpenAi);
        assert_eq!(
            went(&routing, &openai, "llama_vllm"),
            ("canary".into(), Some("routes[0]".into()))
        );
        // Neither the v2 front nor the legacy v1 API (`/api/...`) is it.
        assert_eq!(
            went(&routing, &facts(FrontKind::Http), "llama_vllm").0,
            "default"
        );
        assert_eq!(
            went(&routing, &facts(FrontKind::V1), "llama_vllm").0,
            "shadow"
        );
        assert_eq!(went(&routing, &openai, "other").0, "default");
    }

    #[test]
    fn no_rule_and_no_default_is_a_404_naming_the_model() {
        let routing = routing(&format!(
            "{GROUPS}\n[[routes]]\nmodels = [\"add_sub\"]\ngroup = \"stable\"\n"
        ));
        let error = routing
            .route(&facts(FrontKind::Http), Some("resnet"), None, None)
            .err()
            .expect("no route");
        assert_eq!(error.kind, Kind::NotFound);
        assert_eq!(error.message, "no route matches model 'resnet'");
        // Only mirrored to, or not reached at all: not serving.
        let stable = routing.groups.get("stable").unwrap();
        assert!(routing.serves(stable));
        assert!(!routing.serves(routing.groups.get("shadow").unwrap()));
    }

    #[test]
    fn a_split_follows_its_weights_request_by_request() {
        let routing = routing(&format!(
            "{GROUPS}\n[[routes]]\nsplit = {{ stable = 90, canary = 10 }}\n"
        ));
        let facts = facts(FrontKind::Http);
        let mut canary = 0;
        for n in 1..=20_000 {
            canary += usize::from(went(&routing, &facts, "m").0 == "canary");
            // Over any run, not only the whole: a tenth within a request
            // or two.
            if n % 100 == 0 {
                let expected = n / 10;
                assert!(canary.abs_diff(expected) <= 2, "{canary} of {n}");
            }
        }
    }

    #[test]
    fn a_keyed_request_lands_on_one_side_whatever_the_order_of_the_groups() {
        let one = routing(&format!(
            "{GROUPS}\n[[routes]]\nsplit = {{ stable = 50, canary = 50 }}\nsticky_header = \"x-session-id\"\n"
        ));
        let other = routing(
            r#"
[upstreams.canary]
addresses = ["127.0.0.1:2"]
[upstreams.shadow]
addresses = ["127.0.0.1:3"]
[upstreams.stable]
addresses = ["127.0.0.1:1"]

[[routes]]
split = { canary = 50, stable = 50 }
sticky_header = "X-Session-Id"
"#,
        );
        let mut sides = BTreeMap::<String, usize>::new();
        for session in 0..1000 {
            let key = bytes::Bytes::from(format!("session-{session}"));
            let side = |routing: &Routing| {
                // Each time the split's next turn: only the key may decide.
                let facts = RouteFacts {
                    headers: vec![Some(key.clone())],
                    ..facts(FrontKind::Http)
                };
                went(routing, &facts, "m").0
            };
            let first = side(&one);
            assert_eq!(side(&one), first);
            assert_eq!(side(&other), first);
            *sides.entry(first).or_default() += 1;
            // A sequence sticks, whatever header it carries.
            let sequence = format!("{session}");
            let on = |routing: &Routing| {
                let facts = facts(FrontKind::Grpc);
                let routed = routing
                    .route(&facts, Some("m"), None, Some(sequence.as_bytes()))
                    .unwrap();
                routed.group.name.to_string()
            };
            assert_eq!(on(&one), on(&other));
        }
        // Both sides get keys.
        assert!(sides.values().all(|n| *n > 400), "{sides:?}");
    }

    #[test]
    fn matching_a_rule_allocates_nothing() {
        let mut rules = String::new();
        for i in 0..9 {
            rules += &format!("[[routes]]\nmodels = [\"model_{i}*\"]\nheader = {{ name = \"x-tenant\", value = \"t{i}\" }}\ngroup = \"stable\"\n");
        }
        rules +=
            "[[routes]]\nsplit = { stable = 90, canary = 10 }\nsticky_header = \"x-session-id\"\n";
        let routing = routing(&format!("{GROUPS}\n{rules}"));
        let facts = RouteFacts {
            headers: vec![
                Some(bytes::Bytes::from_static(b"t-none")),
                Some(bytes::Bytes::from_static(b"s-1")),
            ],
            ..facts(FrontKind::Http)
        };
        let mut routed = None;
        let made = allocation_counter::measure(|| {
            routed = Some(routing.route(&facts, Some("add_sub"), None, None));
        });
        assert_eq!(made.count_total, 0, "{made:?}");
        // The counter counts (a zero is no vacuous pass).
        let one = allocation_counter::measure(|| drop(std::hint::black_box(String::from("x"))));
        assert_eq!(one.count_total, 1);
        let routed = routed.expect("ran").expect("routed");
        assert_eq!(routed.rule.as_deref(), Some("routes[9]"));
    }

    #[test]
    fn the_mirror_share_holds_over_any_run() {
        let routing = routing(&format!(
            "{GROUPS}\n[[routes]]\ngroup = \"stable\"\nmirror = {{ group = \"shadow\", percent = 25 }}\n"
        ));
        let routed = routing
            .route(&facts(FrontKind::Http), Some("m"), None, None)
            .unwrap();
        let mirror = routed.mirror.expect("a mirror");
        assert_eq!(&*mirror.group.name, "shadow");
        let picked = (0..1000).filter(|_| mirror.picks()).count();
        assert!((245..=255).contains(&picked), "{picked}");
    }

    #[test]
    fn stable_hashes_never_change() {
        // The side a key lands on, on every replica and every release:
        // these values were computed once and must stay.
        assert_eq!(stable_hash(b""), 0xf52a_15e9_a9b5_e89b);
        assert_eq!(stable_hash(b"session-1"), 0x8f9d_4a83_e238_4785);
        assert_eq!(stable_hash(b"42"), 0xa428_ce54_7116_3b02);
    }
}
