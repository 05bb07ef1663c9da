//! Bridge mode of system shared memory (`[shared_memory] mode = "bridge"`):
//! the gateway answers register, status and unregister itself, with
//! Triton's texts, for objects the upstream (the demo, on another "host")
//! cannot see; CUDA shared memory is refused. Forward mode (the default)
//! sends them upstream: `v2_endpoints::shared_memory_trace_and_logging`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::support::{assert_answer, text, Harness};
use tensorgate::config::SharedMemoryMode;

/// A fresh directory standing in for `/dev/shm`, removed at the end.
struct ShmDir(PathBuf);

impl ShmDir {
    fn new() -> ShmDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("tensorgate-it-shm-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&path).unwrap();
        ShmDir(path)
    }

    fn object(&self, name: &str, len: u64) -> PathBuf {
        let path = self.0.join(name);
        std::fs::File::create(&path).unwrap().set_len(len).unwrap();
        path
    }
}

impl Drop for ShmDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn bridge(dir: &ShmDir) -> Harness {
    let dir = dir.0.clone();
    Harness::start_with(move |c| {
        c.shared_memory.mode = SharedMemoryMode::Bridge;
        c.shared_memory.dir = dir;
        c.shared_memory.max_regions = 4;
        c.shared_memory.max_total_bytes = 4096;
    })
    .await
}

const JSON: &str = "application/json";

fn register_body(key: &str, offset: u64, byte_size: u64) -> String {
    format!(r#"{{"key":"{key}","offset":{offset},"byte_size":{byte_size}}}"#)
}

async fn register(h: &Harness, name: &str, key: &str, offset: u64, size: u64) -> (u16, String) {
    let path = format!("/v2/systemsharedmemory/region/{name}/register");
    let answer = h.post(&path, register_body(key, offset, size)).await;
    (answer.status, text(&answer))
}

/// Unregisters `name` (every region when empty): status and body.
async fn unregister(h: &Harness, name: &str) -> (u16, String) {
    let path = match name {
        "" => "/v2/systemsharedmemory/unregister".to_string(),
        name => format!("/v2/systemsharedmemory/region/{name}/unregister"),
    };
    let answer = h.post(&path, "").await;
    (answer.status, text(&answer))
}

const DONE: (u16, String) = (200, String::new());

#[tokio::test]
async fn register_status_and_unregister_are_answered_by_the_gateway() {
    let dir = ShmDir::new();
    dir.object("input_simple", 128);
    dir.object("output_simple", 64);
    let h = bridge(&dir).await;
    assert_eq!(
        register(&h, "input_data", "/input_simple", 0, 128).await,
        DONE
    );
    assert_eq!(
        register(&h, "output_data", "/output_simple", 0, 64).await,
        DONE
    );
    // A second region on the same object (Triton 2.51 refuses it: compatibility.md).
    assert_eq!(register(&h, "tail", "/input_simple", 64, 64).await.0, 200);
    assert_answer(
        &h.get("/v2/systemsharedmemory/status").await,
        200,
        JSON,
        r#"[{"name":"input_data","key":"/input_simple","offset":0,"byte_size":128},{"name":"output_data","key":"/output_simple","offset":0,"byte_size":64},{"name":"tail","key":"/input_simple","offset":64,"byte_size":64}]"#,
    );
    assert_answer(
        &h.get("/v2/systemsharedmemory/region/tail/status").await,
        200,
        JSON,
        r#"[{"name":"tail","key":"/input_simple","offset":64,"byte_size":64}]"#,
    );
    assert_eq!(unregister(&h, "tail").await, DONE);
    assert_answer(
        &h.get("/v2/systemsharedmemory/region/tail/status").await,
        404,
        JSON,
        r#"{"error":"Unable to find system shared memory region: 'tail'"}"#,
    );
    // Unregistering an unknown region is no error (Triton).
    assert_eq!(unregister(&h, "tail").await, DONE);
    assert_eq!(unregister(&h, "").await, DONE);
    assert_answer(
        &h.get("/v2/systemsharedmemory/status").await,
        200,
        JSON,
        "[]",
    );
    // The demo upstream refuses every registration (it cannot open the
    // objects, forward mode shows it): these 200s are the gateway's own.
    assert_eq!(register(&h, "again", "/input_simple", 0, 8).await.0, 200);
}

#[tokio::test]
async fn every_refusal_has_tritons_text() {
    let dir = ShmDir::new();
    dir.object("obj", 64);
    std::os::unix::fs::symlink(dir.0.join("obj"), dir.0.join("link")).unwrap();
    let h = bridge(&dir).await;
    assert_eq!(register(&h, "r", "/obj", 0, 64).await.0, 200);
    let invalid_args = |name: &str| {
        format!(r#"{{"error":"failed to register shared memory region '{name}': invalid args"}}"#)
    };
    let cases: Vec<(&str, String, u16, String)> = vec![
        ("r", register_body("/obj", 0, 8), 400,
         r#"{"error":"shared memory region 'r' already in manager"}"#.into()),
        ("k", register_body("/nope", 0, 8), 400,
         r#"{"error":"Unable to open shared memory region: '/nope'"}"#.into()),
        ("k", register_body("/../etc/passwd", 0, 8), 400,
         r#"{"error":"Unable to open shared memory region: '/../etc/passwd'"}"#.into()),
        ("k", register_body("/link", 0, 8), 400,
         r#"{"error":"Unable to open shared memory region: '/link'"}"#.into()),
        ("s", register_body("/obj", 0, 65), 400, invalid_args("s")),
        ("s", register_body("/obj", 60, 8), 400, invalid_args("s")),
        ("s", register_body("/obj", 18446744073709551615, 2), 400, invalid_args("s")),
        ("z", register_body("/obj", 0, 0), 400,
         r#"{"error":"failed to register shared memory region 'z': unable to process address spaceInvalid argument"}"#.into()),
        ("b", r#"{"offset":0,"byte_size":8}"#.into(), 400,
         r#"{"error":"Shared memory register request has no 'key' field"}"#.into()),
        ("b", r#"{"key":"/obj"}"#.into(), 400,
         r#"{"error":"Shared memory register request has no 'byte_size' field"}"#.into()),
    ];
    for (name, body, status, want) in cases {
        let path = format!("/v2/systemsharedmemory/region/{name}/register");
        assert_answer(&h.post(&path, body.clone()).await, status, JSON, &want);
    }
    assert_answer(
        &h.post(
            "/v2/systemsharedmemory/register",
            register_body("/obj", 0, 8),
        )
        .await,
        400,
        JSON,
        r#"{"error":"'region name' is necessary to register system shared memory region"}"#,
    );
    assert_answer(
        &h.get("/v2/systemsharedmemory/region/nope/status").await,
        404,
        JSON,
        r#"{"error":"Unable to find system shared memory region: 'nope'"}"#,
    );
    // Only the first registration holds anything.
    assert_answer(
        &h.get("/v2/systemsharedmemory/status").await,
        200,
        JSON,
        r#"[{"name":"r","key":"/obj","offset":0,"byte_size":64}]"#,
    );
}

#[tokio::test]
async fn limits_on_regions_and_bytes() {
    let dir = ShmDir::new();
    dir.object("big", 8192);
    let h = bridge(&dir).await;
    let (status, body) = register(&h, "huge", "/big", 0, 4097).await;
    assert_eq!(status, 400);
    assert!(body.contains("shared_memory.max_total_bytes"), "{body}");
    for name in ["a", "b", "c", "d"] {
        assert_eq!(register(&h, name, "/big", 0, 16).await.0, 200);
    }
    let (status, body) = register(&h, "e", "/big", 0, 16).await;
    assert_eq!(status, 400);
    assert!(body.contains("shared_memory.max_regions"), "{body}");
    // Unregistering frees the room.
    assert_eq!(unregister(&h, "a").await, DONE);
    assert_eq!(register(&h, "e", "/big", 0, 16).await.0, 200);
}

#[tokio::test]
async fn key_prefixes_limit_what_clients_may_register() {
    let dir = ShmDir::new();
    dir.object("job-1", 16);
    dir.object("secret", 16);
    let path = dir.0.clone();
    let h = Harness::start_with(move |c| {
        c.shared_memory.mode = SharedMemoryMode::Bridge;
        c.shared_memory.dir = path;
        c.shared_memory.key_prefixes = vec!["/job-".into()];
    })
    .await;
    assert_eq!(register(&h, "ok", "/job-1", 0, 16).await.0, 200);
    assert_eq!(
        register(&h, "no", "/secret", 0, 16).await,
        (
            403,
            r#"{"error":"shared memory key '/secret' is not allowed by this gateway (shared_memory.key_prefixes)"}"#.into()
        )
    );
}

#[tokio::test]
async fn cuda_shared_memory_is_refused_in_bridge_mode() {
    let dir = ShmDir::new();
    let h = bridge(&dir).await;
    let refused = r#"{"error":"CUDA shared memory is not available through this gateway: it bridges system shared memory to a remote upstream ([shared_memory] mode = \"bridge\"); use system shared memory"}"#;
    assert_answer(
        &h.get("/v2/cudasharedmemory/status").await,
        501,
        JSON,
        refused,
    );
    assert_answer(
        &h.post(
            "/v2/cudasharedmemory/region/g/register",
            r#"{"raw_handle":{"b64":""},"device_id":0,"byte_size":8}"#,
        )
        .await,
        501,
        JSON,
        refused,
    );
    assert_answer(
        &h.post("/v2/cudasharedmemory/unregister", "").await,
        501,
        JSON,
        refused,
    );
    // Methods are still checked first.
    assert_eq!(h.get("/v2/systemsharedmemory/register").await.status, 405);
}

#[tokio::test]
async fn the_default_directory_is_dev_shm() {
    let Ok(meta) = std::fs::metadata("/dev/shm") else {
        return; // not Linux with a shared-memory mount: nothing to prove
    };
    assert!(meta.is_dir());
    let key = format!("/tensorgate-it-{}", std::process::id());
    let path = PathBuf::from(format!("/dev/shm{key}"));
    std::fs::File::create(&path).unwrap().set_len(32).unwrap();
    let h = Harness::start_with(|c| c.shared_memory.mode = SharedMemoryMode::Bridge).await;
    let registered = register(&h, "r", &key, 0, 32).await;
    let _ = std::fs::remove_file(&path);
    assert_eq!(registered, DONE);
}
