//! The fault story: three embedded upstreams under steady load from eight
//! clients. One backend is killed (and later restarted on its address),
//! one hangs (accepts, never answers), one reports not-ready. Every request
//! is counted: each gets a correct answer or a clear 503/504 error, none
//! outlives its deadline, none is lost. Then traffic returns to all three.
//! Run with `--nocapture` to see the counts.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::{text, Fleet};
use bytes::Bytes;
use http::Method;
use tensorgate::Gateway;
use tokio::sync::{watch, Mutex};

const ADD_SUB: &str = "/v2/models/add_sub/infer";
const BODY: &str = r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[2],"data":[1,2]},{"name":"INPUT1","datatype":"FP32","shape":[2],"data":[3,4]}]}"#;
const CLIENTS: usize = 8;
const PER_CLIENT: usize = 300;
/// The gateway's request deadline in this story.
const DEADLINE: Duration = Duration::from_millis(500);
/// What counts as hung: well past the deadline.
const HUNG: Duration = Duration::from_secs(3);

#[derive(Debug, Default)]
struct Tally {
    sent: u64,
    correct: u64,
    unavailable_503: u64,
    timeout_504: u64,
    wrong: Vec<String>,
    hung: u64,
    slowest: Duration,
    /// The distinct error bodies, for the record.
    errors: std::collections::BTreeSet<String>,
}

impl Tally {
    fn record(&mut self, outcome: Result<(u16, String), ()>, took: Duration) {
        self.slowest = self.slowest.max(took);
        match outcome {
            Err(()) => self.hung += 1,
            Ok((200, body)) if body.contains("[4.0,6.0]") && body.contains("[-2.0,-2.0]") => {
                self.correct += 1
            }
            Ok((503, body)) if clear_error(&body) => {
                self.unavailable_503 += 1;
                self.errors.insert(body);
            }
            Ok((504, body)) if clear_error(&body) => {
                self.timeout_504 += 1;
                self.errors.insert(body);
            }
            Ok((status, body)) => self.wrong.push(format!("{status} {body}")),
        }
    }

    fn answered(&self) -> u64 {
        self.correct + self.unavailable_503 + self.timeout_504 + self.wrong.len() as u64 + self.hung
    }
}

fn clear_error(body: &str) -> bool {
    body.starts_with(r#"{"error":""#) && body.len() > 20
}

/// One client: `PER_CLIENT` requests back to back, each timed.
async fn client(
    gateway: Arc<Gateway>,
    tally: Arc<Mutex<Tally>>,
    answered: Arc<watch::Sender<u64>>,
) {
    for _ in 0..PER_CLIENT {
        tally.lock().await.sent += 1;
        let start = Instant::now();
        let request = crate::support::send(
            &gateway,
            Method::POST,
            ADD_SUB,
            &[],
            Bytes::from_static(BODY.as_bytes()),
        );
        let outcome = tokio::time::timeout(HUNG, request)
            .await
            .map(|r| (r.status, text(&r)))
            .map_err(|_| ());
        tally.lock().await.record(outcome, start.elapsed());
        answered.send_modify(|n| *n += 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_hang_and_not_ready_under_load_lose_nothing() {
    let fleet = Fleet::start(3, |c| {
        c.upstream.request_timeout_ms = DEADLINE.as_millis() as u64;
        c.upstream.connect_timeout_ms = 200;
        c.upstream.health.eject_ms = 300;
    })
    .await;
    let mut fleet = fleet;
    let tally = Arc::new(Mutex::new(Tally::default()));
    let answered = Arc::new(watch::Sender::new(0u64));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            tokio::spawn(client(
                fleet.gateway.clone(),
                tally.clone(),
                answered.clone(),
            ))
        })
        .collect();

    let at = |n: u64| {
        let mut rx = answered.subscribe();
        async move {
            let _ = rx.wait_for(|done| *done >= n).await;
        }
    };
    at(300).await;
    fleet.kill(0);
    at(700).await;
    fleet.restart(0);
    at(1000).await;
    fleet.demo(1).set_hang(true);
    at(1400).await;
    fleet.demo(1).set_hang(false);
    at(1700).await;
    fleet.demo(2).set_ready(false);
    at(2000).await;
    fleet.demo(2).set_ready(true);
    for c in clients {
        c.await.expect("client finished");
    }

    let t = tally.lock().await;
    println!(
        "fault story: sent {}, correct {}, clean 503 {}, clean 504 {}, wrong {}, hung {}, lost {}, slowest {} ms",
        t.sent,
        t.correct,
        t.unavailable_503,
        t.timeout_504,
        t.wrong.len(),
        t.hung,
        t.sent - t.answered(),
        t.slowest.as_millis()
    );
    for e in &t.errors {
        println!("  error seen: {e}");
    }
    assert_eq!(t.sent, (CLIENTS * PER_CLIENT) as u64);
    assert_eq!(t.answered(), t.sent, "lost requests");
    assert!(t.wrong.is_empty(), "wrong answers: {:?}", t.wrong);
    assert_eq!(t.hung, 0);
    assert!(
        t.slowest < DEADLINE + Duration::from_secs(1),
        "{:?}",
        t.slowest
    );
    assert!(t.correct > t.sent * 8 / 10, "{t:?}");
    drop(t);

    // Everything restored: traffic returns to all three.
    fleet.passes(3).await;
    wait_all_usable(&fleet).await;
    let before = fleet.counts();
    for _ in 0..30 {
        let r = fleet.post(ADD_SUB, &[], BODY).await;
        assert_eq!(r.status, 200, "{}", text(&r));
    }
    let after = fleet.counts();
    let delta: Vec<u64> = before.iter().zip(&after).map(|(b, a)| a - b).collect();
    println!("after recovery, 30 requests went {delta:?}");
    assert_eq!(delta, vec![10, 10, 10]);
}

/// Waits (in health passes) until every backend takes traffic again
/// (ejections expire after `eject_ms`).
async fn wait_all_usable(fleet: &Fleet) {
    for _ in 0..500 {
        if fleet.gateway.backends().iter().all(|b| b.usable()) {
            return;
        }
        fleet.passes(1).await;
    }
    panic!("backends did not all recover");
}
