//! Latency summaries, ZooKeeper's server-side counters (`mntr`) and the service's CPU time.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// The p-th percentile (0–100) of `samples` in microseconds, by nearest rank.
pub fn percentile(samples: &mut [Duration], p: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    samples.sort_unstable();
    let rank = ((p / 100.0) * samples.len() as f64).ceil() as usize;
    samples[rank.clamp(1, samples.len()) - 1].as_secs_f64() * 1e6
}

/// Write and read requests the server has counted so far.
#[derive(Clone, Copy, Debug, Default)]
pub struct ServerCounts {
    pub writes: f64,
    pub reads: f64,
}

/// Reads `mntr` from the first host of a connection string; zeros if it does not answer.
pub fn server_counts(connect: &str) -> ServerCounts {
    let host = connect
        .split(',')
        .next()
        .unwrap_or_default()
        .split('/')
        .next()
        .unwrap_or_default();
    let Ok(mut stream) = TcpStream::connect(host) else {
        return ServerCounts::default();
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = stream.write_all(b"mntr");
    let mut text = String::new();
    let _ = stream.read_to_string(&mut text);
    let value = |key: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(key)?.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    ServerCounts {
        writes: value("zk_cnt_updatelatency"),
        reads: value("zk_cnt_readlatency"),
    }
}

/// The CPU time (user and system) the process `pid` has used so far, from `/proc`; `None`
/// without a pid or where `/proc` cannot tell.
pub fn process_cpu(pid: Option<u32>) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid?)).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from its end.
    let fields: Vec<&str> = stat
        .get(stat.rfind(')')? + 1..)?
        .split_whitespace()
        .collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (per_second > 0).then(|| Duration::from_secs_f64(ticks as f64 / per_second as f64))
}

/// The service's CPU time per operation between two readings, as a note ("" when unknown).
pub fn cpu_note(before: Option<Duration>, after: Option<Duration>, ops: usize) -> String {
    match (before, after) {
        (Some(before), Some(after)) if ops > 0 => format!(
            "service CPU {:.0} µs per op",
            after.saturating_sub(before).as_secs_f64() * 1e6 / ops as f64
        ),
        _ => String::new(),
    }
}

/// A row's note with another part after it, when there is one.
pub fn joined(note: &str, more: &str) -> String {
    if more.is_empty() {
        note.to_owned()
    } else {
        format!("{note}; {more}")
    }
}

/// Counts per operation between two readings.
pub fn per_op(before: ServerCounts, after: ServerCounts, ops: usize) -> (f64, f64) {
    let ops = ops.max(1) as f64;
    (
        (after.writes - before.writes) / ops,
        (after.reads - before.reads) / ops,
    )
}

/// Jain's fairness index of per-client counts: 1.0 when every client got the same share.
pub fn jain(counts: &[usize]) -> f64 {
    let sum: f64 = counts.iter().map(|&c| c as f64).sum();
    let squares: f64 = counts.iter().map(|&c| (c as f64).powi(2)).sum();
    if squares == 0.0 {
        return 1.0;
    }
    sum * sum / (counts.len() as f64 * squares)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_fairness() {
        let mut samples: Vec<Duration> = (1..=100).map(Duration::from_micros).collect();
        assert_eq!(percentile(&mut samples, 50.0), 50.0);
        assert_eq!(percentile(&mut samples, 99.0), 99.0);
        assert!((jain(&[5, 5, 5]) - 1.0).abs() < 1e-9);
        assert!(jain(&[10, 0]) < 0.6);
    }

    #[test]
    fn this_process_has_used_some_cpu() {
        let used = process_cpu(Some(std::process::id())).expect("/proc/self/stat reads");
        let spin = std::time::Instant::now();
        while spin.elapsed() < Duration::from_millis(50) {}
        let later = process_cpu(Some(std::process::id())).unwrap();
        assert!(later > used, "50 ms of spinning shows as CPU time");
        assert_eq!(process_cpu(None), None);
        assert!(cpu_note(Some(used), Some(later), 10).starts_with("service CPU "));
        assert_eq!(cpu_note(None, Some(later), 10), "");
    }
}
