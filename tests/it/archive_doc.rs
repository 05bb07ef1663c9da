//! docs/archive/ holds records that are frozen: the dated benchmark log
//! that grew by hand until 2026-11-29 (history-2026-11.md). A run since
//! then goes into docs/performance.md, replacing the one before, which
//! stays in git history; none is appended to the archive. So the archive
//! must name no date after its freeze, in ISO form or in the name of a
//! run's directory (`target/bench/hop-20261129-032035`), and no page on
//! the reading path (README.md, ARCHITECTURE.md, docs/*.md) links into
//! it. Dates, not a hash of the file: a typo may still be fixed.
//! `the_checks_catch_drift` shows both checks failing on broken copies.

use std::path::Path;

use regex::Regex;

/// The last day the archived log was written.
const FROZEN_AFTER: &str = "2026-11-29";

const ARCHIVE: &str = "docs/archive/history-2026-11.md";

#[test]
fn the_archive_holds_nothing_dated_after_its_freeze() {
    let text = read(ARCHIVE);
    assert_eq!(
        dates_after(&text, FROZEN_AFTER),
        Vec::<String>::new(),
        "{ARCHIVE} is frozen: a new run goes into docs/performance.md"
    );
    // The pattern sees the dates that are there.
    assert!(dates_after(&text, "2026-11-01").len() > 20);
}

#[test]
fn no_page_on_the_reading_path_links_into_the_archive() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec!["README.md".to_string(), "ARCHITECTURE.md".to_string()];
    for entry in std::fs::read_dir(root.join("docs")).expect("docs") {
        let name = entry
            .expect("entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        if name.ends_with(".md") {
            pages.push(format!("docs/{name}"));
        }
    }
    let linking: Vec<String> = pages
        .iter()
        .filter(|page| links_into_archive(&read(page)))
        .cloned()
        .collect();
    assert!(linking.is_empty(), "link into docs/archive/: {linking:?}");
}

#[test]
fn the_checks_catch_drift() {
    let appended = format!(
        "{}\n### The hop against nginx, the run of 2026-12-04\n\n\
         One full run (`target/bench/hop-20261204-101010`).\n",
        read(ARCHIVE)
    );
    assert_eq!(
        dates_after(&appended, FROZEN_AFTER),
        ["2026-12-04", "2026-12-04"]
    );
    assert!(links_into_archive(
        "- [how they got there](docs/archive/history-2026-11.md)"
    ));
    assert!(links_into_archive(
        "see [the log](archive/history-2026-11.md)."
    ));
    assert!(!links_into_archive(
        "recorded in docs/archive/history-2026-11.md"
    ));
}

fn read(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The dates in `text` later than `day` (`YYYY-MM-DD`), as `YYYY-MM-DD`:
/// ISO dates, and the stamps of `scripts/bench`'s result names.
fn dates_after(text: &str, day: &str) -> Vec<String> {
    let dates = Regex::new(
        r"\b(20\d\d)-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])\b|\b(?:hop|results|shm)-(20\d\d)(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])",
    )
    .expect("regex");
    dates
        .captures_iter(text)
        .map(|c| {
            let part = |i: usize| c.get(i).or(c.get(i + 3)).expect("date part").as_str();
            format!("{}-{}-{}", part(1), part(2), part(3))
        })
        .filter(|date| date.as_str() > day)
        .collect()
}

/// `text` has a Markdown link whose target lies in docs/archive/.
fn links_into_archive(text: &str) -> bool {
    Regex::new(r"\]\((?:\.\./)?(?:docs/)?archive/")
        .expect("regex")
        .is_match(text)
}
