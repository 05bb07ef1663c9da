//! CPU accounting from `/proc`: the `utime + stime` of the `--pid` groups
//! and of the load tool itself, and the whole machine's busy and total
//! ticks, sampled at the two ends of the measured window; and the groups'
//! resident memory (`VmRSS`), for the cost of open connections.

/// utime + stime of a process, in clock ticks (`"self"` for this one).
pub(crate) fn process_ticks(pid: &str) -> Option<u64> {
    stat_ticks(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// utime + stime from the text of `/proc/PID/stat`.
fn stat_ticks(stat: &str) -> Option<u64> {
    // Fields after the command name, which may contain spaces: field 3 first.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// (busy, total) ticks of the whole machine, from /proc/stat.
fn machine_ticks() -> Option<(u64, u64)> {
    machine_line(std::fs::read_to_string("/proc/stat").ok()?.lines().next()?)
}

/// (busy, total) from `/proc/stat`'s first line.
fn machine_line(line: &str) -> Option<(u64, u64)> {
    let line = line.strip_prefix("cpu ")?;
    let v: Vec<u64> = line
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    // user nice system idle iowait irq softirq steal (guest* are in user).
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// Clock ticks a second (`getconf CLK_TCK`; 100 if that fails).
pub(crate) fn ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// Ticks of every PID group (None if a process is gone), ours, the machine's.
pub(crate) struct CpuSample {
    pub(crate) groups: Vec<Option<u64>>,
    pub(crate) own: Option<u64>,
    pub(crate) machine: Option<(u64, u64)>,
}

pub(crate) fn sample(groups: &[Vec<String>]) -> CpuSample {
    CpuSample {
        groups: groups
            .iter()
            .map(|g| g.iter().map(|p| process_ticks(p)).sum())
            .collect(),
        own: process_ticks("self"),
        machine: machine_ticks(),
    }
}

/// Resident memory of a process, KiB (`VmRSS` of `/proc/PID/status`).
fn rss_kib(pid: &str) -> Option<u64> {
    status_rss(&std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?)
}

/// `VmRSS` (KiB) from the text of `/proc/PID/status`.
fn status_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line["VmRSS:".len()..]
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()
}

/// Resident KiB of every PID group, summed (None if a process is gone).
pub(crate) fn group_rss(groups: &[Vec<String>]) -> Vec<Option<u64>> {
    groups
        .iter()
        .map(|g| g.iter().map(|p| rss_kib(p)).sum())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_name_with_spaces_and_parentheses_is_skipped() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 7 5 0 0 20 0 1 0";
        assert_eq!(stat_ticks(stat), Some(12));
        assert_eq!(stat_ticks("42 (x) S 1"), None);
        assert!(process_ticks("self").is_some());
    }

    #[test]
    fn the_resident_size_is_read_in_kib() {
        assert_eq!(
            status_rss("Name:\tx\nVmRSS:\t   2048 kB\nVmSwap:\t0 kB\n"),
            Some(2048)
        );
        assert_eq!(status_rss("Name:\tx\n"), None);
        assert!(rss_kib("self").is_some_and(|k| k > 0));
    }

    #[test]
    fn idle_and_iowait_are_not_busy() {
        assert_eq!(machine_line("cpu  10 1 4 100 5 1 1 0 7 0"), Some((17, 122)));
        assert_eq!(machine_line("cpu0 1 2 3"), None);
    }
}
