//! The layering rules of ARCHITECTURE.md, run: reads every `crate::` and
//! `super::` path in a crate's `src/` (test modules excluded) and maps it
//! to the module it names.
//!
//! In every crate of the workspace with a `src/` (the gateway and each
//! member of `[workspace] members`), it fails when modules import each
//! other in a circle.
//!
//! In the gateway's own `src/` it also fails when a module imports a layer
//! above its own, when the two fronts import each other, when a module
//! other than the allowed ones sees the generated protobuf types, or when
//! a front reaches the upstream client other than through the core's door
//! (imports `upstream`, or names its pool, calls or leases); the table
//! below is the one in ARCHITECTURE.md. And it reads every inherent `impl`
//! block there and fails when one stands outside the top-level module that
//! defines its type (a core type with HTTP methods written in the front,
//! say).
//! (The demo upstream is the crate `tensorgate-demo`, on `tensorgate-proto`
//! only: Cargo keeps it from importing the gateway.)

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Layers, top first: a module may import its own top-level module and
/// any layer below. Groups sharing a layer are peers and never import each
/// other — except in the foundations, which are small shared types.
const LAYERS: &[(&str, &[&str])] = &[
    ("composition root", &["server"]),
    ("fronts", &["front::http", "front::grpc"]),
    ("connection handling", &["connections"]),
    ("core", &["app"]),
    ("translation", &["translate"]),
    ("upstream client", &["upstream"]),
    ("codecs", &["wire"]),
    (
        "foundations",
        &[
            "body",
            "config",
            "context",
            "error",
            "json_str",
            "metrics",
            "model",
            "proto",
            "telemetry",
            "trace",
        ],
    ),
];

/// Who may see the generated gRPC types (`crate::proto`): the translation,
/// the upstream client, the gRPC front, the core's upstream calls, the
/// composition root, and `error` (gRPC codes and v1 status codes are part
/// of the one error table).
const PROTO_ALLOWED: &[&str] = &[
    "translate",
    "upstream",
    "front::grpc",
    "app",
    "server",
    "error",
];

#[test]
fn no_module_imports_a_layer_above_it_or_a_peer() {
    let graph = Graph::read(&gateway_src());
    let mut wrong = Vec::new();
    for (from, to) in graph.edges() {
        let (a, b) = (top(&from), top(&to));
        if a == b {
            continue;
        }
        let (la, lb) = (layer(a), layer(b));
        let peers = la == lb && LAYERS[la].0 != "foundations";
        if lb < la || peers {
            wrong.push(format!(
                "{from} ({}) imports {to} ({})",
                LAYERS[la].0, LAYERS[lb].0
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layers:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn only_the_allowed_layers_see_the_generated_types() {
    let graph = Graph::read(&gateway_src());
    let mut wrong = Vec::new();
    for (from, to) in graph.edges() {
        if top(&to) == "proto" && !PROTO_ALLOWED.contains(&top(&from)) {
            wrong.push(format!("{from} imports {to}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "protobuf types outside translate:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn no_crate_has_modules_importing_each_other_in_circles() {
    let mut found = Vec::new();
    for src in workspace_sources() {
        let circles = Graph::read(&src).circles();
        if !circles.is_empty() {
            found.push(format!("{}: {circles:?}", shown(&src)));
        }
    }
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

#[test]
fn the_circle_check_can_fail_in_every_crate() {
    let sources = workspace_sources();
    let load = gateway_root().join("crates/tensorgate-load/src");
    assert!(sources.contains(&load), "{sources:?}");
    for src in &sources {
        let mut graph = Graph::read(src);
        // An import read between two modules, turned back on itself, is a
        // circle. A crate with modules in several files and no import
        // read (a binary's modules taken for `main::…`, say) would pass
        // for nothing.
        let Some((from, to)) = graph
            .edges()
            .find(|(from, to)| !from.is_empty() && !nested(from, to))
        else {
            let files = modules(src).len();
            assert!(files <= 1, "{}: {files} files, no import", shown(src));
            continue;
        };
        graph.add(&to, &from);
        let circles = graph.circles();
        assert!(
            circles.iter().any(|c| c.contains(&from) && c.contains(&to)),
            "{}: {from} <-> {to} not found: {circles:?}",
            shown(src)
        );
    }
    // The circle the load tool had: its HTTP connection naming the answer
    // type where it used to live, beside the connections in `link`.
    let mut graph = Graph::read(&load);
    graph.scan("http", "use crate::link::Response;\n");
    assert_eq!(graph.circles(), [["http", "link"]]);
}

#[test]
fn super_and_groups_name_the_modules_they_should() {
    let mut graph = Graph::read(&gateway_src());
    graph.edges.clear();
    // `super` is the parent module, whether the file is `front/http/mod.rs`
    // or `front/http.rs`; a group may follow `crate::` itself.
    graph.scan(
        "front::http",
        "use super::grpc::Server;\nuse crate::{model, upstream::Client};\n",
    );
    let named: Vec<String> = graph.edges().map(|(_, to)| to).collect();
    assert_eq!(named, ["front::grpc", "model", "upstream"]);
}

#[test]
fn the_rules_catch_a_violation() {
    // The checks themselves must be able to fail.
    let mut graph = Graph::read(&gateway_src());
    graph.add("wire::tensor", "front::http::route");
    graph.add("front::http::route", "wire::tensor");
    assert!(!graph.circles().is_empty());
    let upward = graph
        .edges()
        .any(|(from, to)| layer(top(&to)) < layer(top(&from)));
    assert!(upward);
    // `crate::proto` paths resolve (the protobuf check sees them).
    assert!(graph.edges().any(|(_, to)| top(&to) == "proto"));
}

/// What a front may not name in its code: the upstream client's pool,
/// its calls and its leases. The core is the one door to the upstream
/// (`app::door`): a front that picked a backend or made a call itself
/// would escape the accounting and the policy applied there.
const UPSTREAM_NAMES: &[&str] = &["Pool", "Lease", "CallSpec", "upstream::"];

#[test]
fn no_front_reaches_the_upstream_but_through_the_core() {
    let src = gateway_src();
    let sources: Vec<(String, String)> = modules(&src)
        .into_iter()
        .filter(|(module, _)| is_front(module))
        .map(|(module, path)| {
            let text = std::fs::read_to_string(path).expect("source file");
            (module, without_tests(&text).to_string())
        })
        .collect();
    let wrong = door_violations(&Graph::read(&src), &sources);
    assert!(
        wrong.is_empty(),
        "fronts reaching the upstream without the core:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_door_rule_catches_a_violation() {
    let mut graph = Graph::read(&gateway_src());
    graph.add("front::grpc::service", "upstream::pool");
    let sources = [
        (
            "front::http::handlers::health".to_string(),
            "fn f(p: &Gateway) { let lease: Lease = todo(); }".to_string(),
        ),
        (
            "front::grpc::unary".to_string(),
            "//! Prose may say Pool and Lease.\nfn g() -> Leased {}".to_string(),
        ),
    ];
    let wrong = door_violations(&graph, &sources);
    assert_eq!(wrong.len(), 2, "{wrong:?}");
    assert!(wrong[0].contains("front::grpc::service imports upstream::pool"));
    assert!(wrong[1].contains("front::http::handlers::health names Lease"));
}

/// A front's imports of `upstream`, and the names of [`UPSTREAM_NAMES`]
/// in a front's code (comments aside; whole words).
fn door_violations(graph: &Graph, sources: &[(String, String)]) -> Vec<String> {
    let mut wrong: Vec<String> = graph
        .edges()
        .filter(|(from, to)| is_front(from) && top(to) == "upstream")
        .map(|(from, to)| format!("{from} imports {to}"))
        .collect();
    for (module, text) in sources {
        let code: String = text
            .lines()
            .map(|line| line.split("//").next().unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n");
        for name in UPSTREAM_NAMES {
            if names(&code, name) {
                wrong.push(format!("{module} names {name}"));
            }
        }
    }
    wrong
}

/// `code` holds `name` as a whole word (a path like `upstream::`: as it is).
fn names(code: &str, name: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    code.match_indices(name).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        let after = code[at + name.len()..].chars().next();
        !before.is_some_and(word) && (name.ends_with("::") || !after.is_some_and(word))
    })
}

/// A module of one of the fronts.
fn is_front(module: &str) -> bool {
    LAYERS
        .iter()
        .find(|(name, _)| *name == "fronts")
        .is_some_and(|(_, groups)| groups.contains(&top(module)))
}

#[test]
fn a_types_methods_live_in_its_own_layer() {
    let wrong = Impls::read().outside_their_module();
    assert!(
        wrong.is_empty(),
        "inherent impls outside their type's module:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_impl_rule_catches_a_violation() {
    let mut impls = Impls::read();
    // The core's type with a method written in the HTTP front.
    impls.scan(
        "front::http::handler",
        "impl Gateway {\n    pub fn handle(&self) {}\n}\nimpl<'a> Gateway<'a> {}\n",
    );
    let wrong = impls.outside_their_module();
    assert_eq!(wrong.len(), 2, "{wrong:?}");
    assert!(wrong[0].contains("front::http::handler: impl Gateway (defined in app)"));
    // A trait impl, or a type the module defines itself, is not one.
    let mut impls = Impls::read();
    impls.scan(
        "front::http::handler",
        "impl Clone for Gateway {}\nimpl From<X> for Gateway {}\nimpl Plan {}\n",
    );
    assert!(impls.outside_their_module().is_empty());
}

/// Where each type is defined, and the inherent `impl` blocks of each
/// module.
struct Impls {
    /// Type name → the modules defining a type of that name.
    defined: BTreeMap<String, BTreeSet<String>>,
    /// (module, type name) of each inherent impl.
    impls: Vec<(String, String)>,
}

impl Impls {
    fn read() -> Impls {
        let mut impls = Impls {
            defined: BTreeMap::new(),
            impls: Vec::new(),
        };
        for (module, path) in modules(&gateway_src()) {
            let text = std::fs::read_to_string(&path).expect("source file");
            impls.scan(&module, without_tests(&text));
        }
        impls
    }

    /// Reads `text`, the source of `module`: its type definitions and its
    /// inherent impls.
    fn scan(&mut self, module: &str, text: &str) {
        for line in text.lines() {
            let line = line.trim_start();
            let line = line
                .strip_prefix("pub(crate) ")
                .or_else(|| line.strip_prefix("pub(super) "))
                .or_else(|| line.strip_prefix("pub "))
                .unwrap_or(line);
            for keyword in ["struct ", "enum ", "union ", "type "] {
                if let Some(rest) = line.strip_prefix(keyword) {
                    self.defined
                        .entry(name(rest))
                        .or_default()
                        .insert(module.to_string());
                }
            }
            if let Some(rest) = line.strip_prefix("impl") {
                let rest = skip_generics(rest);
                let head = rest.split(['{', '\n']).next().unwrap_or_default();
                if !head.contains(" for ") && !head.trim().is_empty() {
                    let path = head.split(" where").next().unwrap_or_default().trim();
                    let last = path.rsplit("::").next().unwrap_or(path);
                    self.impls.push((module.to_string(), name(last)));
                }
            }
        }
    }

    /// Each inherent impl of a type of this crate written in a top-level
    /// module other than the one that defines it.
    fn outside_their_module(&self) -> Vec<String> {
        let mut wrong = Vec::new();
        for (module, ty) in &self.impls {
            let Some(homes) = self.defined.get(ty) else {
                continue;
            };
            if !homes.iter().any(|home| top(home) == top(module)) {
                let homes: Vec<&str> = homes.iter().map(|h| top(h)).collect();
                wrong.push(format!(
                    "{module}: impl {ty} (defined in {})",
                    homes.join(", ")
                ));
            }
        }
        wrong
    }
}

/// The identifier `text` starts with.
fn name(text: &str) -> String {
    text.trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// `text` after a leading `<...>` (an impl's generics), if any.
fn skip_generics(text: &str) -> &str {
    let Some(rest) = text.strip_prefix('<') else {
        return text;
    };
    let mut depth = 1;
    for (at, c) in rest.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            _ => {}
        }
        if depth == 0 {
            return &rest[at + 1..];
        }
    }
    ""
}

/// The group of the layer table a module belongs to: its top-level
/// module, or for `front`, the front it is in (`front::http`,
/// `front::grpc`: peers that share a folder).
fn top(module: &str) -> &str {
    let first = module.split("::").next().unwrap_or_default();
    if first != "front" {
        return first;
    }
    match module.match_indices("::").nth(1) {
        Some((end, _)) => &module[..end],
        None => module,
    }
}

fn layer(top: &str) -> usize {
    LAYERS
        .iter()
        .position(|(_, groups)| groups.contains(&top))
        .unwrap_or_else(|| panic!("module `{top}` is in no layer of the table"))
}

/// The modules of one crate, and which of them each one names.
struct Graph {
    modules: BTreeSet<String>,
    /// Module → the modules it names.
    edges: BTreeMap<String, BTreeSet<String>>,
}

impl Graph {
    /// The graph of the crate whose sources are in `src`.
    fn read(src: &Path) -> Graph {
        let files = modules(src);
        let mut graph = Graph {
            modules: files.keys().cloned().collect(),
            edges: BTreeMap::new(),
        };
        for (module, path) in &files {
            let text = std::fs::read_to_string(path).expect("source file");
            graph.scan(module, without_tests(&text));
        }
        graph
    }

    /// Reads `text`, the source of `module`: an edge to each other module
    /// it names (the crate root aside: every module is under it).
    fn scan(&mut self, module: &str, text: &str) {
        for target in paths(text, module) {
            if let Some(found) = resolve(&self.modules, &target) {
                if found != module && !found.is_empty() {
                    self.add(module, &found);
                }
            }
        }
    }

    fn add(&mut self, from: &str, to: &str) {
        self.edges
            .entry(from.to_string())
            .or_default()
            .insert(to.to_string());
    }

    fn edges(&self) -> impl Iterator<Item = (String, String)> + '_ {
        self.edges
            .iter()
            .flat_map(|(a, bs)| bs.iter().map(move |b| (a.clone(), b.clone())))
    }

    /// Groups of modules that reach each other (Tarjan's strongly
    /// connected components of more than one module), parent/child pairs
    /// excluded: a module and its own submodule are one unit.
    fn circles(&self) -> Vec<Vec<String>> {
        let nodes: BTreeSet<&String> = self
            .edges
            .iter()
            .flat_map(|(a, bs)| std::iter::once(a).chain(bs))
            .collect();
        let reach = |from: &String| -> BTreeSet<String> {
            let mut seen = BTreeSet::new();
            let mut todo = vec![from.clone()];
            while let Some(m) = todo.pop() {
                for next in self.edges.get(&m).into_iter().flatten() {
                    if seen.insert(next.clone()) {
                        todo.push(next.clone());
                    }
                }
            }
            seen
        };
        let reached: BTreeMap<&String, BTreeSet<String>> =
            nodes.iter().map(|n| (*n, reach(n))).collect();
        let mut circles: BTreeSet<Vec<String>> = BTreeSet::new();
        for (node, from_node) in &reached {
            let mut group: Vec<String> = from_node
                .iter()
                .filter(|other| reached.get(other).is_some_and(|r| r.contains(*node)))
                .filter(|other| !nested(node, other))
                .cloned()
                .collect();
            if !group.is_empty() {
                group.push((*node).clone());
                group.sort();
                circles.insert(group);
            }
        }
        circles.into_iter().collect()
    }
}

/// `a` is `b` or a parent or child of it.
fn nested(a: &str, b: &str) -> bool {
    a == b || a.starts_with(&format!("{b}::")) || b.starts_with(&format!("{a}::"))
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The gateway's folder: the workspace's root.
fn gateway_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn gateway_src() -> PathBuf {
    gateway_root().join("src")
}

/// The `src/` of every crate of the workspace that has one: the gateway
/// and each of `[workspace] members` in Cargo.toml.
fn workspace_sources() -> Vec<PathBuf> {
    let root = gateway_root();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let manifest: toml::Table = manifest.parse().expect("Cargo.toml is TOML");
    let members = manifest["workspace"]["members"]
        .as_array()
        .expect("[workspace] members");
    let mut sources = vec![gateway_src()];
    for member in members {
        let member = member.as_str().expect("a member is a path");
        assert!(!member.contains('*'), "member {member}: globs are not read");
        sources.push(root.join(member).join("src"));
    }
    sources.retain(|src| src.is_dir());
    sources
}

/// `src` as the repository names it (`crates/tensorgate-load/src`).
fn shown(src: &Path) -> String {
    let rel = src.strip_prefix(gateway_root()).unwrap_or(src);
    rel.display().to_string()
}

/// The modules of the crate whose sources are in `src`, each with its
/// file: `src/front/http/v1/mod.rs` → `front::http::v1`, the crate root
/// (`lib.rs`, or `main.rs` in a crate with no library) → ``. Left out:
/// a `main.rs` beside a `lib.rs` (a binary of its own, which reaches the
/// library by its public paths) and a test module in a file of its own
/// (`tests.rs`: tests may reach anywhere).
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let root = if src.join("lib.rs").is_file() {
        "lib"
    } else {
        "main"
    };
    let mut files = Vec::new();
    collect(src, &mut files);
    files
        .into_iter()
        .filter_map(|path| Some((module_of(src, &path, root)?, path)))
        .collect()
}

/// The module of the file at `path`, in a crate whose root file is
/// `root` (`lib` or `main`).
fn module_of(src: &Path, path: &Path, root: &str) -> Option<String> {
    let rel = path.strip_prefix(src).ok()?.with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if let [only] = parts.as_slice() {
        if only == "lib" || only == "main" {
            return (only == root).then(String::new);
        }
    }
    if parts.last().is_some_and(|last| last == "mod") {
        parts.pop();
    }
    if parts.last().is_some_and(|last| last == "tests") {
        return None;
    }
    Some(parts.join("::"))
}

/// The source without its `#[cfg(test)]` module (tests may reach anywhere).
fn without_tests(text: &str) -> &str {
    match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    }
}

/// Every `crate::a::b` and `super::a` path in `text`, the source of
/// `module`, with `{a, b::c}` groups expanded, as full module paths.
/// `super` is the parent of `module` whether its file is `a/b.rs` or
/// `a/b/mod.rs`.
fn paths(text: &str, module: &str) -> Vec<String> {
    let mut out = Vec::new();
    let parent = {
        let mut parts: Vec<&str> = module.split("::").collect();
        parts.pop();
        parts.join("::")
    };
    for (prefix, base) in [("crate::", String::new()), ("super::", parent)] {
        let mut rest = text;
        while let Some(at) = rest.find(prefix) {
            let before = rest[..at].chars().last();
            rest = &rest[at + prefix.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
                continue;
            }
            let path: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let path = path.trim_end_matches(':');
            let full = |path: &str, item: &str| {
                [base.as_str(), path, item]
                    .iter()
                    .filter(|s| !s.is_empty())
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("::")
            };
            out.push(full(path, ""));
            // `a::{b, c}`, or a group right after the prefix: `crate::{a, b}`.
            let after = &rest[path.len()..];
            let group = match path {
                "" => after.strip_prefix('{'),
                _ => after.strip_prefix("::{"),
            };
            if let Some(group) = group {
                let group = &group[..group.find('}').unwrap_or(group.len())];
                for item in group.split(',') {
                    let item = item.trim().split(" as ").next().unwrap_or_default();
                    let item = item.trim_matches(|c: char| c == '{' || c.is_whitespace());
                    if !item.is_empty() && item != "self" {
                        out.push(full(path, item));
                    }
                }
            }
        }
    }
    out
}

/// The longest prefix of `path` that is a module.
fn resolve(modules: &BTreeSet<String>, path: &str) -> Option<String> {
    let parts: Vec<&str> = path.split("::").collect();
    (1..=parts.len())
        .rev()
        .map(|n| parts[..n].join("::"))
        .find(|candidate| modules.contains(candidate))
}
