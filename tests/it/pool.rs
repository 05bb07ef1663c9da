//! The upstream group through the gateway: several embedded upstreams on
//! ephemeral ports, each request counted where it lands. Balancing is per
//! request, sequences stick to one backend, a backend without a model never
//! sees it, load/unload reach every backend, and new or sick backends get
//! no traffic.

use crate::support::{text, Fleet};
use tensorgate::config::Balance;

const ADD_SUB: &str = "/v2/models/add_sub/infer";
const BODY: &str = r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[2],"data":[1,2]},{"name":"INPUT1","datatype":"FP32","shape":[2],"data":[3,4]}]}"#;

fn sequence_body(id: u64, start: bool) -> String {
    format!(
        r#"{{"parameters":{{"sequence_id":{id},"sequence_start":{start}}},"inputs":[{{"name":"INPUT0","datatype":"FP32","shape":[1],"data":[1]}},{{"name":"INPUT1","datatype":"FP32","shape":[1],"data":[2]}}]}}"#
    )
}

fn delta(before: &[u64], after: &[u64]) -> Vec<u64> {
    before.iter().zip(after).map(|(b, a)| a - b).collect()
}

async fn send_plain(fleet: &Fleet, n: usize) {
    for _ in 0..n {
        let r = fleet.post(ADD_SUB, &[], BODY).await;
        assert_eq!(r.status, 200, "{}", text(&r));
    }
}

#[tokio::test]
async fn round_robin_spreads_requests_evenly() {
    let fleet = Fleet::start(3, |_| {}).await;
    send_plain(&fleet, 300).await;
    assert_eq!(fleet.counts(), vec![100, 100, 100]);
}

#[tokio::test]
async fn least_outstanding_and_power_of_two_spread_too() {
    for balance in [Balance::LeastOutstanding, Balance::PowerOfTwo] {
        let fleet = Fleet::start(3, |c| c.upstream.balance = balance).await;
        send_plain(&fleet, 300).await;
        let counts = fleet.counts();
        assert_eq!(counts.iter().sum::<u64>(), 300);
        assert!(counts.iter().all(|&c| c >= 50), "{balance:?}: {counts:?}");
    }
}

#[tokio::test]
async fn every_request_of_a_sequence_lands_on_one_backend() {
    let fleet = Fleet::start(3, |_| {}).await;
    let mut used = std::collections::BTreeSet::new();
    for id in 1..=12u64 {
        let before = fleet.counts();
        for step in 0..5 {
            let r = fleet
                .post(ADD_SUB, &[], &sequence_body(id, step == 0))
                .await;
            assert_eq!(r.status, 200, "{}", text(&r));
        }
        let d = delta(&before, &fleet.counts());
        let hit: Vec<usize> = (0..3).filter(|&i| d[i] > 0).collect();
        assert_eq!(hit.len(), 1, "sequence {id} spread over {d:?}");
        assert_eq!(d[hit[0]], 5);
        used.insert(hit[0]);
    }
    // Twelve ids over three backends: the ring uses more than one.
    assert!(used.len() > 1, "{used:?}");
}

#[tokio::test]
async fn a_dead_sequence_backend_is_a_clear_error_not_a_silent_move() {
    let mut fleet = Fleet::start(3, |_| {}).await;
    let before = fleet.counts();
    let r = fleet.post(ADD_SUB, &[], &sequence_body(42, true)).await;
    assert_eq!(r.status, 200);
    let owner = (0..3).find(|&i| fleet.counts()[i] > before[i]).unwrap();
    fleet.kill(owner);
    let r = fleet.post(ADD_SUB, &[], &sequence_body(42, false)).await;
    assert_eq!(r.status, 503, "{}", text(&r));
    fleet.passes(3).await;
    let r = fleet.post(ADD_SUB, &[], &sequence_body(42, false)).await;
    assert_eq!(r.status, 503);
    assert!(
        text(&r).contains("the backend of sequence 42")
            && text(&r).contains("start the sequence again"),
        "{}",
        text(&r)
    );
}

#[tokio::test]
async fn a_backend_without_the_model_never_receives_it() {
    let fleet = Fleet::start(3, |_| {}).await;
    fleet.demo(1).set_loaded("add_sub", false);
    // A load/unload through the gateway refreshes at once; here the model
    // vanished behind its back, so wait for the periodic refresh.
    wait_until_models_known(&fleet, 1, "add_sub", false).await;
    send_plain(&fleet, 60).await;
    let counts = fleet.counts();
    assert_eq!(counts[1], 0, "{counts:?}");
    assert_eq!(counts[0] + counts[2], 60);
}

/// Waits (in health passes) until backend `i` is known (not) to serve `model`.
async fn wait_until_models_known(fleet: &Fleet, i: usize, model: &str, serves: bool) {
    for _ in 0..500 {
        let backend = fleet.gateway.backend(&fleet.addrs[i]).unwrap();
        if backend.models().serves(model) == serves {
            return;
        }
        fleet.passes(1).await;
    }
    panic!("backend {i} never learned about {model}");
}

#[tokio::test]
async fn an_unknown_model_gets_the_servers_own_404() {
    let fleet = Fleet::start(2, |_| {}).await;
    let r = fleet.post("/v2/models/nope/infer", &[], BODY).await;
    assert_eq!(r.status, 404);
    assert_eq!(
        text(&r),
        r#"{"error":"Request for unknown model: 'nope' is not found"}"#
    );
}

#[tokio::test]
async fn load_and_unload_reach_every_backend() {
    let fleet = Fleet::start(3, |_| {}).await;
    let r = fleet
        .post("/v2/repository/models/add_sub/unload", &[], "")
        .await;
    assert_eq!(r.status, 200, "{}", text(&r));
    let listed = r.header("Tensorgate-Backends").unwrap().to_string();
    for addr in &fleet.addrs {
        assert!(listed.contains(&format!("{addr}=ok")), "{listed}");
    }
    // Unloaded everywhere: the servers' own answer.
    let r = fleet.post(ADD_SUB, &[], BODY).await;
    assert_eq!(r.status, 404, "{}", text(&r));
    let r = fleet
        .post("/v2/repository/models/add_sub/load", &[], "")
        .await;
    assert_eq!(r.status, 200, "{}", text(&r));
    send_plain(&fleet, 30).await;
    assert_eq!(fleet.counts(), vec![10, 10, 10]);
    // A load that fails everywhere is the server's error, verbatim.
    let r = fleet.post("/v2/repository/models/nope/load", &[], "").await;
    assert_eq!(r.status, 500);
    assert_eq!(
        text(&r),
        r#"{"error":"failed to load 'nope', failed to poll from model repository"}"#
    );
}

#[tokio::test]
async fn a_backend_gets_traffic_only_once_seen_ready() {
    let fleet = Fleet::start(2, |_| {}).await;
    fleet.demo(1).set_ready(false);
    fleet.passes(3).await;
    send_plain(&fleet, 20).await;
    assert_eq!(fleet.counts()[1], 0);
    fleet.demo(1).set_ready(true);
    fleet.passes(2).await;
    let before = fleet.counts();
    send_plain(&fleet, 20).await;
    assert_eq!(delta(&before, &fleet.counts()), vec![10, 10]);
}

#[tokio::test]
async fn the_backends_view_lists_health_and_models() {
    let fleet = Fleet::start(2, |_| {}).await;
    let r = fleet.get("/v2/tensorgate/backends").await;
    assert_eq!(r.status, 200);
    let body = text(&r);
    for addr in &fleet.addrs {
        assert!(
            body.contains(&format!(r#""address":"{addr}","usable":true"#)),
            "{body}"
        );
    }
    assert!(body.contains(r#""add_sub""#), "{body}");
}

#[tokio::test]
async fn a_refused_connection_is_retried_on_another_backend() {
    // Health checks far apart: only the retry can save these requests.
    let mut fleet = Fleet::start(2, |c| c.upstream.health.interval_ms = 60_000).await;
    fleet.kill(0);
    for _ in 0..10 {
        let r = fleet.post(ADD_SUB, &[], BODY).await;
        assert_eq!(r.status, 200, "{}", text(&r));
    }
    // Three refusals in a row ejected the dead backend.
    let view = text(&fleet.get("/v2/tensorgate/backends").await);
    let dead = format!(r#""address":"{}","usable":false"#, fleet.addrs[0]);
    assert!(
        view.contains(&dead) && view.contains(r#""ejected":true"#),
        "{view}"
    );
}

#[tokio::test]
async fn the_configured_deadline_bounds_a_call() {
    let fleet = Fleet::start(1, |c| c.upstream.request_timeout_ms = 50).await;
    let body = r#"{"parameters":{"delay_ms":2000},"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1],"data":[1]}]}"#;
    let start = std::time::Instant::now();
    let r = fleet
        .post("/v2/models/slow_identity/infer", &[], body)
        .await;
    assert_eq!(r.status, 504, "{}", text(&r));
    assert!(start.elapsed() < std::time::Duration::from_millis(1500));
}
