//! The report: one JSON object (`--json`, what scripts/bench and
//! scripts/bench-hop read) or a few lines of text, from what the load
//! measured and the CPU samples around its window.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::cli::Args;
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
    let (ticks, window) = (run.ticks, *window);
    let mut lat = stats.latencies_us.clone();
    lat.sort_unstable();
    let ok = lat.len() as u64;
    let errors = stats.errors();
    let rps = ok as f64 / window;
    let per_req = |d: Option<u64>| -> Option<f64> {
        let d = d? as f64 / ticks * 1e6;
        (ok > 0).then(|| d / ok as f64)
    };
    let delta = |a: Option<u64>, b: Option<u64>| b?.checked_sub(a?);
    let cpu: Vec<Value> = run
        .pid_groups
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
    let client_cpu = per_req(own);
    let machine_busy = match (before.machine, after.machine) {
        (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => Some((b1 - b0) as f64 / (t1 - t0) as f64),
        _ => None,
    };
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
            "client_cpu_cores": own.map(|d| d as f64 / ticks / window),
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
    use crate::cpu::CpuSample;
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
}
