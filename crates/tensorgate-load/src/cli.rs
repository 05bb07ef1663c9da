//! The command line: the flags, their defaults, and the checks on their
//! values made before any connection is opened.

use std::path::PathBuf;

use clap::Parser;

use crate::workload::Workload;

/// Closed-loop HTTP/1.1 (or gRPC) load generator (keep-alive connections);
/// open loop with `--rate`.
#[derive(Parser, Debug)]
#[command(name = "load", about)]
pub(crate) struct Args {
    /// Target, `http://IP:PORT/path`. With a built-in workload and no path,
    /// the path is `/v2/models/add_sub/infer`. `grpc://IP:PORT`: gRPC
    /// `ModelInfer` calls (binary workloads only).
    #[arg(long)]
    pub(crate) url: String,
    /// Built-in request body (w1..w5; see the crate documentation).
    #[arg(long, value_enum)]
    pub(crate) workload: Option<Workload>,
    /// Elements per input tensor, overriding the workload's default.
    #[arg(long)]
    pub(crate) elements: Option<usize>,
    /// POST this file as the request body (instead of a workload).
    #[arg(long, conflicts_with = "workload")]
    pub(crate) body_file: Option<PathBuf>,
    /// Where workload w6 creates its shared-memory object (the gateway's
    /// `shared_memory.dir`).
    #[arg(long, default_value = "/dev/shm")]
    pub(crate) shm_dir: PathBuf,
    /// Extra request header, `Name: value` (repeatable).
    #[arg(long = "header")]
    pub(crate) headers: Vec<String>,
    /// Concurrent keep-alive connections, each with one request in flight
    /// (with `--rate`, the pool the arrivals go out on).
    #[arg(long, default_value_t = 4)]
    pub(crate) connections: usize,
    /// Measured window, seconds.
    #[arg(long, default_value_t = 10.0)]
    pub(crate) duration: f64,
    /// Load before the measured window (not counted), seconds.
    #[arg(long, default_value_t = 1.0)]
    pub(crate) warmup: f64,
    /// Per-request timeout, seconds (a timeout counts as an error).
    #[arg(long, default_value_t = 60.0)]
    pub(crate) timeout: f64,
    /// Report the CPU time of this process (or of a comma-separated group of
    /// processes, summed) per request. Repeatable.
    #[arg(long = "pid")]
    pub(crate) pids: Vec<String>,
    /// Hold each HTTP connection to this many MB (10^6 bytes) a second in
    /// each direction, as a link slower than loopback would (unpaced if
    /// absent). HTTP only.
    #[arg(long)]
    pub(crate) rate_mb_s: Option<f64>,
    /// Client runtime worker threads (1: current-thread runtime).
    #[arg(long, default_value_t = 1)]
    pub(crate) threads: usize,
    /// Skip the single checked request sent before the load.
    #[arg(long)]
    pub(crate) no_validate: bool,
    /// Write the request body to this file and exit.
    #[arg(long)]
    pub(crate) dump_body: Option<PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub(crate) json: bool,
    /// Free-form label copied into the report.
    #[arg(long)]
    pub(crate) label: Option<String>,
    /// Open loop: this many requests a second in all, Poisson arrivals,
    /// each sent on an idle connection or counted as not sent (the client
    /// saturated); HTTP only (module `open_loop`).
    #[arg(long)]
    pub(crate) rate: Option<f64>,
    /// The open loop's seed: the same seed, the same schedule.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Share (0 to 1) of the open loop's requests that carry the priority
    /// header; each class is reported apart.
    #[arg(long, default_value_t = 0.0)]
    pub(crate) priority_share: f64,
    /// The priority header's name (e.g. `x-priority`).
    #[arg(long)]
    pub(crate) priority_header: Option<String>,
    /// The priority header's value (a Triton priority level: 1 the highest).
    #[arg(long, default_value = "1")]
    pub(crate) priority_value: String,
    /// The open loop's unloaded pre-run, before the warmup: requests a second.
    #[arg(long, default_value_t = 20.0)]
    pub(crate) unloaded_rate: f64,
    /// The unloaded pre-run's seconds (0: none).
    #[arg(long, default_value_t = 2.0)]
    pub(crate) unloaded_duration: f64,
    /// The open loop sends each arrival on an idle connection picked at
    /// random, so every connection sends now and then (10,000 connections
    /// at 1,000 req/s: each every ~10 s); without it, on the one idle last.
    #[arg(long)]
    pub(crate) spread: bool,
}

impl Args {
    /// The numbers that must be positive are, `--warmup` is not negative.
    pub(crate) fn check(&self) -> Result<(), String> {
        let seconds = |x: f64, zero_ok: bool| x.is_finite() && (x > 0.0 || (zero_ok && x == 0.0));
        if self.connections == 0
            || self.rate_mb_s.is_some_and(|r| !seconds(r, false))
            || !seconds(self.duration, false)
            || !seconds(self.warmup, true)
            || !seconds(self.timeout, false)
        {
            return Err("--connections, --duration, --timeout and --rate-mb-s must be positive, --warmup not negative".into());
        }
        if self.rate.is_some_and(|r| !seconds(r, false))
            || !seconds(self.unloaded_rate, false)
            || !seconds(self.unloaded_duration, true)
            || !(0.0..=1.0).contains(&self.priority_share)
        {
            return Err("--rate and --unloaded-rate must be positive, --unloaded-duration not negative, --priority-share from 0 to 1".into());
        }
        if self.priority_share > 0.0 && self.priority_header.is_none() {
            return Err("--priority-share needs --priority-header".into());
        }
        Ok(())
    }

    /// The `--pid` groups, each a list of PIDs.
    pub(crate) fn pid_groups(&self) -> Vec<Vec<String>> {
        self.pids
            .iter()
            .map(|g| {
                g.split(',')
                    .map(|p| p.trim().to_string())
                    .filter(|p| !p.is_empty())
                    .collect()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> Args {
        let mut argv = vec!["load", "--url", "http://127.0.0.1:1"];
        argv.extend_from_slice(extra);
        Args::try_parse_from(argv).unwrap()
    }

    #[test]
    fn the_flags_keep_their_names_and_defaults() {
        let a = args(&["--workload", "small-binary", "--pid", "1, 2", "--pid", "3"]);
        assert_eq!(a.workload, Some(Workload::SmallBinary));
        assert_eq!(
            (a.connections, a.duration, a.warmup, a.timeout),
            (4, 10.0, 1.0, 60.0)
        );
        assert_eq!(a.pid_groups(), [vec!["1", "2"], vec!["3"]]);
        assert!(a.check().is_ok());
        assert!(args(&["--warmup", "0"]).check().is_ok());
        assert!(Args::try_parse_from([
            "load",
            "--url",
            "x",
            "--workload",
            "w1",
            "--body-file",
            "f"
        ])
        .is_err());
    }

    #[test]
    fn non_positive_numbers_are_refused() {
        for bad in [
            &["--connections", "0"][..],
            &["--duration", "0"],
            &["--warmup=-1"],
            &["--timeout", "NaN"],
            &["--rate-mb-s", "0"],
            &["--rate", "0"],
            &["--unloaded-duration=-1"],
            &["--priority-share", "1.5"],
            &["--priority-share", "0.1"],
        ] {
            assert!(args(bad).check().is_err(), "{bad:?}");
        }
    }
}
