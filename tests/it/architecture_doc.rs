//! ARCHITECTURE.md kept true to the tree: its code map has one line for
//! every module of `src/` (a file, or a folder for a `mod.rs`), each line
//! short; every repository path it cites exists, and a test it cites as
//! `file.rs::name` or `module::tests::name` is a function there; every
//! invariant names a test. `the_checks_catch_drift` shows each check
//! failing on a broken copy.

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
