//! The report: one JSON object (`--json`, what scripts/bench and
//! scripts/bench-hop read) or a few lines of text, from what the load
//! measured and the CPU samples around its window.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::cli::Args;
use crate::cpu::CpuSample;
use crate::open_loop::{self, Class};
use crate::request::Request;
use crate::run::Measured;
use crate::stats::percentile;

/// The report's inputs besides the command line.
pub(crate) struct Run<'a> {
    pub(crate) request: &'a Request,
    pub(crate) measured: &'a Measured,
    pub(crate) validation: Option<&'a Result<(), String>>,
    pub(crate) pid_groups: &'a [Vec<String>],
    /// Clock ticks a second (the CPU samples' unit).
    pub(crate) ticks: f64,
}

/// The report as text (JSON or lines) and whether the run failed: an
/// error, a failed check or no request at all.
pub(crate) fn report(args: &Args, run: &Run<'_>) -> (String, bool) {
    let Measured {
        stats,
        before,
        after,
        window,
    } = run.measured;
    let window = *window;
    let mut lat = stats.latencies_us.clone();
    lat.sort_unstable();
    let ok = lat.len() as u64;
    let errors = stats.errors();
    let rps = ok as f64 / window;
    let Cpu {
        groups: cpu,
        client_us_per_req: client_cpu,
        client_cores,
        machine_busy,
    } = Cpu::over(run.pid_groups, (before, after), window, run.ticks, ok);
    let mean_us = if ok > 0 {
        lat.iter().map(|&v| v as f64).sum::<f64>() / ok as f64
    } else {
        0.0
    };
    let (p50, p90, p99) = (
        percentile(&lat, 0.50),
        percentile(&lat, 0.90),
        percentile(&lat, 0.99),
    );
    let max = lat.last().copied().unwrap_or(0);
    let validation = run.validation;
    let failed = errors > 0 || matches!(validation, Some(Err(_))) || ok == 0;
    let mut out = String::new();
    if args.json {
        let report = json!({
            "label": args.label,
            "url": args.url,
            "workload": args.workload.map(|w| w.name()),
            "request_bytes": run.request.bytes.len(),
            "connections": args.connections,
            "rate_mb_s": args.rate_mb_s,
            "window_s": window,
            "requests": ok,
            "rps": rps,
            "mean_us": mean_us,
            "p50_us": p50,
            "p90_us": p90,
            "p99_us": p99,
            "max_us": max,
            "errors": errors,
            "error_statuses": stats.statuses.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
            "io_errors": stats.io_errors,
            "timeouts": stats.timeouts,
            "warmup_requests": stats.warmup_ok,
            "warmup_errors": stats.warmup_errors,
            "first_error": stats.first_error,
            "response_bytes_per_req": stats.response_bytes.checked_div(ok).unwrap_or(0),
            "validation": validation.map(|v| match v {
                Ok(()) => "ok".to_string(),
                Err(e) => e.clone(),
            }),
            "cpu": cpu,
            "client_cpu_us_per_req": client_cpu,
            "client_cpu_cores": client_cores,
            "machine_busy": machine_busy,
        });
        let _ = writeln!(out, "{report}");
        return (out, failed);
    }
    let _ = writeln!(
        out,
        "{} ({} connections, {:.1} s): {} requests, {:.1} req/s, p50 {}, p90 {}, p99 {}, max {}, errors {}",
        args.url,
        args.connections,
        window,
        ok,
        rps,
        fmt_us(p50),
        fmt_us(p90),
        fmt_us(p99),
        fmt_us(max),
        errors,
    );
    match validation {
        Some(Ok(())) => {
            let _ = writeln!(out, "  validation: ok");
        }
        Some(Err(e)) => {
            let _ = writeln!(out, "  validation FAILED: {e}");
        }
        None => {}
    }
    for c in &cpu {
        if let Some(us) = c["cpu_us_per_req"].as_f64() {
            let _ = writeln!(
                out,
                "  CPU of {}: {:.1} µs/request ({:.2} cores)",
                c["pids"],
                us,
                c["cpu_cores"].as_f64().unwrap_or(0.0)
            );
        }
    }
    if let Some(us) = client_cpu {
        let _ = writeln!(out, "  client CPU: {us:.1} µs/request");
    }
    if let Some(b) = machine_busy {
        let _ = writeln!(out, "  machine busy: {:.0}%", b * 100.0);
    }
    if let Some(e) = &stats.first_error {
        let _ = writeln!(out, "  first error: {e}");
    }
    (out, failed)
}

/// The CPU the `--pid` groups and the client spent over a window of
/// `requests` requests, and how busy the machine was.
struct Cpu {
    /// Per group: its PIDs, µs per request, cores.
    groups: Vec<Value>,
    client_us_per_req: Option<f64>,
    client_cores: Option<f64>,
    machine_busy: Option<f64>,
}

impl Cpu {
    fn over(
        pid_groups: &[Vec<String>],
        (before, after): (&CpuSample, &CpuSample),
        window: f64,
        ticks: f64,
        requests: u64,
    ) -> Cpu {
        let per_req = |d: Option<u64>| -> Option<f64> {
            let d = d? as f64 / ticks * 1e6;
            (requests > 0).then(|| d / requests as f64)
        };
        let delta = |a: Option<u64>, b: Option<u64>| b?.checked_sub(a?);
        let groups = pid_groups
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let d = delta(before.groups[i], after.groups[i]);
                json!({
                    "pids": g,
                    "cpu_us_per_req": per_req(d),
                    "cpu_cores": d.map(|d| d as f64 / ticks / window),
                })
            })
            .collect();
        let own = delta(before.own, after.own);
        let machine_busy = match (before.machine, after.machine) {
            (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => {
                Some((b1 - b0) as f64 / (t1 - t0) as f64)
            }
            _ => None,
        };
        Cpu {
            groups,
            client_us_per_req: per_req(own),
            client_cores: own.map(|d| d as f64 / ticks / window),
            machine_busy,
        }
    }
}

/// The open loop's report inputs besides the command line.
pub(crate) struct OpenRun<'a> {
    pub(crate) measured: &'a open_loop::Measured,
    pub(crate) validation: Option<&'a Result<(), String>>,
    pub(crate) pid_groups: &'a [Vec<String>],
    pub(crate) ticks: f64,
}

/// One class's (or both classes') numbers over `window` seconds.
fn class_json(c: &Class, window: f64) -> Value {
    let sorted = |v: &[u32]| {
        let mut v = v.to_vec();
        v.sort_unstable();
        v
    };
    let (ok, refused, lag) = (sorted(&c.ok_us), sorted(&c.refused_us), sorted(&c.lag_us));
    json!({
        "offered": c.offered(),
        "sent": c.sent(),
        "not_sent": c.not_sent,
        "ok": ok.len(),
        "goodput_rps": ok.len() as f64 / window,
        "p50_us": percentile(&ok, 0.50),
        "p99_us": percentile(&ok, 0.99),
        "max_us": ok.last().copied().unwrap_or(0),
        "refused": refused.len(),
        "refused_without_retry_after": c.refused_without_retry_after,
        "refused_p50_us": percentile(&refused, 0.50),
        "refused_p99_us": percentile(&refused, 0.99),
        "other_statuses": c.statuses.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
        "io_errors": c.io_errors,
        "timeouts": c.timeouts,
        "lost": c.lost(),
        "lag_p99_us": percentile(&lag, 0.99),
    })
}

/// Bytes of resident memory each `--pid` group grew by per open
/// connection (`None` where a sample is missing).
fn per_connection(rss: &open_loop::Rss, connections: usize) -> Vec<Option<f64>> {
    rss.before_open
        .iter()
        .zip(&rss.open)
        .map(|(before, open)| {
            Some((open.as_ref()? * 1024) as f64 - (before.as_ref()? * 1024) as f64)
        })
        .map(|grown| grown.map(|g| g / connections as f64))
        .collect()
}

/// The open loop's report: per phase both classes together and each
/// apart. Failed: a failed check, or not one 200 in the window.
pub(crate) fn open_loop(args: &Args, run: &OpenRun<'_>) -> (String, bool) {
    let m = run.measured;
    let window = m.window;
    let all = Class::both(&m.measured.normal, &m.measured.high);
    let unloaded = Class::both(&m.unloaded.normal, &m.unloaded.high);
    let warmup = Class::both(&m.warmup.normal, &m.warmup.high);
    let ok = all.ok_us.len() as u64;
    let cpu = Cpu::over(run.pid_groups, (&m.before, &m.after), window, run.ticks, ok);
    let unloaded_s = args.unloaded_duration;
    let failed = matches!(run.validation, Some(Err(_))) || ok == 0;
    let mut report = class_json(&all, window);
    let fields = json!({
        "label": args.label,
        "url": args.url,
        "mode": "open",
        "workload": args.workload.map(|w| w.name()),
        "rate": args.rate,
        "seed": args.seed,
        "connections": args.connections,
        "timeout_s": args.timeout,
        "priority_share": args.priority_share,
        "priority_header": args.priority_header,
        "window_s": window,
        "high": class_json(&m.measured.high, window),
        "normal": class_json(&m.measured.normal, window),
        "unloaded": {
            "rate": args.unloaded_rate,
            "duration_s": unloaded_s,
            "all": class_json(&unloaded, unloaded_s),
            "high": class_json(&m.unloaded.high, unloaded_s),
            "normal": class_json(&m.unloaded.normal, unloaded_s),
        },
        "warmup": class_json(&warmup, args.warmup),
        "first_error": m.first_error,
        "first_refusal": m.first_refusal,
        "validation": run.validation.map(|v| match v {
            Ok(()) => "ok".to_string(),
            Err(e) => e.clone(),
        }),
        "cpu": cpu.groups,
        "client_cpu_us_per_req": cpu.client_us_per_req,
        "client_cpu_cores": cpu.client_cores,
        "machine_busy": cpu.machine_busy,
        "rss_kib": {
            "before_open": m.rss.before_open,
            "open": m.rss.open,
            "end": m.rss.end,
        },
        "rss_per_connection_bytes": per_connection(&m.rss, args.connections),
    });
    if let (Value::Object(report), Value::Object(fields)) = (&mut report, fields) {
        report.extend(fields);
    }
    let mut out = String::new();
    if args.json {
        let _ = writeln!(out, "{report}");
        return (out, failed);
    }
    let n = |key: &str| report[key].as_u64().unwrap_or(0);
    let us = |v: &Value| fmt_us(v.as_u64().unwrap_or(0) as u32);
    let _ = writeln!(
        out,
        "{} (open loop, {} req/s on {} connections, {:.1} s): offered {}, sent {}, not sent (client saturated) {}",
        args.url,
        args.rate.unwrap_or(0.0),
        args.connections,
        window,
        n("offered"),
        n("sent"),
        n("not_sent"),
    );
    let _ = writeln!(
        out,
        "  200: {} ({:.1} req/s), p50 {}, p99 {}; 503: {} ({} without Retry-After), p50 {}, p99 {}; other statuses {:?}, I/O errors {}, timeouts {}",
        n("ok"),
        report["goodput_rps"].as_f64().unwrap_or(0.0),
        us(&report["p50_us"]),
        us(&report["p99_us"]),
        n("refused"),
        n("refused_without_retry_after"),
        us(&report["refused_p50_us"]),
        us(&report["refused_p99_us"]),
        all.statuses,
        n("io_errors"),
        n("timeouts"),
    );
    for class in ["high", "normal"] {
        let (loaded, idle) = (&report[class], &report["unloaded"][class]);
        let _ = writeln!(
            out,
            "  {class} priority: {} of {} answered 200, p50 {}, p99 {} (unloaded p99 {})",
            loaded["ok"],
            loaded["offered"],
            us(&loaded["p50_us"]),
            us(&loaded["p99_us"]),
            us(&idle["p99_us"]),
        );
    }
    if let Some(Err(e)) = run.validation {
        let _ = writeln!(out, "  validation FAILED: {e}");
    }
    if let Some(e) = &m.first_error {
        let _ = writeln!(out, "  first error: {e}");
    }
    (out, failed)
}

/// A latency for the text report: µs below 10 ms, then ms.
fn fmt_us(us: u32) -> String {
    if us >= 10_000 {
        format!("{:.1} ms", us as f64 / 1000.0)
    } else {
        format!("{us} µs")
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::stats::Stats;

    fn sample(group: u64, own: u64, machine: (u64, u64)) -> CpuSample {
        CpuSample {
            groups: vec![Some(group)],
            own: Some(own),
            machine: Some(machine),
        }
    }

    fn run_report(argv: &[&str], stats: Stats) -> (String, bool) {
        let args = Args::try_parse_from([&["load", "--url", "http://127.0.0.1:1"], argv].concat())
            .unwrap();
        let request = crate::request::build(&args).unwrap();
        let measured = Measured {
            stats,
            before: sample(100, 10, (50, 1000)),
            after: sample(300, 20, (550, 2000)),
            window: 2.0,
        };
        let validation = Ok(());
        report(
            &args,
            &Run {
                request: &request,
                measured: &measured,
                validation: Some(&validation),
                pid_groups: &[vec!["7".into()]],
                ticks: 100.0,
            },
        )
    }

    #[test]
    fn the_json_report_has_the_fields_the_scripts_read() {
        let stats = Stats {
            latencies_us: vec![300, 100, 200, 400],
            response_bytes: 4000,
            ..Stats::default()
        };
        let (text, failed) = run_report(&["--workload", "w1", "--json", "--label", "w1 a"], stats);
        assert!(!failed);
        let r: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(r["label"], "w1 a");
        assert_eq!(r["workload"], "w1");
        assert_eq!(
            (r["requests"].as_u64(), r["rps"].as_f64()),
            (Some(4), Some(2.0))
        );
        assert_eq!(
            (r["p50_us"].as_u64(), r["max_us"].as_u64()),
            (Some(200), Some(400))
        );
        assert_eq!(r["response_bytes_per_req"], 1000);
        assert_eq!(r["validation"], "ok");
        // 200 ticks of 10 ms over 4 requests, in 2 s.
        assert_eq!(r["cpu"][0]["cpu_us_per_req"], 500_000.0);
        assert_eq!(r["cpu"][0]["cpu_cores"], 1.0);
        assert_eq!(r["client_cpu_cores"], 0.05);
        assert_eq!(r["machine_busy"], 0.5);
        assert_eq!(r["errors"], 0);
    }

    #[test]
    fn the_text_report_gives_the_summary_line_and_fails_on_errors() {
        let mut stats = Stats {
            latencies_us: vec![20_000],
            ..Stats::default()
        };
        stats.statuses.insert(503, 1);
        stats.note(|| "status 503: busy".into());
        let (text, failed) = run_report(&[], stats);
        assert!(failed);
        assert!(
            text.starts_with(
                "http://127.0.0.1:1 (4 connections, 2.0 s): 1 requests, 0.5 req/s, p50 20.0 ms,"
            ),
            "{text}"
        );
        assert!(text.contains("errors 1\n  validation: ok\n"), "{text}");
        assert!(text.contains("  first error: status 503: busy\n"), "{text}");
        assert!(
            run_report(&[], Stats::default()).1,
            "no request is a failure"
        );
    }

    #[test]
    fn the_open_loop_report_counts_every_arrival_and_each_class_apart() {
        use crate::open_loop::{Class, Tally};
        let args = Args::try_parse_from([
            "load",
            "--url",
            "http://127.0.0.1:1",
            "--rate",
            "10",
            "--json",
        ])
        .unwrap();
        let mut normal = Class {
            not_sent: 2,
            ok_us: vec![1000, 3000],
            refused_us: vec![100, 200, 300],
            refused_without_retry_after: 1,
            io_errors: 1,
            ..Class::default()
        };
        normal.statuses.insert(504, 1);
        let high = Class {
            ok_us: vec![2000],
            timeouts: 1,
            ..Class::default()
        };
        let unloaded = Tally {
            high: Class {
                ok_us: vec![500, 700],
                ..Class::default()
            },
            ..Tally::default()
        };
        let measured = open_loop::Measured {
            unloaded,
            warmup: Tally::default(),
            measured: Tally { normal, high },
            before: sample(100, 10, (50, 1000)),
            after: sample(300, 20, (550, 2000)),
            window: 2.0,
            first_error: None,
            first_refusal: None,
            rss: open_loop::Rss {
                before_open: vec![Some(1000)],
                open: vec![Some(1040)],
                end: vec![Some(1100)],
            },
        };
        let (text, failed) = open_loop(
            &args,
            &OpenRun {
                measured: &measured,
                validation: None,
                pid_groups: &[vec!["7".into()]],
                ticks: 100.0,
            },
        );
        assert!(!failed);
        let r: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            (r["offered"].as_u64(), r["sent"].as_u64()),
            (Some(11), Some(9))
        );
        // 40 KiB grown over the command line's 4 connections.
        assert_eq!(r["rss_per_connection_bytes"][0].as_f64(), Some(10240.0));
        assert_eq!(
            (r["ok"].as_u64(), r["goodput_rps"].as_f64()),
            (Some(3), Some(1.5))
        );
        assert_eq!(
            (r["p50_us"].as_u64(), r["p99_us"].as_u64()),
            (Some(2000), Some(3000))
        );
        assert_eq!(
            (r["refused"].as_u64(), r["refused_p99_us"].as_u64()),
            (Some(3), Some(300))
        );
        // A 504, an I/O error, a timeout and a 503 without Retry-After.
        assert_eq!(r["lost"], 4);
        assert_eq!(
            (r["high"]["ok"].as_u64(), r["high"]["timeouts"].as_u64()),
            (Some(1), Some(1))
        );
        assert_eq!(r["unloaded"]["high"]["p99_us"], 700);
        assert_eq!(r["cpu"][0]["cpu_cores"], 1.0);
    }
}
