//! The open loop (`--rate`): requests arrive on a schedule of their own
//! (module `arrivals`: Poisson, seeded), not when an answer came back, so
//! a slow server meets the same offered load a fast one does.
//!
//! `--connections` keep-alive connections are opened first, each carrying
//! one request (`opened`: a server may close a connection that never sent
//! one; a kept-alive one it keeps). Each arrival goes out on an idle
//! connection at once; when every connection has a request in flight it
//! is not sent and counted as such ("not sent: the
//! client saturated", a loss of the client's, not the server's: more
//! connections would have sent it). A request's latency runs from its first
//! byte written to its answer's last byte read (a reconnect after a closed
//! connection included); the lag from its arrival's due time to that first
//! byte is reported apart (the client's timer wakes up to a millisecond
//! late, and arrivals due in the same millisecond go out together).
//!
//! Every request sent is waited for (up to `--timeout`) and ends as one of:
//! 200, 503 (with or without `Retry-After`), another status, an I/O error
//! (a reset, a closed connection), a timeout. A timed-out connection is
//! dropped; its next request reconnects.
//!
//! Phases, in order: the unloaded pre-run (`--unloaded-rate` for
//! `--unloaded-duration` seconds, half its arrivals high priority when
//! `--priority-share` is set, so each class has a sample; all its answers
//! waited for), then `--warmup` and the measured `--duration`: an arrival
//! belongs to the phase it is due in, whenever its answer comes. The CPU of
//! the `--pid` groups is sampled at the measured window's two ends.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::arrivals::Arrivals;
use crate::cpu::{self, CpuSample};
use crate::link::{Link, Target};

/// The share of high-priority arrivals in the unloaded pre-run (when any
/// are asked for): each class gets half of its few requests.
const UNLOADED_SHARE: f64 = 0.5;

/// The schedule.
pub(crate) struct Plan {
    /// Requests a second, all classes.
    pub(crate) rate: f64,
    /// The share of high-priority arrivals.
    pub(crate) share: f64,
    pub(crate) seed: u64,
    /// The unloaded pre-run: its rate and length.
    pub(crate) unloaded: Option<(f64, Duration)>,
    pub(crate) warmup: Duration,
    pub(crate) duration: Duration,
    /// Per request.
    pub(crate) timeout: Duration,
    /// Each arrival on an idle connection picked at random (seeded), so
    /// every connection sends now and then (`--spread`); otherwise on the
    /// one idle last, so a few connections carry a light load.
    pub(crate) spread: bool,
}

/// The bytes of a request of each class.
#[derive(Clone)]
pub(crate) struct Requests {
    pub(crate) normal: Bytes,
    /// With the priority header.
    pub(crate) high: Bytes,
}

/// What became of one class's arrivals in one phase.
#[derive(Default)]
pub(crate) struct Class {
    /// Due while every connection was busy.
    pub(crate) not_sent: u64,
    /// Latencies (µs) of the 200 answers.
    pub(crate) ok_us: Vec<u32>,
    /// Latencies (µs) of the 503 answers.
    pub(crate) refused_us: Vec<u32>,
    /// Of the 503 answers, those without `Retry-After`.
    pub(crate) refused_without_retry_after: u64,
    /// Answers other than 200 and 503, by status.
    pub(crate) statuses: BTreeMap<u16, u64>,
    pub(crate) io_errors: u64,
    pub(crate) timeouts: u64,
    /// µs from each sent request's due time to its first byte.
    pub(crate) lag_us: Vec<u32>,
}

impl Class {
    pub(crate) fn sent(&self) -> u64 {
        self.ok_us.len() as u64
            + self.refused_us.len() as u64
            + self.statuses.values().sum::<u64>()
            + self.io_errors
            + self.timeouts
    }

    pub(crate) fn offered(&self) -> u64 {
        self.sent() + self.not_sent
    }

    /// Sent and answered neither 200 nor 503 with `Retry-After`.
    pub(crate) fn lost(&self) -> u64 {
        self.statuses.values().sum::<u64>()
            + self.io_errors
            + self.timeouts
            + self.refused_without_retry_after
    }

    /// Both classes' counts and samples together.
    pub(crate) fn both(a: &Class, b: &Class) -> Class {
        let joined = |x: &[u32], y: &[u32]| [x, y].concat();
        let mut statuses = a.statuses.clone();
        for (status, n) in &b.statuses {
            *statuses.entry(*status).or_default() += n;
        }
        Class {
            not_sent: a.not_sent + b.not_sent,
            ok_us: joined(&a.ok_us, &b.ok_us),
            refused_us: joined(&a.refused_us, &b.refused_us),
            refused_without_retry_after: a.refused_without_retry_after
                + b.refused_without_retry_after,
            statuses,
            io_errors: a.io_errors + b.io_errors,
            timeouts: a.timeouts + b.timeouts,
            lag_us: joined(&a.lag_us, &b.lag_us),
        }
    }
}

/// One phase: each class apart.
#[derive(Default)]
pub(crate) struct Tally {
    pub(crate) normal: Class,
    pub(crate) high: Class,
}

impl Tally {
    fn class(&mut self, high: bool) -> &mut Class {
        if high {
            &mut self.high
        } else {
            &mut self.normal
        }
    }
}

#[derive(Clone, Copy)]
enum Phase {
    Unloaded,
    Warmup,
    Measured,
}

/// What the open loop measured.
pub(crate) struct Measured {
    pub(crate) unloaded: Tally,
    pub(crate) warmup: Tally,
    pub(crate) measured: Tally,
    pub(crate) before: CpuSample,
    pub(crate) after: CpuSample,
    /// The measured window as it was, seconds.
    pub(crate) window: f64,
    /// The first answer other than 200 and 503, or I/O error, or timeout.
    pub(crate) first_error: Option<String>,
    /// The first 503 answer, as the report's sample of a refusal.
    pub(crate) first_refusal: Option<String>,
    /// The `--pid` groups' resident memory.
    pub(crate) rss: Rss,
}

/// Resident KiB of each `--pid` group: before the connections were opened,
/// once every one was open (and had carried its first request), at the end
/// of the measured window.
pub(crate) struct Rss {
    pub(crate) before_open: Vec<Option<u64>>,
    pub(crate) open: Vec<Option<u64>>,
    pub(crate) end: Vec<Option<u64>>,
}

/// A request to send now.
struct Job {
    due: Instant,
    high: bool,
    phase: Phase,
}

enum Outcome {
    Answer {
        status: u16,
        retry_after: bool,
        us: u32,
        /// The body's start, when not 200.
        sample: String,
    },
    Io(String),
    Timeout,
}

/// A connection's report of its request; the connection is idle again.
struct Done {
    conn: usize,
    job: Job,
    sent_at: Instant,
    outcome: Outcome,
}

fn micros(d: Duration) -> u32 {
    d.as_micros().min(u32::MAX as u128) as u32
}

/// One connection: each job's request sent and its answer read.
async fn connection(
    id: usize,
    mut link: Option<Link>,
    target: Target,
    requests: Requests,
    timeout: Duration,
    mut jobs: mpsc::Receiver<Job>,
    done: mpsc::UnboundedSender<Done>,
) {
    while let Some(job) = jobs.recv().await {
        let request = if job.high {
            &requests.high
        } else {
            &requests.normal
        };
        let sent_at = Instant::now();
        let attempt = async {
            let mut c = match link.take() {
                Some(c) => c,
                None => Link::connect(target).await?,
            };
            let answer = c.exchange(request, false).await?;
            Ok::<_, std::io::Error>((c, answer))
        };
        let outcome = match tokio::time::timeout(timeout, attempt).await {
            Err(_) => Outcome::Timeout,
            Ok(Err(e)) => Outcome::Io(e.to_string()),
            Ok(Ok((c, answer))) => {
                if !answer.close {
                    link = Some(c);
                }
                Outcome::Answer {
                    status: answer.status,
                    retry_after: answer.retry_after,
                    us: micros(sent_at.elapsed()),
                    sample: String::from_utf8_lossy(&answer.body).trim().to_string(),
                }
            }
        };
        let report = Done {
            conn: id,
            job,
            sent_at,
            outcome,
        };
        if done.send(report).is_err() {
            return;
        }
    }
}

/// The arrivals' side: which connections are idle, what became of each
/// request.
struct Dispatcher {
    jobs: Vec<mpsc::Sender<Job>>,
    idle: Vec<usize>,
    done: mpsc::UnboundedReceiver<Done>,
    in_flight: usize,
    unloaded: Tally,
    warmup: Tally,
    measured: Tally,
    first_error: Option<String>,
    first_refusal: Option<String>,
    /// `Plan::spread`: the state of the generator that picks among the
    /// idle connections.
    spread: Option<u64>,
}

impl Dispatcher {
    /// Every connection of `jobs` idle, the first to be taken first.
    fn new(
        jobs: Vec<mpsc::Sender<Job>>,
        done: mpsc::UnboundedReceiver<Done>,
        spread: Option<u64>,
    ) -> Dispatcher {
        Dispatcher {
            idle: (0..jobs.len()).rev().collect(),
            jobs,
            done,
            in_flight: 0,
            unloaded: Tally::default(),
            warmup: Tally::default(),
            measured: Tally::default(),
            first_error: None,
            first_refusal: None,
            spread,
        }
    }

    /// The idle connection the next arrival goes out on.
    fn take_idle(&mut self) -> Option<usize> {
        let Some(state) = &mut self.spread else {
            return self.idle.pop();
        };
        if self.idle.is_empty() {
            return None;
        }
        // xorshift64: cheap, seeded, evenly spread enough to pick from.
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        let at = (*state % self.idle.len() as u64) as usize;
        Some(self.idle.swap_remove(at))
    }

    fn tally(&mut self, phase: Phase) -> &mut Tally {
        match phase {
            Phase::Unloaded => &mut self.unloaded,
            Phase::Warmup => &mut self.warmup,
            Phase::Measured => &mut self.measured,
        }
    }

    /// Sends each arrival when due (from `start`) on an idle connection,
    /// or counts it as not sent.
    async fn send(
        &mut self,
        start: Instant,
        arrivals: Arrivals,
        phase_of: impl Fn(Duration) -> Phase,
    ) {
        for arrival in arrivals {
            let due = start + arrival.at;
            tokio::time::sleep_until(due).await;
            while let Ok(done) = self.done.try_recv() {
                self.record(done);
            }
            let job = Job {
                due,
                high: arrival.high,
                phase: phase_of(arrival.at),
            };
            match self.take_idle() {
                Some(conn) => match self.jobs[conn].try_send(job) {
                    Ok(()) => self.in_flight += 1,
                    // The connection's task is gone (it cannot be busy:
                    // it was idle); the connection is not used again.
                    Err(e) => {
                        let job = e.into_inner();
                        self.tally(job.phase).class(job.high).io_errors += 1;
                        self.first_error
                            .get_or_insert_with(|| "connection task gone".into());
                    }
                },
                None => self.tally(job.phase).class(job.high).not_sent += 1,
            }
        }
    }

    /// Waits for every request in flight.
    async fn drain(&mut self) {
        while self.in_flight > 0 {
            match self.done.recv().await {
                Some(done) => self.record(done),
                None => return,
            }
        }
    }

    fn record(&mut self, done: Done) {
        self.idle.push(done.conn);
        self.in_flight -= 1;
        let Done {
            job,
            sent_at,
            outcome,
            ..
        } = done;
        let mut note = None;
        let mut refusal = None;
        let class = self.tally(job.phase).class(job.high);
        class.lag_us.push(micros(sent_at - job.due));
        match outcome {
            Outcome::Answer {
                status: 200, us, ..
            } => class.ok_us.push(us),
            Outcome::Answer {
                status: 503,
                retry_after,
                us,
                sample,
            } => {
                class.refused_us.push(us);
                if !retry_after {
                    class.refused_without_retry_after += 1;
                }
                let with = if retry_after { "with" } else { "without" };
                refusal = Some(format!("503 {with} Retry-After: {sample}"));
            }
            Outcome::Answer { status, sample, .. } => {
                *class.statuses.entry(status).or_default() += 1;
                note = Some(format!("status {status}: {sample}"));
            }
            Outcome::Io(e) => {
                class.io_errors += 1;
                note = Some(format!("I/O: {e}"));
            }
            Outcome::Timeout => {
                class.timeouts += 1;
                note = Some("timeout".to_string());
            }
        }
        if self.first_error.is_none() {
            self.first_error = note;
        }
        if self.first_refusal.is_none() {
            self.first_refusal = refusal;
        }
    }
}

/// `connections` links to `target`, opened before the first arrival, each
/// after one exchange of `request` (its answer, whatever it is, is not
/// counted). A link that has carried a request is a kept-alive connection,
/// as a client's pool holds: one that never sent anything is closed by a
/// server's first-request deadline (tensorgate's `handshake_timeout_ms`,
/// 5 s), and the arrival that first used it after that would fail on it
/// as if the server had lost it. A link that fails to open or to answer,
/// or that the server closes, is `None`: its first request reconnects
/// (and fails if that fails).
async fn opened(target: Target, request: &Bytes, connections: usize) -> Vec<Option<Link>> {
    let mut warming = tokio::task::JoinSet::new();
    for id in 0..connections {
        let request = request.clone();
        warming.spawn(async move {
            let link = async {
                let mut link = Link::connect(target).await.ok()?;
                let answer = link.exchange(&request, false).await.ok()?;
                (!answer.close).then_some(link)
            };
            (id, link.await)
        });
    }
    let mut links: Vec<Option<Link>> = (0..connections).map(|_| None).collect();
    while let Some(joined) = warming.join_next().await {
        if let Ok((id, link)) = joined {
            links[id] = link;
        }
    }
    links
}

/// Runs the open loop on `connections` connections to `target`.
pub(crate) async fn run(
    target: Target,
    requests: Requests,
    connections: usize,
    plan: &Plan,
    pid_groups: &[Vec<String>],
) -> Measured {
    let (done_tx, done) = mpsc::unbounded_channel();
    let mut jobs = Vec::with_capacity(connections);
    let rss_before = cpu::group_rss(pid_groups);
    let links = opened(target, &requests.normal, connections).await;
    let rss_open = cpu::group_rss(pid_groups);
    for (id, link) in links.into_iter().enumerate() {
        let (tx, rx) = mpsc::channel(1);
        jobs.push(tx);
        tokio::spawn(connection(
            id,
            link,
            target,
            requests.clone(),
            plan.timeout,
            rx,
            done_tx.clone(),
        ));
    }
    drop(done_tx);
    // Never 0: xorshift stays at 0.
    let spread = plan.spread.then_some(plan.seed | 1);
    let mut d = Dispatcher::new(jobs, done, spread);
    if let Some((rate, span)) = plan.unloaded {
        let share = if plan.share > 0.0 {
            UNLOADED_SHARE
        } else {
            0.0
        };
        let arrivals = Arrivals::new(rate, share, !plan.seed, span);
        d.send(Instant::now(), arrivals, |_| Phase::Unloaded).await;
        d.drain().await;
    }
    let start = Instant::now();
    let (warmup, measure_start) = (plan.warmup, start + plan.warmup);
    let end = measure_start + plan.duration;
    let groups = pid_groups.to_vec();
    let sampler = tokio::spawn(async move {
        tokio::time::sleep_until(measure_start).await;
        let before = cpu::sample(&groups);
        let t = Instant::now();
        tokio::time::sleep_until(end).await;
        let after = cpu::sample(&groups);
        let rss = cpu::group_rss(&groups);
        (before, after, t.elapsed().as_secs_f64(), rss)
    });
    let arrivals = Arrivals::new(plan.rate, plan.share, plan.seed, warmup + plan.duration);
    d.send(start, arrivals, |at| {
        if at < warmup {
            Phase::Warmup
        } else {
            Phase::Measured
        }
    })
    .await;
    d.drain().await;
    let (before, after, window, rss_end) = match sampler.await {
        Ok(samples) => samples,
        // Not sampled: no CPU reported.
        Err(_) => (
            cpu::sample(pid_groups),
            cpu::sample(pid_groups),
            plan.duration.as_secs_f64(),
            cpu::group_rss(pid_groups),
        ),
    };
    Measured {
        unloaded: d.unloaded,
        warmup: d.warmup,
        measured: d.measured,
        before,
        after,
        window,
        first_error: d.first_error,
        first_refusal: d.first_refusal,
        rss: Rss {
            before_open: rss_before,
            open: rss_open,
            end: rss_end,
        },
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// A loopback server that answers every request on a connection:
    /// a request with `x-priority` gets 200, every other 503 with
    /// `Retry-After`, and every third connection is closed after its first
    /// answer without saying so (the client sees it at its next request).
    async fn server() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let mut n = 0;
            while let Ok((mut s, _)) = listener.accept().await {
                n += 1;
                let close_early = n % 3 == 0;
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    let mut have = Vec::new();
                    loop {
                        let Ok(got) = s.read(&mut buf).await else {
                            return;
                        };
                        if got == 0 {
                            return;
                        }
                        have.extend_from_slice(&buf[..got]);
                        while let Some(end) = have.windows(4).position(|w| w == b"\r\n\r\n") {
                            let head = String::from_utf8_lossy(&have[..end]).to_lowercase();
                            have.drain(..end + 4);
                            let answer: &[u8] = if head.contains("x-priority: 1") {
                                b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
                            } else {
                                b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\ncontent-length: 4\r\n\r\nbusy"
                            };
                            if s.write_all(answer).await.is_err() {
                                return;
                            }
                            if close_early {
                                return;
                            }
                        }
                    }
                });
            }
        });
        addr
    }

    #[tokio::test]
    async fn every_arrival_is_counted_once_and_each_class_apart() {
        let addr = server().await;
        let target = Target {
            addr,
            grpc: false,
            rate: None,
        };
        let requests = Requests {
            normal: Bytes::from_static(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
            high: Bytes::from_static(b"GET / HTTP/1.1\r\nx-priority: 1\r\nHost: x\r\n\r\n"),
        };
        let plan = Plan {
            rate: 400.0,
            share: 0.3,
            seed: 5,
            unloaded: Some((50.0, Duration::from_millis(200))),
            warmup: Duration::from_millis(50),
            duration: Duration::from_millis(250),
            timeout: Duration::from_secs(5),
            spread: false,
        };
        let m = run(target, requests, 3, &plan, &[]).await;
        let expected = |rate, share, seed, span| {
            let arrivals: Vec<_> = Arrivals::new(rate, share, seed, span).collect();
            let high = arrivals.iter().filter(|a| a.high).count() as u64;
            (arrivals.len() as u64 - high, high)
        };
        let (normal, high) = expected(400.0, 0.3, 5, Duration::from_millis(300));
        let offered = |t: &Tally| (t.normal.offered(), t.high.offered());
        let (wn, wh) = offered(&m.warmup);
        let (mn, mh) = offered(&m.measured);
        assert_eq!((wn + mn, wh + mh), (normal, high));
        assert_eq!(
            offered(&m.unloaded),
            expected(50.0, UNLOADED_SHARE, !5, Duration::from_millis(200))
        );
        for t in [&m.unloaded, &m.warmup, &m.measured] {
            // Closed connections may fail a request (I/O) but lose none.
            assert!(t.normal.ok_us.is_empty() && t.high.refused_us.is_empty());
            assert_eq!(t.normal.refused_without_retry_after, 0);
            assert_eq!((t.normal.timeouts, t.high.timeouts), (0, 0));
            assert_eq!(
                t.high.lag_us.len() as u64 + t.normal.lag_us.len() as u64,
                t.high.sent() + t.normal.sent()
            );
        }
        assert!(m
            .first_refusal
            .unwrap()
            .starts_with("503 with Retry-After: busy"));
    }

    /// The connections that sent a request (each counted at its first).
    async fn counting_server() -> (SocketAddr, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let asked = Arc::new(AtomicUsize::new(0));
        let counter = asked.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let counter = counter.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    let mut first = true;
                    while let Ok(got) = s.read(&mut buf).await {
                        if got == 0 {
                            return;
                        }
                        if std::mem::take(&mut first) {
                            counter.fetch_add(1, Ordering::SeqCst);
                        }
                        let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                        if s.write_all(answer).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (addr, asked)
    }

    #[tokio::test]
    async fn every_connection_carries_a_request_before_the_first_arrival() {
        let (addr, asked) = counting_server().await;
        let target = Target {
            addr,
            grpc: false,
            rate: None,
        };
        let request = Bytes::from_static(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        let links = opened(target, &request, 6).await;
        // Without it, a connection the arrivals reach late has never sent
        // a request, and a server's first-request deadline may have closed
        // it: the request then fails as if the server had lost it.
        assert!(links.iter().all(Option::is_some));
        assert_eq!(asked.load(Ordering::SeqCst), 6);
    }

    #[test]
    fn spread_picks_among_the_idle_connections_and_takes_each_once() {
        let dispatcher = |spread| {
            let jobs = (0..6).map(|_| mpsc::channel(1).0).collect();
            Dispatcher::new(jobs, mpsc::unbounded_channel().1, spread)
        };
        let mut last = dispatcher(None);
        let order: Vec<_> = std::iter::from_fn(|| last.take_idle()).collect();
        assert_eq!(order, [0, 1, 2, 3, 4, 5]);
        let mut spread = dispatcher(Some(7));
        let mut order: Vec<_> = std::iter::from_fn(|| spread.take_idle()).collect();
        assert_ne!(order, [0, 1, 2, 3, 4, 5]);
        order.sort_unstable();
        assert_eq!(order, [0, 1, 2, 3, 4, 5]);
    }
}
