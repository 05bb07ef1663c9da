//! `tensorgate check-config FILE`, the real binary: a good file prints its
//! effective configuration (every section, defaults filled in) and exits 0;
//! a bad one exits 1 with the validation error naming the file (and, for
//! a routing rule, its line).

use std::path::Path;
use std::process::Command;

use tensorgate::config::Config;

/// The sections of `Config`, each printed whether the file has it or not.
const SECTIONS: [&str; 12] = [
    "server",
    "connections",
    "upstream",
    "limits",
    "http",
    "grpc",
    "admin",
    "log",
    "auth",
    "tls",
    "generate",
    "v1",
];

/// Exit code, stdout and stderr of `tensorgate check-config FILE`.
fn check_config(file: &Path) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tensorgate"))
        .arg("check-config")
        .arg(file)
        .output()
        .expect("runs");
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).expect("UTF-8");
    (out.status.code(), text(out.stdout), text(out.stderr))
}

fn repo_file(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

#[test]
fn a_good_file_prints_its_effective_config() {
    for path in ["config/tensorgate.toml", "docker/tensorgate.toml"] {
        let file = repo_file(path);
        let (code, stdout, stderr) = check_config(&file);
        assert_eq!(code, Some(0), "{path}: {stderr}");
        for section in SECTIONS {
            assert!(
                stdout.contains(&format!("\n[{section}]\n")),
                "{path}: no [{section}] in\n{stdout}"
            );
        }
        // What it prints is the file as the gateway reads it.
        let printed = Config::from_toml(&stdout).expect("the output is a config");
        assert_eq!(printed, Config::from_file(&file).expect("parses"), "{path}");
    }
    // Defaults are filled in: a file with one key prints all the others.
    let file = temp_file("one-key", "[server]\nthreads = 3\n");
    let (code, stdout, stderr) = check_config(&file);
    let _ = std::fs::remove_file(&file);
    assert_eq!(code, Some(0), "{stderr}");
    let printed = Config::from_toml(&stdout).expect("the output is a config");
    let mut expected = Config::default();
    expected.server.threads = 3;
    assert_eq!(printed, expected);
    assert!(stdout.contains("stream_timeout_ms = 600000"), "{stdout}");
}

#[test]
fn a_bad_file_exits_1_with_the_error() {
    let cases = [
        (
            "[upstream]\naddresses = [\"no-port\"]\n",
            "upstream.addresses: each must be HOST:PORT, got \"no-port\"",
        ),
        (
            "[connections]\nlinger_ms = 0\n",
            "connections.linger_ms must be at least 1",
        ),
        ("[v1]\nserver = \"x\"\n", "unknown field `server`"),
        // A misspelled endpoint group would leave a group unprotected.
        (
            "[auth]\nrestricted_api = [\"model-repositry:admin-key=s\"]\n",
            "unknown endpoint group \"model-repositry\"",
        ),
        (
            "[auth]\nopen_groups = [\"helth\"]\n",
            "unknown variant `helth`",
        ),
        // Routing mistakes, each naming its rule's line.
        (
            "[upstreams.stable]\naddresses = [\"a:1\"]\n\n[[routes]]\ngroup = \"stabel\"\n",
            "routes[0] (line 4): no group is named \"stabel\" (the groups: stable)",
        ),
        (
            "[upstreams.a]\naddresses = [\"a:1\"]\n[upstreams.b]\naddresses = [\"b:1\"]\n[[routes]]\nsplit = { a = 0, b = 0 }\n",
            "routes[0] (line 5): the split's weights add up to 0",
        ),
        (
            "[[routes]]\ngroup = \"default\"\n\n[[routes]]\nmodels = [\"m\"]\ngroup = \"default\"\n",
            "routes[1] (line 4): can never match, routes[0] (line 1) before it matches every request",
        ),
    ];
    for (text, error) in cases {
        let file = temp_file("bad", text);
        let (code, stdout, stderr) = check_config(&file);
        let _ = std::fs::remove_file(&file);
        assert_eq!(code, Some(1), "{text}: {stderr}");
        assert!(stdout.is_empty(), "{text}: printed {stdout}");
        assert!(
            stderr.contains(&format!("{}:", file.display())) && stderr.contains(error),
            "{text}: {stderr}"
        );
    }
}

/// A config file of this test's own (unique per process and name).
fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!(
        "tensorgate-check-config-{name}-{}.toml",
        std::process::id()
    ));
    std::fs::write(&path, text).expect("temp file");
    path
}
