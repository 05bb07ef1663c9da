//! The closed loop: each of `--connections` connections sends the request,
//! reads the whole answer and sends the next one at once, through the
//! warmup and the measured window; the CPU counters are sampled at the
//! window's two ends. Only status 200 counts as success; any other
//! status, an I/O error or a timeout is an error.

use std::io;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use crate::check;
use crate::cpu::{self, CpuSample};
use crate::link::{Link, Target};
use crate::request::Request;
use crate::stats::Stats;

/// The load's phases, from its start.
#[derive(Clone, Copy)]
pub(crate) struct Schedule {
    pub(crate) warmup: Duration,
    pub(crate) duration: Duration,
    /// Per request (a timeout counts as an error).
    pub(crate) timeout: Duration,
}

/// What the load measured.
pub(crate) struct Measured {
    pub(crate) stats: Stats,
    pub(crate) before: CpuSample,
    pub(crate) after: CpuSample,
    /// The measured window as it was, seconds.
    pub(crate) window: f64,
}

/// The one checked request, on a connection of its own.
pub(crate) async fn check_once(
    target: Target,
    request: &Request,
    timeout: Duration,
) -> Result<(), String> {
    let attempt = async {
        let mut c = Link::connect(target).await?;
        c.exchange(&request.bytes, true).await
    };
    match tokio::time::timeout(timeout, attempt).await {
        Err(_) => Err(format!("timeout after {timeout:?}")),
        Ok(Err(e)) => Err(format!("I/O: {e}")),
        Ok(Ok(resp)) => match (&request.shm, &request.expected) {
            (Some(regions), Some(expected)) => check::validate_shm(&resp, expected, regions),
            _ => check::validate(&resp, request.expected.as_ref(), request.grpc),
        },
    }
}

/// Runs `connections` connections on the schedule; samples the CPU of
/// `pid_groups` over the measured window.
pub(crate) async fn load(
    target: Target,
    request: Bytes,
    connections: usize,
    schedule: Schedule,
    pid_groups: &[Vec<String>],
) -> Measured {
    let start = Instant::now();
    let measure_start = start + schedule.warmup;
    let end = measure_start + schedule.duration;
    let tasks: Vec<_> = (0..connections)
        .map(|_| {
            tokio::spawn(connection(
                target,
                request.clone(),
                measure_start,
                end,
                schedule.timeout,
            ))
        })
        .collect();
    tokio::time::sleep_until(measure_start).await;
    let before = cpu::sample(pid_groups);
    let t_before = Instant::now();
    tokio::time::sleep_until(end).await;
    let after = cpu::sample(pid_groups);
    let window = t_before.elapsed().as_secs_f64();
    let mut stats = Stats::default();
    for task in tasks {
        match task.await {
            Ok(s) => stats.merge(s),
            Err(e) => stats.note(|| format!("connection task failed: {e}")),
        }
    }
    Measured {
        stats,
        before,
        after,
        window,
    }
}

/// One connection's loop until `end` (reconnecting when the server closed
/// or failed); what completes before `measure_start` is warmup.
async fn connection(
    target: Target,
    request: Bytes,
    measure_start: Instant,
    end: Instant,
    timeout: Duration,
) -> Stats {
    let mut stats = Stats::default();
    let mut conn: Option<Link> = None;
    while Instant::now() < end {
        let t0 = Instant::now();
        let attempt = async {
            let mut c = match conn.take() {
                Some(c) => c,
                None => Link::connect(target).await?,
            };
            let resp = c.exchange(&request, false).await?;
            Ok::<_, io::Error>((c, resp))
        };
        let outcome =
            match tokio::time::timeout_at(end, tokio::time::timeout(timeout, attempt)).await {
                Err(_) => break, // the window is over; abandon the request in flight
                Ok(outcome) => outcome,
            };
        let t1 = Instant::now();
        let measured = t1 >= measure_start;
        match outcome {
            Ok(Ok((c, resp))) => {
                if !resp.close {
                    conn = Some(c);
                }
                if resp.status == 200 {
                    if measured {
                        let us = (t1 - t0).as_micros().min(u32::MAX as u128) as u32;
                        stats.latencies_us.push(us);
                        stats.response_bytes += resp.body_len;
                    } else {
                        stats.warmup_ok += 1;
                    }
                } else {
                    if measured {
                        *stats.statuses.entry(resp.status).or_default() += 1;
                    } else {
                        stats.warmup_errors += 1;
                    }
                    stats.note(|| {
                        format!(
                            "status {}: {}",
                            resp.status,
                            String::from_utf8_lossy(&resp.body).trim()
                        )
                    });
                }
            }
            Ok(Err(e)) => {
                if measured {
                    stats.io_errors += 1;
                } else {
                    stats.warmup_errors += 1;
                }
                stats.note(|| format!("I/O: {e}"));
                // Do not spin on a refused connection.
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(_) => {
                if measured {
                    stats.timeouts += 1;
                } else {
                    stats.warmup_errors += 1;
                }
                stats.note(|| format!("timeout after {timeout:?}"));
            }
        }
    }
    stats
}
