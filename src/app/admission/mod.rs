//! Admission control of an upstream group (`[upstream.admission]`): at most
//! `max_concurrency` inference calls in flight toward the group (or the
//! adaptive limit, [`adaptive`]); beyond it a call waits in a bounded queue
//! for a slot, best priority first and in arrival order within a level;
//! past the queue's length, its longest wait or the call's own deadline it
//! is refused at once — never sent — with `Kind::Overloaded` (HTTP 503 and
//! `Retry-After`, gRPC `UNAVAILABLE`, v1 `UNAVAILABLE`, OpenAI
//! `service_unavailable`: `error`'s one table).
//!
//! The door takes a [`Permit`] for each inference call after routing it
//! and before its first attempt (and its mirror's copy), and holds it for
//! the call's life: a collected answer, a relayed reply's body to its end,
//! a stream to its close. Its release hands the slot to the best waiter.
//!
//! Rules, each with its test in `tests/it/admission.rs`:
//! - a full queue's last place goes to a newcomer of a better level (the
//!   displaced waiter is refused at once), never to one of the same;
//! - a call continuing a sequence already started (a non-zero
//!   `sequence_id` without `sequence_start`) is admitted at once, above the
//!   limit if need be: a sequence is never delayed, reordered or dropped
//!   mid-way; its start is new work and waits like any;
//! - a call that must wait and can expect to wait longer than half its
//!   bound (the calls ahead of it, of its level or better, at the group's
//!   service time per slot, stretched as waits have turned out to be) is
//!   refused as it arrives, not at the end of a wait it would not survive;
//! - a call that must wait is given until `queue_timeout_ms` or its own
//!   deadline less the group's usual service time, whichever is sooner: a
//!   call whose deadline would pass before a slot frees and it is served is
//!   refused now rather than sent late;
//! - a waiter that goes away (its client disconnected) leaves the queue,
//!   and a slot handed to it as it left goes to the next.

pub(crate) mod adaptive;
mod held;

pub(crate) use held::held_to_its_end;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

// tokio's clock, so the tests can pause it (the same as std's otherwise).
use tokio::time::Instant;

use prometheus::Histogram;
use tokio::sync::oneshot;

use crate::config::Admission;
use crate::error::{duration_text, Error, Kind, Result};
use crate::metrics::Metrics;

use adaptive::Gradient;

/// What a call asks of the gate.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Ask {
    /// Its Triton priority level (1 the highest; `None`: the group's
    /// default level).
    pub(crate) priority: Option<u32>,
    /// The time it has left (`None`: no deadline of its own).
    pub(crate) deadline: Option<Duration>,
    /// It continues a sequence already started.
    pub(crate) continues_sequence: bool,
    /// It is a stream: its life says nothing of the group's latency (not
    /// a sample of the adaptive limit).
    pub(crate) stream: bool,
}

/// Why a call was refused (the metrics' `outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// The queue was full of calls of its level or better.
    Full,
    /// A call of a better level took its place in the queue.
    Displaced,
    /// No slot freed within `queue_timeout_ms`.
    Timeout,
    /// Its deadline would pass before a slot freed and it was served.
    Deadline,
    /// The calls ahead of it would take longer than it may wait: refused
    /// as it arrives rather than at the end of a wait it would not survive.
    Backlog { expected: Duration, bound: Duration },
}

impl Refusal {
    fn label(self) -> &'static str {
        match self {
            Refusal::Full => "full",
            Refusal::Displaced => "displaced",
            Refusal::Timeout => "timeout",
            Refusal::Deadline => "deadline",
            Refusal::Backlog { .. } => "backlog",
        }
    }
}

/// A level against the group's default: the metrics' `priority`.
#[derive(Debug, Clone, Copy)]
enum Class {
    High = 0,
    Default = 1,
    Low = 2,
}

/// What a waiter is told.
#[derive(Debug)]
enum Handed {
    Slot,
    Displaced,
}

/// A waiter's place: its level, then its arrival (smaller first).
type Place = (u32, u64);

/// The gate of one group.
pub(crate) struct Gate {
    group: Arc<str>,
    queue_length: usize,
    queue_timeout: Duration,
    default_priority: u32,
    state: Mutex<State>,
    /// The waits of queued calls (the gauges are read at scrape time,
    /// [`Gate::view`]).
    wait: Histogram,
    metrics: Arc<Metrics>,
}

struct State {
    in_flight: usize,
    /// The fixed limit, or the adaptive one's.
    fixed: usize,
    adaptive: Option<Gradient>,
    waiting: BTreeMap<Place, oneshot::Sender<Handed>>,
    arrivals: u64,
    /// A moving average of the calls' service time (seconds).
    service: f64,
    /// Per priority class (high, default, low against the group's
    /// default level), a moving average of how much longer waits are than
    /// their estimate at arrival: better levels arriving later go ahead of
    /// a waiter, more so the lower its level.
    stretch: [f64; 3],
}

impl State {
    fn limit(&self) -> usize {
        self.adaptive.as_ref().map_or(self.fixed, Gradient::limit)
    }

    /// Slots free under the limit go to the best waiters.
    /// The wait a newcomer of `level` can expect: the calls ahead of it
    /// (of its level or better) and itself, a slot freeing every service
    /// time per slot of the limit, stretched as waits have been.
    fn expected_wait(&self, level: u32, class: Class, service: Duration) -> Duration {
        let ahead = self.waiting.range(..(level.saturating_add(1), 0)).count();
        let per_slot = (ahead + 1) as f64 / self.limit().max(1) as f64;
        service.mul_f64(per_slot * self.stretch[class as usize])
    }

    /// A waiter of `class` got its slot (or gave up) after `took`, having
    /// expected `expected`.
    fn waited(&mut self, class: Class, took: Duration, expected: Duration) {
        if expected.is_zero() {
            return;
        }
        let stretch = &mut self.stretch[class as usize];
        // Against the estimate before it was stretched.
        let sample = took.as_secs_f64() / expected.as_secs_f64() * *stretch;
        *stretch += SERVICE_WEIGHT * (sample.clamp(0.5, 8.0) - *stretch);
    }

    fn fill(&mut self) {
        while self.in_flight < self.limit() {
            let Some((_, waiter)) = self.waiting.pop_first() else {
                break;
            };
            // A waiter leaves the queue under the lock before it drops
            // its receiver: a send fails only for one already gone.
            if waiter.send(Handed::Slot).is_ok() {
                self.in_flight += 1;
            }
        }
    }
}

/// A slot of the group's, held for a call's life; dropped, it goes to the
/// best waiter.
pub(crate) struct Permit {
    gate: Arc<Gate>,
    started: Instant,
    sampled: bool,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let took = self.sampled.then(|| self.started.elapsed());
        self.gate.release(took);
    }
}

/// The share of its longest wait a newcomer's expected wait may fill: the
/// rest is room for calls of better levels that arrive after it and go
/// ahead, and for the estimate's error, so that a call let into the queue
/// is rarely refused at the end of its wait (a refusal should come at
/// once, while the client can still go elsewhere). Measured at 3× a
/// group's capacity with 10 % high priority (`scripts/bench
/// --overload-only`, docs/performance.md): 0.8 left 8 % of refusals to
/// the end of a wait, 0.6 1.2 %, 0.5 0.1 % — at the same goodput.
const BACKLOG_SHARE: f64 = 0.5;

/// The weight of a new service time in the moving average (1/8, as TCP's
/// smoothed round-trip time).
const SERVICE_WEIGHT: f64 = 0.125;

/// A gate's state now, as the backends view shows it (`app::status`)
/// and the metrics read it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct GateView {
    pub(crate) in_flight: usize,
    /// The limit in force (the adaptive limit's value now).
    pub(crate) limit: usize,
    pub(crate) waiting: usize,
    pub(crate) queue_length: usize,
    pub(crate) adaptive: bool,
    /// The adaptive limit's latency floor, in milliseconds, once measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) min_rtt_ms: Option<f64>,
}

impl Gate {
    /// The gate of `group` under `config` (on: `config.enabled()`).
    pub(crate) fn new(group: &str, config: &Admission, metrics: &Arc<Metrics>) -> Arc<Gate> {
        let state = State {
            in_flight: 0,
            fixed: config.max_concurrency,
            adaptive: config
                .adaptive
                .then(|| Gradient::new(config.max_concurrency)),
            waiting: BTreeMap::new(),
            arrivals: 0,
            service: 0.0,
            stretch: [1.0; 3],
        };
        Arc::new(Gate {
            group: group.into(),
            queue_length: config.queue_length,
            queue_timeout: config.queue_timeout(),
            default_priority: config.default_priority,
            state: Mutex::new(state),
            wait: metrics.admission_wait.with_label_values(&[group]),
            metrics: metrics.clone(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding it leaves counts that are still counts.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A slot for a call that asks `ask`: at once, after a wait, or the
    /// refusal (the call is then not to be sent).
    pub(crate) async fn admit(self: &Arc<Self>, ask: Ask) -> Result<Permit> {
        let level = ask
            .priority
            .filter(|&p| p > 0)
            .unwrap_or(self.default_priority);
        let (place, receiver, bound, by_deadline, expected) = {
            let mut state = self.lock();
            if ask.continues_sequence || state.in_flight < state.limit() {
                state.in_flight += 1;
                drop(state);
                self.count("admitted", level);
                return Ok(self.permit(ask));
            }
            let service = Duration::from_secs_f64(state.service);
            let (bound, by_deadline) = match ask.deadline {
                Some(left) if left.saturating_sub(service) < self.queue_timeout => {
                    (left.saturating_sub(service), true)
                }
                _ => (self.queue_timeout, false),
            };
            if bound.is_zero() {
                drop(state);
                return Err(self.refused(Refusal::Deadline, level, ask));
            }
            let expected = state.expected_wait(level, self.class(level), service);
            if expected.mul_f64(1.0 / BACKLOG_SHARE) > bound {
                drop(state);
                return Err(self.refused(Refusal::Backlog { expected, bound }, level, ask));
            }
            if state.waiting.len() >= self.queue_length {
                let worst = state.waiting.last_key_value().map(|(place, _)| place.0);
                match worst {
                    Some(worst) if worst > level => {
                        if let Some((_, displaced)) = state.waiting.pop_last() {
                            let _ = displaced.send(Handed::Displaced);
                        }
                    }
                    _ => {
                        drop(state);
                        return Err(self.refused(Refusal::Full, level, ask));
                    }
                }
            }
            let (sender, receiver) = oneshot::channel();
            let place = (level, state.arrivals);
            state.arrivals += 1;
            state.waiting.insert(place, sender);
            (place, receiver, bound, by_deadline, expected)
        };
        let queued = Instant::now();
        let mut waiter = Waiter {
            gate: self,
            place,
            receiver: Some(receiver),
        };
        let handed = tokio::time::timeout(bound, waiter.wait()).await;
        self.wait.observe(queued.elapsed().as_secs_f64());
        let handed = match handed {
            Ok(handed) => handed,
            // The bound passed: out of the queue, unless a slot (or a
            // displacement) came as it did.
            Err(_) => waiter.leave(),
        };
        match handed {
            Some(Handed::Slot) => {
                self.lock()
                    .waited(self.class(level), queued.elapsed(), expected);
                self.count("admitted", level);
                Ok(self.permit(ask))
            }
            Some(Handed::Displaced) => Err(self.refused(Refusal::Displaced, level, ask)),
            None => {
                // A wait that ran out took at least its bound.
                self.lock().waited(self.class(level), bound, expected);
                Err(self.refused(timed_out(by_deadline), level, ask))
            }
        }
    }

    fn permit(self: &Arc<Self>, ask: Ask) -> Permit {
        Permit {
            gate: self.clone(),
            started: Instant::now(),
            sampled: !ask.stream,
        }
    }

    /// A slot given back after a call of `took` (`None`: not a sample).
    fn release(&self, took: Option<Duration>) {
        let mut state = self.lock();
        if let Some(took) = took {
            let secs = took.as_secs_f64();
            state.service += SERVICE_WEIGHT * (secs - state.service);
            let in_flight = state.in_flight;
            if let Some(gradient) = &mut state.adaptive {
                gradient.sample(took, in_flight);
            }
        }
        state.in_flight = state.in_flight.saturating_sub(1);
        state.fill();
    }

    fn class(&self, level: u32) -> Class {
        match level.cmp(&self.default_priority) {
            std::cmp::Ordering::Less => Class::High,
            std::cmp::Ordering::Equal => Class::Default,
            std::cmp::Ordering::Greater => Class::Low,
        }
    }

    fn count(&self, outcome: &str, level: u32) {
        let class = match self.class(level) {
            Class::High => "high",
            Class::Default => "default",
            Class::Low => "low",
        };
        self.metrics
            .admission_calls
            .with_label_values(&[&self.group, outcome, class])
            .inc();
    }

    fn refused(&self, why: Refusal, level: u32, ask: Ask) -> Error {
        self.count(why.label(), level);
        let group = &self.group;
        let detail = match why {
            Refusal::Full => format!("its queue of {} is full", self.queue_length),
            Refusal::Displaced => {
                "a request of a higher priority took its place in the queue".to_string()
            }
            Refusal::Timeout => {
                format!("no slot freed within {}", duration_text(self.queue_timeout))
            }
            Refusal::Deadline => format!(
                "the request's deadline of {} would pass before a slot freed",
                duration_text(ask.deadline.unwrap_or_default())
            ),
            Refusal::Backlog { expected, bound } => format!(
                "the calls ahead of it would take about {}, longer than it may wait ({})",
                duration_text(expected),
                duration_text(bound)
            ),
        };
        Error::new(
            Kind::Overloaded,
            format!("upstream group '{group}' is at capacity: {detail}; retry later"),
        )
    }

    /// Its state now, for the operators' view.
    pub(crate) fn view(&self) -> GateView {
        let state = self.lock();
        GateView {
            in_flight: state.in_flight,
            limit: state.limit(),
            waiting: state.waiting.len(),
            queue_length: self.queue_length,
            adaptive: state.adaptive.is_some(),
            min_rtt_ms: state
                .adaptive
                .as_ref()
                .and_then(Gradient::min_rtt)
                .map(|d| d.as_secs_f64() * 1e3),
        }
    }
}

/// The refusal of a wait that ran out: its deadline's, or the queue's.
fn timed_out(by_deadline: bool) -> Refusal {
    match by_deadline {
        true => Refusal::Deadline,
        false => Refusal::Timeout,
    }
}

/// A call waiting in the queue; dropped while it waits (its client went
/// away), it leaves, and a slot handed to it goes on to the next.
struct Waiter<'g> {
    gate: &'g Arc<Gate>,
    place: Place,
    receiver: Option<oneshot::Receiver<Handed>>,
}

impl Waiter<'_> {
    async fn wait(&mut self) -> Option<Handed> {
        let receiver = self.receiver.as_mut()?;
        let handed = receiver.await.ok();
        self.receiver = None;
        handed
    }

    /// Out of the queue: what was handed to it before it left, if
    /// anything.
    fn leave(&mut self) -> Option<Handed> {
        let mut receiver = self.receiver.take()?;
        let mut state = self.gate.lock();
        if state.waiting.remove(&self.place).is_some() {
            return None;
        }
        drop(state);
        receiver.try_recv().ok()
    }
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        if let Some(Handed::Slot) = self.leave() {
            self.gate.release(None);
        }
    }
}

#[cfg(test)]
mod tests {
    // The gate's rules, one by one, on tokio's paused clock (time moves only
    // when every task waits: no test here depends on the machine's speed).

    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    fn gate(text: &str) -> (Arc<Gate>, Arc<Metrics>) {
        let config: Admission = toml::from_str(text).expect("parses");
        let metrics = Arc::new(Metrics::new());
        (Gate::new("g", &config, &metrics), metrics)
    }

    fn at(priority: u32) -> Ask {
        Ask {
            priority: Some(priority),
            ..Ask::default()
        }
    }

    /// Starts a waiter for `ask` and lets it run up to its wait (or its
    /// refusal): on the paused clock, yielding moves no time.
    async fn queued(
        gate: &Arc<Gate>,
        ask: Ask,
    ) -> tokio::task::JoinHandle<std::result::Result<Permit, Error>> {
        let gate = gate.clone();
        let task = tokio::spawn(async move { gate.admit(ask).await });
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        task
    }

    fn outcome(metrics: &Metrics, outcome: &str, class: &str) -> u64 {
        metrics
            .admission_calls
            .with_label_values(&["g", outcome, class])
            .get()
    }

    #[tokio::test(start_paused = true)]
    async fn calls_beyond_the_limit_wait_and_go_best_level_first_then_in_order() {
        let (gate, _) = gate("max_concurrency = 1\nqueue_length = 8\nqueue_timeout_ms = 60000");
        let held = gate.admit(Ask::default()).await.expect("a free slot");
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for (name, level) in [("low-a", 3), ("default", 2), ("high", 1), ("low-b", 3)] {
            let (gate, order) = (gate.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let permit = gate.admit(at(level)).await.expect("admitted");
                order.lock().unwrap().push(name);
                drop(permit);
            }));
            for _ in 0..100 {
                tokio::task::yield_now().await;
            }
        }
        assert_eq!(gate.view().waiting, 4);
        drop(held);
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(
            *order.lock().unwrap(),
            ["high", "default", "low-a", "low-b"]
        );
        assert_eq!(gate.view().in_flight, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_queue_refuses_at_once_but_a_better_level_takes_the_last_place() {
        let (gate, metrics) =
            gate("max_concurrency = 1\nqueue_length = 2\nqueue_timeout_ms = 60000");
        let _held = gate.admit(Ask::default()).await.unwrap();
        let first = queued(&gate, at(2)).await;
        let second = queued(&gate, at(3)).await;
        let refused = gate.admit(at(3)).await.err().expect("full");
        assert_eq!(refused.kind, Kind::Overloaded);
        assert_eq!(refused.status(), 503);
        assert!(
            refused.message.contains("queue of 2 is full"),
            "{}",
            refused.message
        );
        // A same-level newcomer never displaces; a better one does, the worst.
        let better = queued(&gate, at(1)).await;
        let displaced = second.await.unwrap().err().expect("displaced");
        assert!(
            displaced.message.contains("higher priority"),
            "{}",
            displaced.message
        );
        assert_eq!(outcome(&metrics, "full", "low"), 1);
        assert_eq!(outcome(&metrics, "displaced", "low"), 1);
        assert_eq!(gate.view().waiting, 2);
        drop(_held);
        let better = better.await.unwrap().expect("the better level first");
        drop(better);
        first.await.unwrap().expect("then the first");
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_ends_at_the_queue_timeout_and_the_call_is_refused() {
        let (gate, metrics) = gate("max_concurrency = 1\nqueue_timeout_ms = 100");
        let _held = gate.admit(Ask::default()).await.unwrap();
        let refused = gate.admit(Ask::default()).await.err().expect("timed out");
        assert!(
            refused.message.contains("no slot freed within 100 ms"),
            "{}",
            refused.message
        );
        assert_eq!(outcome(&metrics, "timeout", "default"), 1);
        assert_eq!(gate.view().waiting, 0);
        assert_eq!(
            metrics
                .admission_wait
                .with_label_values(&["g"])
                .get_sample_count(),
            1
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_deadline_shorter_than_the_wait_bounds_it_and_an_impossible_one_is_refused_now() {
        let (gate, metrics) = gate("max_concurrency = 1\nqueue_timeout_ms = 60000");
        // The group's service time is learnt from calls: 50 ms each.
        for _ in 0..64 {
            let permit = gate.admit(Ask::default()).await.unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
            drop(permit);
        }
        let _held = gate.admit(Ask::default()).await.unwrap();
        let short = Ask {
            deadline: Some(Duration::from_millis(40)),
            ..Ask::default()
        };
        let started = tokio::time::Instant::now();
        let refused = gate
            .admit(short)
            .await
            .err()
            .expect("cannot be served in time");
        assert_eq!(started.elapsed(), Duration::ZERO, "refused without waiting");
        assert!(
            refused.message.contains("deadline of 40 ms"),
            "{}",
            refused.message
        );
        let later = Ask {
            deadline: Some(Duration::from_millis(150)),
            ..Ask::default()
        };
        let refused = gate.admit(later).await.err().expect("no slot in time");
        // It waited until only a service time was left of its deadline.
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(99) && waited <= Duration::from_millis(101),
            "{waited:?}"
        );
        assert!(refused.message.contains("deadline"));
        assert_eq!(outcome(&metrics, "deadline", "default"), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_whose_wait_would_outlast_its_bound_is_refused_as_it_arrives() {
        let (gate, metrics) = gate("max_concurrency = 1\nqueue_timeout_ms = 100");
        // 40 ms a call, learnt.
        for _ in 0..64 {
            let permit = gate.admit(Ask::default()).await.unwrap();
            tokio::time::sleep(Duration::from_millis(40)).await;
            drop(permit);
        }
        let _held = gate.admit(Ask::default()).await.unwrap();
        // Ahead of the first: nothing (40 ms, within half of 100 ms); of
        // the second, one (80 ms: past it).
        let _first = queued(&gate, Ask::default()).await;
        let started = tokio::time::Instant::now();
        let refused = gate.admit(Ask::default()).await.err().expect("backlog");
        assert_eq!(started.elapsed(), Duration::ZERO, "refused as it arrived");
        assert!(
            refused.message.contains("longer than it may wait (100 ms)"),
            "{}",
            refused.message
        );
        assert_eq!(outcome(&metrics, "backlog", "default"), 1);
        // A better level has nobody ahead of it.
        let _urgent = queued(&gate, at(1)).await;
        assert_eq!(gate.view().waiting, 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_continuing_sequence_is_admitted_at_once_above_the_limit() {
        let (gate, _) = gate("max_concurrency = 1\nqueue_length = 0");
        let held = gate.admit(Ask::default()).await.unwrap();
        let start = gate.admit(Ask::default()).await;
        assert!(start.is_err(), "a sequence's start is new work");
        let continuing = Ask {
            continues_sequence: true,
            ..Ask::default()
        };
        let permit = gate.admit(continuing).await.expect("never held back");
        assert_eq!(gate.view().in_flight, 2);
        drop((held, permit));
        assert_eq!(gate.view().in_flight, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_that_goes_away_leaves_and_its_slot_goes_to_the_next() {
        let (gate, _) = gate("max_concurrency = 1\nqueue_timeout_ms = 60000");
        let held = gate.admit(Ask::default()).await.unwrap();
        let gone = queued(&gate, Ask::default()).await;
        let next = queued(&gate, Ask::default()).await;
        assert_eq!(gate.view().waiting, 2);
        gone.abort();
        let _ = gone.await;
        assert_eq!(gate.view().waiting, 1);
        drop(held);
        let permit = next.await.unwrap().expect("the next waiter");
        assert_eq!(gate.view().in_flight, 1);
        drop(permit);
        assert_eq!(gate.view().in_flight, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_slot_handed_to_a_waiter_as_it_leaves_goes_on() {
        let (gate, _) = gate("max_concurrency = 1\nqueue_timeout_ms = 60000");
        let held = gate.admit(Ask::default()).await.unwrap();
        let mut admit = Box::pin(gate.admit(Ask::default()));
        // Polled once: it waits in the queue.
        assert!(futures_poll_once(admit.as_mut()).await.is_none());
        drop(held); // the slot is handed to it ...
        drop(admit); // ... and it leaves before it reads it
        assert_eq!(gate.view().in_flight, 0, "the slot came back");
        assert_eq!(gate.view().waiting, 0);
    }

    async fn futures_poll_once<F: std::future::Future + Unpin>(f: F) -> Option<F::Output> {
        let mut f = f;
        std::future::poll_fn(|cx| match std::pin::Pin::new(&mut f).poll(cx) {
            std::task::Poll::Ready(v) => std::task::Poll::Ready(Some(v)),
            std::task::Poll::Pending => std::task::Poll::Ready(None),
        })
        .await
    }

    #[tokio::test(start_paused = true)]
    async fn the_adaptive_limit_starts_with_a_probe_and_is_shown() {
        let (gate, _) = gate("max_concurrency = 8\nadaptive = true");
        let view = gate.view();
        assert!(view.adaptive);
        assert_eq!(view.limit, adaptive::PROBE_LIMIT);
        for _ in 0..adaptive::PROBE_SAMPLES {
            let permit = gate.admit(Ask::default()).await.unwrap();
            tokio::time::sleep(Duration::from_millis(10)).await;
            drop(permit);
        }
        let view = gate.view();
        assert_eq!(view.limit, 8);
        assert_eq!(view.min_rtt_ms, Some(10.0));
    }
}
