//! Latency summaries and ZooKeeper's server-side counters (`mntr`).

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
}
