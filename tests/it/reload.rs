//! Reloading the configuration: the upstream list changes under load and no
//! request is lost; new keys and limits apply at once; an invalid
//! configuration is refused and the running one kept.

use std::sync::Arc;

use crate::support::{text, Fleet};
use tokio::sync::watch;

const ADD_SUB: &str = "/v2/models/add_sub/infer";
const BODY: &str = r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1],"data":[1]},{"name":"INPUT1","datatype":"FP32","shape":[1],"data":[2]}]}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstream_list_changes_under_load_and_nothing_is_lost() {
    let fleet = Fleet::start(2, |_| {}).await;
    let gateway = fleet.gateway.clone();
    let answered = Arc::new(watch::Sender::new(0u64));
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let (gateway, answered) = (gateway.clone(), answered.clone());
            tokio::spawn(async move {
                let mut failures = Vec::new();
                for _ in 0..150 {
                    let body = bytes::Bytes::from_static(BODY.as_bytes());
                    let r = crate::support::send(&gateway, http::Method::POST, ADD_SUB, &[], body)
                        .await;
                    if r.status != 200 {
                        failures.push(format!("{} {}", r.status, text(&r)));
                    }
                    answered.send_modify(|n| *n += 1);
                }
                failures
            })
        })
        .collect();
    let at = |n: u64| {
        let mut rx = answered.subscribe();
        async move {
            let _ = rx.wait_for(|done| *done >= n).await;
        }
    };
    let mut config = gateway.config().clone();
    at(100).await;
    config.upstream.addresses = vec![fleet.addrs[0].to_string()];
    assert_eq!(gateway.reload(&config), Ok(vec![]));
    fleet.passes(2).await;
    let only_first = fleet.counts();
    at(350).await;
    let later = fleet.counts();
    // Only requests already on their way when it left (one per client at
    // most) may still arrive there.
    assert!(
        later[1] - only_first[1] <= 4,
        "a removed backend got new requests: {only_first:?} then {later:?}"
    );
    config.upstream.addresses = fleet.addrs.iter().map(|a| a.to_string()).collect();
    gateway.reload(&config).unwrap();
    fleet.passes(2).await;
    let mut failures = Vec::new();
    for c in clients {
        failures.extend(c.await.unwrap());
    }
    assert!(failures.is_empty(), "{failures:?}");
    assert_eq!(*answered.borrow(), 600);
    // Both take traffic again.
    let before = fleet.counts();
    for _ in 0..10 {
        assert_eq!(fleet.post(ADD_SUB, &[], BODY).await.status, 200);
    }
    let after = fleet.counts();
    assert!(
        after[0] > before[0] && after[1] > before[1],
        "{before:?} {after:?}"
    );
}

#[tokio::test]
async fn keys_and_limits_reload_and_an_invalid_config_is_refused() {
    let fleet = Fleet::start(1, |_| {}).await;
    let gateway = &fleet.gateway;
    assert_eq!(fleet.post(ADD_SUB, &[], BODY).await.status, 200);
    let mut config = gateway.config().clone();
    config.auth.keys = vec![tensorgate::config::ApiKey {
        key: "k".into(),
        groups: vec![],
        name: None,
    }];
    config.server.threads = 7;
    // Regions live in the running gateway: a new shared-memory mode waits
    // for a restart.
    config.shared_memory.mode = tensorgate::config::SharedMemoryMode::Bridge;
    assert_eq!(gateway.reload(&config), Ok(vec!["server", "shared_memory"]));
    assert_eq!(fleet.post(ADD_SUB, &[], BODY).await.status, 401);
    assert_eq!(
        fleet
            .post(ADD_SUB, &[("Authorization", "Bearer k")], BODY)
            .await
            .status,
        200
    );
    let mut bad = config.clone();
    bad.upstream.addresses = vec!["no-port".into()];
    assert!(gateway.reload(&bad).is_err());
    // Still the previous rules and upstreams.
    assert_eq!(
        fleet
            .post(ADD_SUB, &[("Authorization", "Bearer k")], BODY)
            .await
            .status,
        200
    );
}
