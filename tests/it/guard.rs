//! Authentication and limits through the gateway: each rule has a passing
//! and a refused case; keys rotate without a restart; a burst gets exactly
//! the configured number through and clean 429/503 answers for the rest.

use crate::support::{assert_answer, text, Harness};
use tensorgate::config::Group;
use tensorgate::config::{ApiKey, RestrictedApi};

const ADD_SUB: &str = "/v2/models/add_sub/infer";
const BODY: &str = r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1],"data":[1]},{"name":"INPUT1","datatype":"FP32","shape":[1],"data":[2]}]}"#;

fn key(k: &str, groups: &[&str]) -> ApiKey {
    ApiKey {
        key: k.to_string(),
        groups: groups
            .iter()
            .map(|g| Group::read(g).expect("a group"))
            .collect(),
        name: None,
    }
}

/// Triton's `--http-restricted-api=model-repository,logging:admin-key=secret`.
#[tokio::test]
async fn tritons_restricted_apis_need_their_header() {
    let restricted = "model-repository,logging:admin-key=secret".to_string();
    let h = Harness::start_with(|c| {
        c.auth.restricted_api = vec![RestrictedApi::try_from(restricted).unwrap()];
    })
    .await;
    let refused = r#"{"error":"This API is restricted, expecting header 'admin-key'"}"#;
    let index = "/v2/repository/index";
    for headers in [
        &[][..],
        &[("admin-key", "wrong")],
        &[("admin-key", "secret ")],
    ] {
        let r = h.send(http::Method::POST, index, headers, "").await;
        assert_answer(&r, 403, "application/json", refused);
        let r = h.send(http::Method::GET, "/v2/logging", headers, "").await;
        assert_answer(&r, 403, "application/json", refused);
    }
    // Before the method check, as on Triton.
    let r = h.get(index).await;
    assert_answer(&r, 403, "application/json", refused);
    // The header (any case) with the value opens them; other groups are open.
    for name in ["admin-key", "Admin-Key"] {
        let r = h
            .send(http::Method::POST, index, &[(name, "secret")], "")
            .await;
        assert_eq!(r.status, 200, "{}", text(&r));
    }
    assert_eq!(h.post(ADD_SUB, BODY).await.status, 200);
    assert_eq!(h.get("/v2/models/add_sub/config").await.status, 200);
}

#[tokio::test]
async fn keys_guard_endpoint_groups() {
    let h = Harness::start_with(|c| {
        c.auth.keys = vec![key("ops", &[]), key("client", &["inference", "metadata"])];
    })
    .await;
    let bearer = |k: &str| format!("Bearer {k}");
    // Health is open by default (probes carry no keys).
    assert_eq!(h.get("/v2/health/ready").await.status, 200);
    let r = h.post(ADD_SUB, BODY).await;
    assert_eq!(r.status, 401);
    assert_eq!(
        text(&r),
        r#"{"error":"an API key is required for the 'inference' endpoints"}"#
    );
    assert_eq!(r.header("WWW-Authenticate"), Some("Bearer"));
    let r = h
        .send(
            http::Method::POST,
            ADD_SUB,
            &[("Authorization", &bearer("wrong"))],
            BODY,
        )
        .await;
    assert_eq!(
        (r.status, text(&r).as_str()),
        (401, r#"{"error":"invalid API key"}"#)
    );
    let r = h
        .send(
            http::Method::POST,
            ADD_SUB,
            &[("Authorization", &bearer("client"))],
            BODY,
        )
        .await;
    assert_eq!(r.status, 200, "{}", text(&r));
    let unload = "/v2/repository/models/add_sub/unload";
    let r = h
        .send(
            http::Method::POST,
            unload,
            &[("Authorization", &bearer("client"))],
            "",
        )
        .await;
    assert_eq!(r.status, 403);
    assert_eq!(
        text(&r),
        r#"{"error":"this API key may not call the 'model-repository' endpoints"}"#
    );
    let r = h
        .send(
            http::Method::GET,
            "/v2/tensorgate/backends",
            &[("Authorization", &bearer("ops"))],
            "",
        )
        .await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn a_rotated_keys_file_takes_effect_without_restart() {
    let path = std::env::temp_dir().join(format!("tensorgate-keys-{}", std::process::id()));
    std::fs::write(&path, "old-key\n").unwrap();
    let file = path.clone();
    let h = Harness::start_with(move |c| {
        c.auth.keys_file = Some(file);
        c.auth.keys_file_check_ms = 0;
    })
    .await;
    let h = &h;
    let send = |k: &'static str| async move {
        h.send(http::Method::POST, ADD_SUB, &[("Authorization", k)], BODY)
            .await
            .status
    };
    assert_eq!(send("Bearer old-key").await, 200);
    // Rotate: write the new file aside, then rename over the old one.
    let next = path.with_extension("next");
    std::fs::write(&next, "new-key inference\n").unwrap();
    std::fs::rename(&next, &path).unwrap();
    assert_eq!(send("Bearer new-key").await, 200);
    assert_eq!(send("Bearer old-key").await, 401);
    let _ = std::fs::remove_file(&path);
}

#[tokio::test]
async fn a_burst_over_the_rate_limit_gets_429_with_retry_after() {
    let h = Harness::start_with(|c| c.limits.rate_per_client = 10).await;
    let mut ok = 0;
    let mut limited = 0;
    for _ in 0..30 {
        let r = h.post(ADD_SUB, BODY).await;
        match r.status {
            200 => ok += 1,
            429 => {
                assert_eq!(r.header("Retry-After"), Some("1"));
                limited += 1;
            }
            other => panic!("{other}: {}", text(&r)),
        }
    }
    println!("burst of 30 at 10/s: {ok} answered, {limited} refused with 429");
    // A window boundary may fall inside the burst: at most one more window.
    assert!((10..=20).contains(&ok), "{ok}");
    assert_eq!(ok + limited, 30);
    let m = String::from_utf8(h.gateway.metrics_text()).unwrap();
    assert!(
        m.contains(&format!(
            r#"tensorgate_rejected_requests_total{{reason="rate"}} {limited}"#
        )),
        "{m}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_the_global_inflight_cap_is_503_not_a_queue() {
    let h = std::sync::Arc::new(Harness::start_with(|c| c.limits.max_inflight = 2).await);
    let slow = r#"{"parameters":{"delay_ms":800},"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1],"data":[1]}]}"#;
    let tasks: Vec<_> = (0..5)
        .map(|_| {
            let h = h.clone();
            tokio::spawn(async move { h.post("/v2/models/slow_identity/infer", slow).await })
        })
        .collect();
    let mut statuses = Vec::new();
    for t in tasks {
        let r = t.await.unwrap();
        if r.status == 503 {
            assert_eq!(r.header("Retry-After"), Some("1"));
        }
        statuses.push(r.status);
    }
    statuses.sort();
    println!("5 concurrent at a cap of 2: {statuses:?}");
    assert_eq!(statuses, vec![200, 200, 503, 503, 503]);
}
