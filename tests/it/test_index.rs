//! The index of this test binary (the module doc of tests/it/main.rs) kept
//! true to its `mod` lines: every module declared there has a row, every
//! row names a declared module, no module has two rows, and each row says
//! what it tests and against what. `the_check_catches_drift` runs the
//! check on broken copies of main.rs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

#[test]
fn every_module_has_one_row_and_every_row_a_module() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/main.rs");
    let main = std::fs::read_to_string(path).expect("tests/it/main.rs");
    let wrong = index_problems(&main);
    assert!(
        wrong.is_empty(),
        "tests/it/main.rs's index and its modules disagree:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_check_catches_drift() {
    let main = "//! Doc.\n\
                //!\n\
                //! | module | what it tests | against |\n\
                //! | --- | --- | --- |\n\
                //! | `faults` | a backend killed under load | in-process, demos |\n\
                //! | `pool` | balancing | in-process, demos |\n\
                \n\
                mod faults;\n\
                mod pool;\n";
    assert_eq!(index_problems(main), Vec::<String>::new());

    // A module declared with no row, and a row for no module.
    let drifted = main
        .replace("mod pool;\n", "mod pool;\nmod reload;\n")
        .replace("`pool`", "`pools`");
    assert_eq!(
        index_problems(&drifted),
        [
            "`pool` is declared but has no row",
            "`reload` is declared but has no row",
            "`pools` has a row but is not declared",
        ]
    );

    // A module with two rows, and a row that leaves a cell empty.
    let doubled = main.replace(
        "//! | `pool` | balancing | in-process, demos |\n",
        "//! | `pool` | balancing | in-process, demos |\n//! | `pool` | again |  |\n",
    );
    assert_eq!(
        index_problems(&doubled),
        [
            "`pool` has 2 rows",
            "`pool`'s row does not say what it tests and against what",
        ]
    );

    // Rows after the module doc are not the index.
    let outside = main.replace("mod faults;\n", "// | `faults` | x | y |\nmod faults;\n");
    assert_eq!(index_problems(&outside), Vec::<String>::new());
}

/// What is wrong between the index in `main`'s module doc and the `mod`
/// lines of `main`, one line each.
fn index_problems(main: &str) -> Vec<String> {
    let declared: BTreeSet<&str> = main
        .lines()
        .filter_map(|line| line.trim().strip_prefix("mod "))
        .filter_map(|rest| rest.strip_suffix(';'))
        .collect();
    let mut rows: BTreeMap<&str, Vec<Vec<&str>>> = BTreeMap::new();
    let doc = main.lines().map_while(|line| line.strip_prefix("//!"));
    for line in doc {
        let Some(row) = line.trim().strip_prefix("| `") else {
            continue;
        };
        let Some((module, cells)) = row.split_once('`') else {
            continue;
        };
        let cells: Vec<&str> = cells.split('|').map(str::trim).collect();
        rows.entry(module).or_default().push(cells);
    }
    let mut wrong = Vec::new();
    for module in declared.iter().filter(|m| !rows.contains_key(*m)) {
        wrong.push(format!("`{module}` is declared but has no row"));
    }
    for (module, rows) in &rows {
        if !declared.contains(module) {
            wrong.push(format!("`{module}` has a row but is not declared"));
        }
        if rows.len() > 1 {
            wrong.push(format!("`{module}` has {} rows", rows.len()));
        }
        if !rows.iter().all(|cells| says_what_and_against(cells)) {
            wrong.push(format!(
                "`{module}`'s row does not say what it tests and against what"
            ));
        }
    }
    wrong
}

/// The cells of a row after its module's name (split on `|`): an empty
/// one before the first `|`, what it tests, against what, and an empty
/// one after the closing `|`.
fn says_what_and_against(cells: &[&str]) -> bool {
    match cells {
        ["", what, against, ""] => !what.is_empty() && !against.is_empty(),
        _ => false,
    }
}
