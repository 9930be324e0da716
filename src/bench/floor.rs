//! The raw ZooKeeper floor (create+delete through the same client crate as the service),
//! sequential and with many in flight, and the uncontended lock cycle measured against it.

use std::time::{Duration, Instant};

use zookeeper_client as zk;

use super::scenarios::Bench;
use super::stats::{per_op, server_counts};
use super::{window, Row};

impl Bench {
    /// Makes this run's floor directory and returns the path one floor cycle uses.
    async fn floor_path(&self, leaf: &str) -> Result<String, String> {
        let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        let dir = format!("/{}-floor", self.run);
        match self.zk.create(&dir, b"", &options).await {
            Ok(_) | Err(zk::Error::NodeExists) => Ok(format!("{dir}/{leaf}")),
            Err(e) => Err(e.to_string()),
        }
    }

    /// One raw create+delete of a 400-byte znode: the floor of a lock cycle.
    async fn floor_cycle(&self, path: &str) -> Result<Duration, String> {
        let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        let started = Instant::now();
        self.zk
            .create(path, &[b'x'; 400], &options)
            .await
            .map_err(|e| e.to_string())?;
        self.zk
            .delete(path, None)
            .await
            .map_err(|e| e.to_string())?;
        Ok(started.elapsed())
    }

    pub async fn floor_sequential(&self) -> Result<Row, String> {
        let path = self.floor_path("x").await?;
        for _ in 0..self.args.warmup {
            self.floor_cycle(&path).await?;
        }
        let mut samples = Vec::with_capacity(self.args.cycles);
        let before = server_counts(&self.args.zk);
        for _ in 0..self.args.cycles {
            samples.push(self.floor_cycle(&path).await?);
        }
        let after = server_counts(&self.args.zk);
        let n = samples.len();
        let (w, r) = per_op(before, after, n);
        let total: Duration = samples.iter().sum();
        Ok(Row {
            per_second: n as f64 / total.as_secs_f64(),
            zk_writes_per_op: w,
            zk_reads_per_op: r,
            note: "the baseline".into(),
            ..Row::of_samples("floor: ZK create+delete", 1, &mut samples)
        })
    }

    pub async fn floor_parallel(&self, clients: usize) -> Result<Row, String> {
        let dir = format!("/{}-floor", self.run);
        let end = Instant::now() + window(&self.args);
        let before = server_counts(&self.args.zk);
        let tasks: Vec<_> = (0..clients)
            .map(|c| {
                let (zk, path) = (self.zk.clone(), format!("{dir}/p{c}"));
                tokio::spawn(async move {
                    let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
                    let mut done = 0usize;
                    while Instant::now() < end {
                        zk.create(&path, &[b'x'; 400], &options)
                            .await
                            .map_err(|e| e.to_string())?;
                        zk.delete(&path, None).await.map_err(|e| e.to_string())?;
                        done += 1;
                    }
                    Ok::<usize, String>(done)
                })
            })
            .collect();
        let mut total = 0;
        for task in tasks {
            total += task.await.map_err(|e| e.to_string())??;
        }
        let after = server_counts(&self.args.zk);
        let (w, r) = per_op(before, after, total);
        Ok(Row {
            scenario: "floor: ZK create+delete, parallel".into(),
            clients,
            operations: total,
            per_second: total as f64 / window(&self.args).as_secs_f64(),
            zk_writes_per_op: w,
            zk_reads_per_op: r,
            p50_us: f64::NAN,
            p99_us: f64::NAN,
            note: String::new(),
        })
    }

    /// The uncontended cycle, measured in alternating batches with the raw floor, so that
    /// both see the same moments of a noisy machine. Returns the cycle's row and the floor's.
    pub async fn uncontended(&self) -> Result<(Row, Row), String> {
        const BATCH: usize = 50;
        let mut client = self.client("u", "bench", None).await?;
        let path = self.floor_path("paired").await?;
        for _ in 0..self.args.warmup {
            client.cycle().await?;
            self.floor_cycle(&path).await?;
        }
        let mut cycles = Vec::with_capacity(self.args.cycles);
        let mut floors = Vec::with_capacity(self.args.cycles);
        let before = server_counts(&self.args.zk);
        while cycles.len() < self.args.cycles {
            let batch = BATCH.min(self.args.cycles - cycles.len());
            for _ in 0..batch {
                let t = Instant::now();
                client.cycle().await?;
                cycles.push(t.elapsed());
            }
            for _ in 0..batch {
                floors.push(self.floor_cycle(&path).await?);
            }
        }
        let after = server_counts(&self.args.zk);
        // The floor's cycles are 2 writes each, counted by the server too.
        let n = cycles.len();
        let writes = (after.writes - before.writes - 2.0 * floors.len() as f64) / n as f64;
        let reads = (after.reads - before.reads) / n as f64;
        let rate = |samples: &[Duration]| {
            samples.len() as f64 / samples.iter().sum::<Duration>().as_secs_f64()
        };
        let (cycle_rate, floor_rate) = (rate(&cycles), rate(&floors));
        let floor = Row {
            per_second: floor_rate,
            zk_writes_per_op: 2.0,
            zk_reads_per_op: 0.0,
            note: format!("batches of {BATCH}, alternating with the uncontended cycle's"),
            ..Row::of_samples(
                "floor: ZK create+delete, interleaved with uncontended",
                1,
                &mut floors,
            )
        };
        let cycle = Row {
            per_second: cycle_rate,
            zk_writes_per_op: writes,
            zk_reads_per_op: reads,
            ..Row::of_samples("uncontended: acquire+release", 1, &mut cycles)
        };
        Ok((cycle, floor))
    }
}
