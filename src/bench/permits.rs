//! The `semaphore` scenario: a semaphore's permit beside a lock. Its uncontended cycle
//! (acquire + release of one of 8 permits) is measured in batches alternating with a
//! lock's, so both see the same moments of a noisy machine; its throughput is C loops
//! waiting on one semaphore of 8 permits, as `contended` waits on one lock.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::scenarios::{Bench, On};
use super::stats::{per_op, server_counts};
use super::Row;

impl Bench {
    /// `clients` loops waiting on one semaphore of `limit` permits.
    pub async fn semaphore(
        self: &Arc<Self>,
        clients: usize,
        limit: u32,
        window: Duration,
    ) -> Result<Row, String> {
        let scenario = format!("semaphore: {limit} permits, waiting acquire+release");
        self.waiting(clients, On::Semaphore(limit), &scenario, window)
            .await
    }

    /// The uncontended cycle of one permit of `limit`, and a lock's, in alternating
    /// batches of 50 (`--cycles` of each): two rows, the semaphore's noting the ratio of
    /// the p50s.
    pub async fn semaphore_cycle(&self, limit: u32) -> Result<Vec<Row>, String> {
        const BATCH: usize = 50;
        let url = self.args.url.clone();
        let mut lock = self.client_at(&url, "sc-lock", "bench", None, None).await?;
        let mut permit = self
            .client_at(&url, "sc-sem", "bench", None, Some(limit))
            .await?;
        for _ in 0..self.args.warmup {
            lock.cycle().await?;
            permit.cycle().await?;
        }
        let (mut locks, mut permits) = (Vec::new(), Vec::new());
        let (mut lock_counts, mut permit_counts) = ((0.0, 0.0), (0.0, 0.0));
        let mut turn = 0;
        while permits.len() < self.args.cycles.max(1) {
            let batch = BATCH.min(self.args.cycles.max(1) - permits.len());
            for side in [turn % 2, (turn + 1) % 2] {
                let (client, samples, counts) = match side {
                    0 => (&mut lock, &mut locks, &mut lock_counts),
                    _ => (&mut permit, &mut permits, &mut permit_counts),
                };
                let before = server_counts(&self.args.zk);
                for _ in 0..batch {
                    let started = Instant::now();
                    client.cycle().await?;
                    samples.push(started.elapsed());
                }
                let (w, r) = per_op(before, server_counts(&self.args.zk), 1);
                counts.0 += w;
                counts.1 += r;
            }
            turn += 1;
        }
        let row = |name: &str, samples: &mut Vec<Duration>, counts: (f64, f64)| {
            let n = samples.len() as f64;
            Row {
                zk_writes_per_op: counts.0 / n,
                zk_reads_per_op: counts.1 / n,
                ..Row::of_samples(name, 1, samples)
            }
        };
        let lock_row = row(
            "lock: uncontended acquire+release, interleaved with the semaphore's",
            &mut locks,
            lock_counts,
        );
        let mut permit_row = row(
            &format!("semaphore: uncontended acquire+release of 1 of {limit} permits"),
            &mut permits,
            permit_counts,
        );
        permit_row.note = format!(
            "p50 {:.2}× and p99 {:.2}× the lock's, in alternating batches of {BATCH}",
            permit_row.p50_us / lock_row.p50_us,
            permit_row.p99_us / lock_row.p99_us
        );
        Ok(vec![lock_row, permit_row])
    }
}
