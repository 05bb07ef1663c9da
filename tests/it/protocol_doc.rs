//! The protocol pages and their citations kept in step. Code, tests and
//! documents cite docs/protocol-v2.md as `v2 §N.M` and docs/protocol-v1.md
//! as `v1 §N.M` (or by path, `docs/protocol-v2.md §N.M`). Every such
//! citation must name a section its page heads, and a `row`, `rule`,
//! `step` or `item` after it must be one that section holds (a table row
//! `| K |`, a list entry `K.`). What the split of the old single page left
//! behind fails too: a `protocol §` citation, a mention of
//! `protocol.md`, and, outside the two pages, a bare `§N` that does not say
//! its page (`RFC 9113 §3.4` is another document's and passes). Inside a
//! page a bare `§N` means that page, and no number is headed twice.
//! `the_checks_catch_drift` shows each check failing on a broken copy.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::OnceLock;

use regex::Regex;

/// The trees and files whose citations are checked.
const CITING: &[&str] = &[
    "src",
    "tests",
    "crates",
    "fuzz",
    "docs",
    "proto",
    "README.md",
    "ARCHITECTURE.md",
];

/// Left out of the scan: the frozen archive, and this file, which quotes
/// broken citations on purpose.
const NOT_SCANNED: &[&str] = &["docs/archive", "tests/it/protocol_doc.rs"];

/// Folders that hold no citations of ours.
const SKIPPED_DIRS: &[&str] = &["target", "corpus", "artifacts", "__pycache__"];

#[test]
fn every_citation_names_what_its_page_has() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let pages = Pages::read(root);
    let mut problems = Vec::new();
    let mut cited = 0;
    for file in citing_files(root) {
        let Ok(text) = std::fs::read_to_string(root.join(&file)) else {
            continue; // not text
        };
        cited += citation().find_iter(&Flat::new(&text).text).count();
        problems.extend(pages.check(&file, &text, pages.named_by_path(&file)));
    }
    assert!(problems.is_empty(), "{problems:#?}");
    // The scan saw the citations at all (a broken pattern would pass).
    assert!(cited > 200, "only {cited} citations found");
}

#[test]
fn each_page_heads_each_number_once() {
    let pages = Pages::read(Path::new(env!("CARGO_MANIFEST_DIR")));
    for (name, page) in &pages.0 {
        assert!(
            page.twice.is_empty(),
            "{name}: headed twice: {:?}",
            page.twice
        );
        assert!(
            page.sections.len() > 10,
            "{name}: {} sections",
            page.sections.len()
        );
    }
}

#[test]
fn the_checks_catch_drift() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let pages = Pages::read(root);
    let code = "// (v2 §12.1, v2 §0.3 rule 11, v2 §1 rows 17–30, v2 §2.1–§2.9, v1 §4)\n\
                // v2 §2.3 item\n// 9, and v1 §2.4 step 1\n\
                // (protocol §2.1), (protocol\n// §4.1), see docs/protocol.md\n\
                // bare §2.3; RFC 9113 §3.4 is fine, as are v2 §1 row 21 and v1 §3.1\n";
    assert_eq!(
        pages.check("src/x.rs", code, None),
        [
            "src/x.rs:1: `v2 §12.1`: docs/protocol-v2.md has no §12.1",
            "src/x.rs:1: `v2 §0.3 rule 11`: §0.3 has no entry 11",
            "src/x.rs:1: `v2 §1 rows 17–30`: §1 has no row 22",
            "src/x.rs:1: `v2 §2.1–§2.9`: docs/protocol-v2.md has no §2.9",
            "src/x.rs:1: `v1 §4`: docs/protocol-v1.md has no §4",
            "src/x.rs:2: `v2 §2.3 item 9`: §2.3 has no entry 9",
            "src/x.rs:3: `v1 §2.4 step 1`: §2.4 has no entry 1",
            "src/x.rs:4: an old citation: `protocol §`",
            "src/x.rs:4: an old citation: `protocol §`",
            "src/x.rs:5: an old citation: `protocol.md`",
            "src/x.rs:6: `§2.3` does not say its page (v2 §… or v1 §…)",
        ]
    );
    // Inside a page a bare § is that page's; the other page's must be named.
    assert_eq!(
        pages.check("docs/protocol-v1.md", "(§7.3, §2.4, §0.1)", Some("v1")),
        ["docs/protocol-v1.md:1: `§0.1`: docs/protocol-v1.md has no §0.1"]
    );
    // A section renumbered in the page: what cited it goes dead.
    let v2 = std::fs::read_to_string(root.join("docs/protocol-v2.md")).expect("page");
    let renumbered = v2.replacen("### §2.1 Order", "### §2.9 Order", 1);
    let broken = Pages::from([("v2", renumbered.as_str()), ("v1", "## §7 x\n")]);
    let dead = broken.check("src/y.rs", "(v2 §2.1 step 5)", None);
    assert_eq!(
        dead,
        ["src/y.rs:1: `v2 §2.1 step 5`: docs/protocol-v2.md has no §2.1"]
    );
    // A number headed twice.
    let twice = Page::parse("## §1 a\n### §1.1 b\n### v1 §1.1 c\n");
    assert_eq!(twice.twice, ["1.1"]);
}

/// The two pages, by the prefix that cites them.
struct Pages(BTreeMap<&'static str, Page>);

impl Pages {
    fn read(root: &Path) -> Pages {
        let read = |name| {
            std::fs::read_to_string(root.join(page_path(name)))
                .unwrap_or_else(|e| panic!("{}: {e}", page_path(name)))
        };
        let (v2, v1) = (read("v2"), read("v1"));
        Pages::from([("v2", v2.as_str()), ("v1", v1.as_str())])
    }

    fn from<const N: usize>(pages: [(&'static str, &str); N]) -> Pages {
        Pages(
            pages
                .into_iter()
                .map(|(name, text)| (name, Page::parse(text)))
                .collect(),
        )
    }

    /// The page a file is, if it is one: its bare `§N` mean itself.
    fn named_by_path(&self, file: &str) -> Option<&'static str> {
        self.0.keys().copied().find(|name| page_path(name) == file)
    }

    /// What is wrong with the citations of `text` (the file `file`; `own`:
    /// the page it is, if it is one), in the order they stand.
    fn check(&self, file: &str, text: &str, own: Option<&str>) -> Vec<String> {
        let flat = Flat::new(text);
        let mut found: Vec<(usize, String)> = Vec::new();
        let mut problem = |at: usize, what: String| {
            found.push((at, format!("{file}:{}: {what}", flat.line(at))));
        };
        for old in old_citation().find_iter(&flat.text) {
            let kind = if old.as_str().ends_with('§') {
                "protocol §"
            } else {
                "protocol.md"
            };
            problem(old.start(), format!("an old citation: `{kind}`"));
        }
        for c in citation().captures_iter(&flat.text) {
            let whole = c.get(0).expect("match");
            let cited = whole.as_str().trim_end();
            let named = c.name("path").or(c.name("page")).map(|m| m.as_str());
            let Some(name) = named.or(own) else {
                let before = &flat.text[..whole.start()];
                if !(old_citation_before().is_match(before) || external_before().is_match(before)) {
                    problem(
                        whole.start(),
                        format!("`{cited}` does not say its page (v2 §… or v1 §…)"),
                    );
                }
                continue;
            };
            let page = &self.0[name];
            let missing = [c.name("num"), c.name("to")]
                .into_iter()
                .flatten()
                .find(|n| !page.sections.contains_key(n.as_str()));
            if let Some(n) = missing {
                let n = n.as_str();
                problem(
                    whole.start(),
                    format!("`{cited}`: {} has no §{n}", page_path(name)),
                );
                continue;
            }
            let Some(first) = c.name("entry") else {
                continue;
            };
            let num = &c["num"];
            let section = &page.sections[num];
            let first: u32 = first.as_str().parse().expect("digits");
            let last: u32 = c
                .name("last")
                .map_or(first, |l| l.as_str().parse().expect("digits"));
            let (held, noun) = if c["kind"].starts_with("row") {
                (&section.rows, "row")
            } else {
                (&section.entries, "entry")
            };
            if let Some(k) = (first..=last).find(|k| !held.contains(k)) {
                problem(
                    whole.start(),
                    format!("`{cited}`: §{num} has no {noun} {k}"),
                );
            }
        }
        found.sort();
        found.into_iter().map(|(_, p)| p).collect()
    }
}

fn page_path(name: &str) -> String {
    format!("docs/protocol-{name}.md")
}

/// One page: its sections by number, and the numbers headed more than once.
struct Page {
    sections: BTreeMap<String, Section>,
    twice: Vec<String>,
}

/// What a section holds before the next heading: the first cells of its
/// table rows (`| K |`) and its numbered list entries (`K. `).
#[derive(Default)]
struct Section {
    rows: BTreeSet<u32>,
    entries: BTreeSet<u32>,
}

impl Page {
    fn parse(text: &str) -> Page {
        let heading = Regex::new(r"^#+ (?:v1 )?§(\d+(?:\.\d+)?)(?:\s|$)").expect("regex");
        let row = Regex::new(r"^\| (\d+) \|").expect("regex");
        let entry = Regex::new(r"^(\d+)\. ").expect("regex");
        let mut page = Page {
            sections: BTreeMap::new(),
            twice: Vec::new(),
        };
        let (mut current, mut fenced) = (None, false);
        for line in text.lines() {
            if line.starts_with("```") {
                fenced = !fenced;
            }
            if fenced {
                continue;
            }
            if line.starts_with('#') {
                current = heading.captures(line).map(|c| c[1].to_string());
                if let Some(num) = &current {
                    if page
                        .sections
                        .insert(num.clone(), Section::default())
                        .is_some()
                    {
                        page.twice.push(num.clone());
                    }
                }
                continue;
            }
            let Some(section) = current.as_ref().and_then(|n| page.sections.get_mut(n)) else {
                continue;
            };
            if let Some(c) = row.captures(line) {
                section.rows.insert(c[1].parse().expect("digits"));
            }
            if let Some(c) = entry.captures(line) {
                section.entries.insert(c[1].parse().expect("digits"));
            }
        }
        page
    }
}

/// A citation: `v2 §N.M`, `v1 §N.M` or `docs/protocol-vN.md §N.M` (the
/// page), or a bare `§N.M`; then an optional range end (`–§2.6`, `–3`)
/// and an optional entry (`row K`, `rules K–L`, `step K`, `item K`).
fn citation() -> &'static Regex {
    static REGEX: OnceLock<Regex> = OnceLock::new();
    REGEX.get_or_init(|| {
        Regex::new(
            r"(?x)
            (?: (?:docs/)?protocol-(?P<path>v[12])\.md\x20 | \b(?P<page>v[12])\x20 )?
            §(?P<num>\d+(?:\.\d+)?)
            (?: [–-]§?(?P<to>\d+(?:\.\d+)?) )?
            (?: \x20(?P<kind>rows?|rules?|steps?|items?)\x20(?P<entry>\d+)(?:[–-](?P<last>\d+))? )?",
        )
        .expect("regex")
    })
}

/// How the single page was cited before the split: `protocol §2.1`,
/// `protocol v1 §3.1`, `docs/protocol.md`.
fn old_citation() -> &'static Regex {
    static REGEX: OnceLock<Regex> = OnceLock::new();
    REGEX.get_or_init(|| {
        Regex::new(r"\bprotocol(?:\.md)? (?:v1 )?§|(?:^|[^\w-])protocol\.md").expect("regex")
    })
}

/// A bare `§` that belongs to an old citation (reported as that).
fn old_citation_before() -> &'static Regex {
    static REGEX: OnceLock<Regex> = OnceLock::new();
    REGEX.get_or_init(|| Regex::new(r"\bprotocol(?:\.md)? (?:v1 )?$").expect("regex"))
}

/// A bare `§` of another document: `RFC 9113 §3.4`.
fn external_before() -> &'static Regex {
    static REGEX: OnceLock<Regex> = OnceLock::new();
    REGEX.get_or_init(|| Regex::new(r"\b(?:RFC|ISO|IEEE|ECMA)[ -]?\d+[,:]? $").expect("regex"))
}

/// The text of a file with each line break, and the comment marker or
/// heading mark that opens the next line, read as one space, so that a
/// citation wrapped over two comment lines reads as one; `line` maps an
/// offset back to its line.
struct Flat {
    text: String,
    starts: Vec<usize>,
}

impl Flat {
    fn new(text: &str) -> Flat {
        let mut flat = Flat {
            text: String::new(),
            starts: Vec::new(),
        };
        for line in text.lines() {
            flat.starts.push(flat.text.len());
            let line = line.trim_start().trim_start_matches(['/', '!', '#', '*']);
            flat.text.push_str(line.trim());
            flat.text.push(' ');
        }
        flat
    }

    /// The 1-based line of an offset.
    fn line(&self, offset: usize) -> usize {
        self.starts.partition_point(|&s| s <= offset)
    }
}

/// The files below `CITING`, as paths relative to the root with `/`.
fn citing_files(root: &Path) -> Vec<String> {
    fn walk(path: &Path, root: &Path, out: &mut Vec<String>) {
        let rel = path
            .strip_prefix(root)
            .expect("inside")
            .to_string_lossy()
            .replace('\\', "/");
        let name = path
            .file_name()
            .map_or(String::new(), |n| n.to_string_lossy().into_owned());
        if NOT_SCANNED.contains(&rel.as_str()) || name.starts_with('.') {
            return;
        }
        if path.is_dir() {
            if SKIPPED_DIRS.contains(&name.as_str()) {
                return;
            }
            for entry in std::fs::read_dir(path).expect("dir") {
                walk(&entry.expect("dir entry").path(), root, out);
            }
        } else if path.is_file() {
            out.push(rel);
        }
    }
    let mut out = Vec::new();
    for top in CITING {
        walk(&root.join(top), root, &mut out);
    }
    out.sort();
    out
}
