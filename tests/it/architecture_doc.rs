//! ARCHITECTURE.md kept true to the tree: its code map has one line for
//! every module of `src/` (a file, or a folder for a `mod.rs`), each line
//! short; every repository path it cites exists, and a test it cites as
//! `file.rs::name` or `module::tests::name` is a function there; every
//! invariant names a test; and every Rust item it names in backticks
//! (`Type`, `Type::member`, `module::Item`, `module::function`) is defined
//! in our code (`src/`, `crates/*/src`, `tests/support`, or `proto/` for
//! the generated types), in the module or on the type the path names.
//! Other crates' paths (`tonic::Status`) and a short list of bare names
//! that are not ours (`Bytes`, HTTP headers) are left out.
//! `the_checks_catch_drift` shows each check failing on a broken copy.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use regex::Regex;

/// A code-map line longer than this is a paragraph, not a line.
const MAX_ROW_CHARS: usize = 260;

/// The top-level entries of the repository a cited path may start with.
const ROOTS: &str =
    "src|tests|docs|crates|proto|config|docker|deploy|scripts|benches|fuzz|examples";

#[test]
fn every_src_module_has_a_line_in_the_code_map() {
    let doc = Doc::read();
    let missing = missing_modules(&doc.text, &src_modules(&doc.root));
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's code map has no line for: {missing:?}"
    );
    let long = long_rows(&doc.text);
    assert!(
        long.is_empty(),
        "code-map lines over {MAX_ROW_CHARS} characters: {long:#?}"
    );
}

#[test]
fn every_path_and_test_it_cites_exists() {
    let doc = Doc::read();
    let dead = dead_citations(&doc.text, &doc.root);
    assert!(
        dead.is_empty(),
        "ARCHITECTURE.md cites what does not exist: {dead:#?}"
    );
}

#[test]
fn every_invariant_names_a_test() {
    let doc = Doc::read();
    let untested = invariants_without_a_test(&doc.text);
    assert!(
        untested.is_empty(),
        "invariants that name no test: {untested:#?}"
    );
}

#[test]
fn every_rust_item_it_names_exists() {
    let doc = Doc::read();
    let unknown = Items::read(&doc.root).unknown(&doc.text);
    assert!(
        unknown.is_empty(),
        "ARCHITECTURE.md names Rust items that are not there: {unknown:#?}"
    );
}

#[test]
fn the_crate_root_doc_names_every_module() {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs"))
        .expect("src/lib.rs");
    let unnamed = modules_missing_from_lib_doc(&lib);
    assert!(
        unnamed.is_empty(),
        "src/lib.rs's doc does not name: {unnamed:?}"
    );
}

#[test]
fn the_checks_catch_drift() {
    let doc = Doc::read();
    let modules = src_modules(&doc.root);
    // A module the map forgot.
    let mut more = modules.clone();
    more.insert("src/front/forgotten.rs".to_string());
    assert_eq!(
        missing_modules(&doc.text, &more),
        ["src/front/forgotten.rs"]
    );
    // A path that is gone, a test that is gone, a line grown into a paragraph,
    // an invariant with no test.
    let broken = doc
        .text
        .replacen("| `src/error.rs` |", "| `src/errors.rs` |", 1)
        .replacen(
            "| `src/model.rs` |",
            &format!("| `src/model.rs` | {} |", "word ".repeat(60)),
            1,
        )
        .replacen(
            "## Invariants\n",
            "## Invariants\n\n- Nothing is ever lost.\n- Proved by \
             `tests/it/process.rs::no_such_test` and `wire::tensor::tests::no_such_test`.\n",
            1,
        );
    assert_eq!(missing_modules(&broken, &modules), ["src/error.rs"]);
    let dead = dead_citations(&broken, &doc.root);
    for cited in [
        "src/errors.rs",
        "tests/it/process.rs::no_such_test",
        "wire::tensor::tests::no_such_test",
    ] {
        assert!(
            dead.iter().any(|d| d.starts_with(cited)),
            "{cited} in {dead:?}"
        );
    }
    assert_eq!(long_rows(&broken).len(), 1);
    assert_eq!(
        invariants_without_a_test(&broken),
        ["- Nothing is ever lost."]
    );
    // Rust items that are not there: invented ones, a member on a type that
    // does not have it (`fn streamed` exists, on another type), an item in a
    // module that does not hold it (`Walker` lives in `upstream::reply`). An
    // item that is there, and names that are not ours, pass.
    let items = Items::read(&doc.root);
    let named = "`Inventedtype`, `Pool::invented`, `no_such_module::Pool`, \
                 `app::Invented`, `EncodedInfer::streamed`, `answer::Walker`, \
                 `made_up!`, `wire::json::invented_fn()`; fine: `Pool::pick`, \
                 `reply::Walker`, `Route::Infer(ModelRef { name })`, `tonic::Status`, \
                 `Bytes::slice`, `ModelInferRequest`, `Fleet`, `server`";
    assert_eq!(
        items.unknown(named),
        [
            "`Inventedtype`: no such item",
            "`Pool::invented`: Pool has no `invented`",
            "`no_such_module::Pool`: no module `no_such_module`",
            "`app::Invented`: no `Invented` in `app`",
            "`EncodedInfer::streamed`: EncodedInfer has no `streamed`",
            "`answer::Walker`: no `Walker` in `answer`",
            "`made_up!`: no such item",
            "`wire::json::invented_fn()`: no `invented_fn` in `wire::json`",
        ]
    );
    // A module the crate root declares but its doc does not name.
    let lib = "//! `a` and `b`.\npub mod a;\npub(crate) mod b;\nmod c;\n";
    assert_eq!(modules_missing_from_lib_doc(lib), ["c"]);
}

struct Doc {
    root: PathBuf,
    text: String,
}

impl Doc {
    fn read() -> Doc {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
        Doc { root, text }
    }
}

/// The text of the section under `## {title}`, up to the next `## `.
fn section<'a>(text: &'a str, title: &str) -> &'a str {
    let start = text
        .find(&format!("\n## {title}\n"))
        .unwrap_or_else(|| panic!("no section {title}"));
    let body = &text[start + title.len() + 5..];
    &body[..body.find("\n## ").unwrap_or(body.len())]
}

/// Every module of `src/`, as the code map names it: `src/a/b.rs`, or
/// `src/a/` for `src/a/mod.rs`.
fn src_modules(root: &Path) -> BTreeSet<String> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).expect("src dir") {
            let path = entry.expect("dir entry").path();
            let rel = path
                .strip_prefix(root)
                .expect("inside")
                .to_string_lossy()
                .into_owned();
            if path.is_dir() {
                walk(&path, root, out);
            } else if let Some(dir) = rel.strip_suffix("mod.rs") {
                out.insert(dir.to_string());
            } else if rel.ends_with(".rs") {
                out.insert(rel);
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(&root.join("src"), root, &mut out);
    out
}

/// The paths in the first cell of the code map's rows.
fn code_map_rows(text: &str) -> Vec<(&str, &str)> {
    section(text, "Code map")
        .lines()
        .filter_map(|line| {
            let path = line.strip_prefix("| `")?;
            Some((&path[..path.find('`')?], line))
        })
        .collect()
}

fn missing_modules(text: &str, modules: &BTreeSet<String>) -> Vec<String> {
    let mapped: BTreeSet<&str> = code_map_rows(text).into_iter().map(|(p, _)| p).collect();
    modules
        .iter()
        .filter(|m| !mapped.contains(m.as_str()))
        .cloned()
        .collect()
}

fn long_rows(text: &str) -> Vec<String> {
    code_map_rows(text)
        .into_iter()
        .filter(|(_, line)| line.chars().count() > MAX_ROW_CHARS)
        .map(|(path, line)| format!("{path}: {} characters", line.chars().count()))
        .collect()
}

/// Repository paths (`src/...`, `tests/it/x.rs::test_name`, ...) and unit
/// tests (`wire::tensor::tests::name`) cited anywhere in the text that do
/// not exist.
fn dead_citations(text: &str, root: &Path) -> Vec<String> {
    let paths = Regex::new(&format!(
        r"(?:^|[\s`(\[|])((?:{ROOTS})/[A-Za-z0-9_./-]*[A-Za-z0-9_/])(?:::([A-Za-z0-9_]+))?"
    ))
    .expect("regex");
    let unit_tests = Regex::new(r"`((?:[a-z_0-9]+::)+)tests::([a-z_0-9]+)`").expect("regex");
    let mut dead = Vec::new();
    for line in text.lines() {
        for found in paths.captures_iter(line) {
            let path = &found[1];
            if path.contains("*") {
                continue;
            }
            let file = root.join(path);
            match found.get(2) {
                _ if !file.exists() => dead.push(path.to_string()),
                Some(name) if !defines(&file, name.as_str()) => {
                    dead.push(format!("{path}::{}", name.as_str()))
                }
                _ => {}
            }
        }
        for found in unit_tests.captures_iter(line) {
            let module = found[1].trim_end_matches("::").replace("::", "/");
            let name = &found[2];
            let candidates = [format!("src/{module}.rs"), format!("src/{module}/mod.rs")];
            if !candidates.iter().any(|f| defines(&root.join(f), name)) {
                dead.push(format!("{}tests::{name}", &found[1]));
            }
        }
    }
    dead
}

/// `file` defines a function `name`.
fn defines(file: &Path, name: &str) -> bool {
    std::fs::read_to_string(file).is_ok_and(|text| text.contains(&format!("fn {name}(")))
}

/// The bullets of `## Invariants` that cite no test: no file under
/// `tests/` or `fuzz/`, and no `::tests::` unit test.
fn invariants_without_a_test(text: &str) -> Vec<String> {
    let mut bullets: Vec<String> = Vec::new();
    for line in section(text, "Invariants").lines() {
        if line.starts_with("- ") {
            bullets.push(line.to_string());
        } else if let (Some(last), true) = (bullets.last_mut(), line.starts_with("  ")) {
            last.push(' ');
            last.push_str(line.trim());
        }
    }
    bullets
        .into_iter()
        .filter(|b| !(b.contains("tests/") || b.contains("fuzz/") || b.contains("::tests::")))
        .collect()
}

/// The modules `lib` declares (`mod x;`) that its `//!` doc does not name
/// as `` `x` ``.
fn modules_missing_from_lib_doc(lib: &str) -> Vec<String> {
    let doc: String = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .collect::<Vec<_>>()
        .join("\n");
    let declared = Regex::new(r"(?m)^(?:pub(?:\([a-z]+\))? )?mod ([a-z_0-9]+);").expect("regex");
    declared
        .captures_iter(lib)
        .map(|c| c[1].to_string())
        .filter(|m| !doc.contains(&format!("`{m}`")))
        .collect()
}

/// Names the map writes in backticks that look like our items but are
/// not: other crates' types it names bare, Triton's C++ and protobuf's,
/// a `/proc` field, HTTP headers, std's and tokio's.
const NOT_OURS: &[&str] = &[
    "Bytes",
    "Channel",
    "LoadBalancer",
    "Backends",
    "TritonJson",
    "DebugString",
    "ShortDebugString",
    "VmHWM",
    "Via",
    "Expect",
    "Authorization",
    "process::exit",
    "select!",
];

/// Paths starting with these are other crates' items.
const EXTERNAL_CRATES: &[&str] = &[
    "std",
    "core",
    "alloc",
    "bytes",
    "futures",
    "h2",
    "http",
    "http_body",
    "hyper",
    "mimalloc",
    "pingora",
    "prost",
    "regex",
    "serde",
    "serde_json",
    "tokio",
    "tonic",
    "tower",
    "tracing",
];

/// What our Rust code defines: every file of `src/`, `crates/*/src` and
/// `tests/support` with its module path, and the names of `proto/`.
struct Items {
    files: Vec<Source>,
    proto: BTreeSet<String>,
}

struct Source {
    /// The module path: `src/wire/json.rs` is `wire::json`, a crate's
    /// `lib.rs` its crate's name.
    module: Vec<String>,
    /// Names defined (`fn`, `struct`, `const`, `mod`, `macro_rules!`, enum
    /// variants, ...) or re-exported (`pub use`) in the file.
    defines: BTreeSet<String>,
    /// Types the file defines or has an `impl` block for.
    types: BTreeSet<String>,
}

impl Items {
    fn read(root: &Path) -> Items {
        let mut trees = vec![(root.join("src"), Vec::new())];
        for entry in std::fs::read_dir(root.join("crates")).expect("crates") {
            let krate = entry.expect("entry").path();
            let name = krate
                .file_name()
                .expect("name")
                .to_string_lossy()
                .replace('-', "_");
            trees.push((krate.join("src"), vec![name]));
        }
        trees.push((root.join("tests/support"), vec!["support".to_string()]));
        let patterns = Patterns::new();
        let mut files = Vec::new();
        for (tree, prefix) in trees {
            let mut paths = Vec::new();
            files_named(&tree, "rs", &mut paths);
            for path in paths {
                let rel = path.strip_prefix(&tree).expect("inside").with_extension("");
                let mut module = prefix.clone();
                module.extend(rel.iter().map(|s| s.to_string_lossy().into_owned()));
                if matches!(
                    module.last().map(String::as_str),
                    Some("mod" | "lib" | "main")
                ) {
                    module.pop();
                }
                let text = std::fs::read_to_string(&path).expect("source");
                files.push(Source::parse(module, &text, &patterns));
            }
        }
        let mut proto_files = Vec::new();
        files_named(&root.join("proto"), "proto", &mut proto_files);
        let named = Regex::new(
            r"(?m)\b(?:message|enum|service|rpc)\s+(\w+)|^\s*([A-Z][A-Z0-9_]*)\s*=\s*\d",
        )
        .expect("regex");
        let mut proto = BTreeSet::new();
        for path in proto_files {
            let text = std::fs::read_to_string(path).expect("proto");
            for c in named.captures_iter(&text) {
                proto.insert(c.get(1).or(c.get(2)).expect("name").as_str().to_string());
            }
        }
        Items { files, proto }
    }

    /// The backticked names of `text` that look like our Rust items and are
    /// not there, each with what is missing.
    fn unknown(&self, text: &str) -> Vec<String> {
        let spans = Regex::new(r"`([^`\n]+)`").expect("regex");
        let path = Regex::new(r"^[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*!?$").expect("regex");
        let mut seen = BTreeSet::new();
        let mut unknown = Vec::new();
        for span in spans.captures_iter(text).map(|c| c[1].to_string()) {
            // `Kind::status()`, `Piece::Rest(n)`: the path before the call.
            let name = span.split('(').next().unwrap_or_default().trim();
            if !path.is_match(name) || NOT_OURS.contains(&name) || !seen.insert(span.clone()) {
                continue;
            }
            if let Err(missing) = self.resolve(name) {
                unknown.push(format!("`{span}`: {missing}"));
            }
        }
        unknown
    }

    /// Whether the item `name` names is there; if not, what is missing.
    fn resolve(&self, name: &str) -> Result<(), String> {
        if let Some(mac) = name.strip_suffix('!') {
            return self.anywhere(mac);
        }
        let mut segments: Vec<&str> = name.split("::").collect();
        if segments[0] == "crate" {
            segments.remove(0);
        }
        let first = segments[0];
        if EXTERNAL_CRATES.contains(&first)
            || matches!(first, "super" | "self")
            || segments.contains(&"tests")
        {
            return Ok(()); // another crate's, or a test (checked with the paths)
        }
        let split = segments
            .iter()
            .position(|s| s.starts_with(|c: char| c.is_ascii_uppercase()))
            .unwrap_or(segments.len());
        let (module, rest) = segments.split_at(split);
        match (module, rest) {
            // `Type`, `CONST`: a single capitalised word is ours when it is
            // a type (`Plan`) or a constant (`STREAM_FROM`); others are
            // status codes and such (`INTERNAL`).
            ([], [one]) if one.contains(|c: char| c.is_ascii_lowercase()) || one.contains('_') => {
                self.anywhere(one)
            }
            ([], [_]) => Ok(()),
            // A plain word (`server`): a module, a key, a field; not checked.
            ([_], []) => Ok(()),
            // `module::path`: the module, or an item in the module before it.
            (module, []) if !self.module_files(module).is_empty() => Ok(()),
            (module, []) => {
                let (item, parent) = module.split_last().expect("two segments");
                self.in_module(parent, item)
            }
            (module, [ty, member @ ..]) => {
                if NOT_OURS.contains(ty) {
                    return Ok(());
                }
                if module.is_empty() {
                    self.anywhere(ty)?;
                } else {
                    self.in_module(module, ty)?;
                }
                match member {
                    [] => Ok(()),
                    [member] => self.member(ty, member),
                    _ => Err("a path past a member".to_string()),
                }
            }
        }
    }

    fn anywhere(&self, name: &str) -> Result<(), String> {
        let ours = self.files.iter().any(|f| f.defines.contains(name));
        if ours || self.proto.contains(name) {
            Ok(())
        } else {
            Err("no such item".to_string())
        }
    }

    /// The files of every module whose path ends with `module`.
    fn module_files(&self, module: &[&str]) -> Vec<&Source> {
        self.files
            .iter()
            .filter(|f| ends_with(&f.module, module))
            .collect()
    }

    /// `item` is defined in a module whose path ends with `module`, or in
    /// one of its submodules.
    fn in_module(&self, module: &[&str], item: &str) -> Result<(), String> {
        let modules = self.module_files(module);
        if modules.is_empty() {
            return Err(format!("no module `{}`", module.join("::")));
        }
        let found = self.files.iter().any(|f| {
            f.defines.contains(item) && modules.iter().any(|m| f.module.starts_with(&m.module))
        });
        if found {
            Ok(())
        } else {
            Err(format!("no `{item}` in `{}`", module.join("::")))
        }
    }

    /// `member` (a method, constant or variant) is defined in a file that
    /// defines or implements `ty`. A generated type has no such file.
    fn member(&self, ty: &str, member: &str) -> Result<(), String> {
        let mut files = self
            .files
            .iter()
            .filter(|f| f.types.contains(ty))
            .peekable();
        if files.peek().is_none() && self.proto.contains(ty) {
            return Ok(());
        }
        if files.any(|f| f.defines.contains(member)) {
            Ok(())
        } else {
            Err(format!("{ty} has no `{member}`"))
        }
    }
}

/// How a source file is read for its names (compiled once for all files).
struct Patterns {
    items: Regex,
    variants: Regex,
    uses: Regex,
    word: Regex,
    types: Regex,
}

impl Patterns {
    fn new() -> Patterns {
        let regex = |r: &str| Regex::new(r).expect("regex");
        Patterns {
            items: regex(
                r"\b(?:struct|enum|trait|type|fn|const|static|mod|union)\s+(\w+)|macro_rules!\s*(\w+)",
            ),
            // Enum variants (and, loosely, anything written like one).
            variants: regex(r"(?m)^\s+([A-Z]\w*)\s*(?:[({,=]|$)"),
            uses: regex(r"(?m)^\s*pub(?:\([a-z]+\))?\s+use\s+([^;]+);"),
            word: regex(r"\w+"),
            types: regex(r"\b(?:struct|enum|trait|type)\s+(\w+)"),
        }
    }
}

impl Source {
    fn parse(module: Vec<String>, text: &str, patterns: &Patterns) -> Source {
        let Patterns {
            items,
            variants,
            uses,
            word,
            types,
        } = patterns;
        let mut defines = BTreeSet::new();
        for c in items.captures_iter(text) {
            defines.insert(c.get(1).or(c.get(2)).expect("name").as_str().to_string());
        }
        defines.extend(variants.captures_iter(text).map(|c| c[1].to_string()));
        for c in uses.captures_iter(text) {
            defines.extend(word.find_iter(&c[1]).map(|m| m.as_str().to_string()));
        }
        let mut implemented: BTreeSet<String> = types
            .captures_iter(text)
            .map(|c| c[1].to_string())
            .collect();
        implemented.extend(text.lines().filter_map(impl_target));
        Source {
            module,
            defines,
            types: implemented,
        }
    }
}

/// The type an `impl` line is for: `impl<'a> Foo<'a> {` and
/// `impl fmt::Debug for Foo {` are both for `Foo`.
fn impl_target(line: &str) -> Option<String> {
    let line = line.trim_start();
    let mut rest = line
        .strip_prefix("unsafe ")
        .unwrap_or(line)
        .strip_prefix("impl")?;
    if rest.starts_with('<') {
        let mut depth = 0;
        let end = rest.find(|c| {
            depth += match c {
                '<' => 1,
                '>' => -1,
                _ => 0,
            };
            depth == 0
        })?;
        rest = &rest[end + 1..];
    } else if !rest.starts_with(' ') {
        return None; // `implements`, ...
    }
    let target = rest.rsplit(" for ").next()?.trim_start();
    let path = target
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .next()?;
    let name = path.rsplit("::").next()?;
    name.starts_with(|c: char| c.is_ascii_uppercase())
        .then(|| name.to_string())
}

/// `module` ends with the segments `tail`.
fn ends_with(module: &[String], tail: &[&str]) -> bool {
    module.len() >= tail.len()
        && module[module.len() - tail.len()..]
            .iter()
            .zip(tail)
            .all(|(a, b)| a == b)
}

/// The files below `dir` whose names end in `.{extension}`.
fn files_named(dir: &Path, extension: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            files_named(&path, extension, out);
        } else if path.extension().is_some_and(|e| e == extension) {
            out.push(path);
        }
    }
}
