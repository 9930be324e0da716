//! The raw ZooKeeper floor (create+delete through the same client crate as the service),
//! sequential and with many in flight, and the uncontended lock cycle measured against it.

use std::time::{Duration, Instant};

use zookeeper_client as zk;

use super::curator::Curator;
use super::scenarios::Bench;
use super::stats::{cpu_note, per_op, percentile, process_cpu, server_counts};
use super::Row;

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

    pub async fn floor_parallel(&self, clients: usize, window: Duration) -> Result<Row, String> {
        let dir = format!("/{}-floor", self.run);
        let end = Instant::now() + window;
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
            per_second: total as f64 / window.as_secs_f64(),
            zk_writes_per_op: w,
            zk_reads_per_op: r,
            p50_us: f64::NAN,
            p99_us: f64::NAN,
            note: String::new(),
        })
    }

    /// The uncontended cycle, measured in `rounds` rounds of alternating batches with the
    /// raw floor and (when given) Curator, so that all of them see the same moments of a noisy
    /// machine. Each batch round-robin starts with a different one of them.
    pub async fn uncontended(
        &self,
        mut curator: Option<&mut Curator>,
    ) -> Result<Uncontended, String> {
        const BATCH: usize = 50;
        let rounds = self.args.rounds.max(1);
        let wanted = self.args.cycles.div_ceil(rounds).max(1);
        let mut client = self.client("u", "bench", None).await?;
        let path = self.floor_path("paired").await?;
        for _ in 0..self.args.warmup {
            client.cycle().await?;
            self.floor_cycle(&path).await?;
        }
        if let Some(curator) = curator.as_deref_mut() {
            let seconds = (self.args.seconds / 5.0).clamp(0.1, 2.0);
            curator.warmup(self.args.warmup, seconds).await?;
        }
        let (mut cycles, mut floors, mut curators) = (Vec::new(), Vec::new(), Vec::new());
        // Each round's samples: lockwarden's, the floor's and Curator's.
        type Samples = (Vec<Duration>, Vec<Duration>, Vec<Duration>);
        let mut per_round: Vec<Samples> = (0..rounds).map(|_| Samples::default()).collect();
        let (mut writes, mut reads) = (0.0, 0.0);
        let (mut curator_writes, mut curator_reads) = (0.0, 0.0);
        // The service's CPU time over lockwarden's batches, when its pid is known.
        let mut service_cpu = Some(Duration::ZERO);
        let mut batches = 0usize;
        for (lw, floor, cur) in per_round.iter_mut() {
            while lw.len() < wanted {
                let batch = BATCH.min(wanted - lw.len());
                for turn in 0..3 {
                    match (batches + turn) % 3 {
                        0 => {
                            let before = server_counts(&self.args.zk);
                            let cpu_before = process_cpu(self.args.service_pid);
                            for _ in 0..batch {
                                let t = Instant::now();
                                client.cycle().await?;
                                lw.push(t.elapsed());
                            }
                            let cpu_after = process_cpu(self.args.service_pid);
                            let after = server_counts(&self.args.zk);
                            service_cpu = match (service_cpu, cpu_before, cpu_after) {
                                (Some(sum), Some(b), Some(a)) => Some(sum + a.saturating_sub(b)),
                                _ => None,
                            };
                            writes += after.writes - before.writes;
                            reads += after.reads - before.reads;
                        }
                        1 => {
                            for _ in 0..batch {
                                floor.push(self.floor_cycle(&path).await?);
                            }
                        }
                        _ => {
                            if let Some(curator) = curator.as_deref_mut() {
                                let before = server_counts(&self.args.zk);
                                cur.extend(curator.uncontended(batch).await?);
                                let after = server_counts(&self.args.zk);
                                curator_writes += after.writes - before.writes;
                                curator_reads += after.reads - before.reads;
                            }
                        }
                    }
                }
                batches += 1;
            }
            cycles.extend_from_slice(lw);
            floors.extend_from_slice(floor);
            curators.extend_from_slice(cur);
        }
        let rounds: Vec<Round> = per_round
            .into_iter()
            .map(|(mut lw, mut floor, mut cur)| Round {
                lockwarden: (percentile(&mut lw, 50.0), percentile(&mut lw, 99.0)),
                floor: (percentile(&mut floor, 50.0), percentile(&mut floor, 99.0)),
                curator: (!cur.is_empty())
                    .then(|| (percentile(&mut cur, 50.0), percentile(&mut cur, 99.0))),
            })
            .collect();
        let n = cycles.len();
        let rate = |samples: &[Duration]| {
            samples.len() as f64 / samples.iter().sum::<Duration>().as_secs_f64()
        };
        let interleaved = format!(
            "{} rounds, batches of {BATCH}, alternating {}",
            rounds.len(),
            if curator.is_some() {
                "floor, lockwarden and Curator"
            } else {
                "floor and lockwarden"
            }
        );
        let floor = Row {
            per_second: rate(&floors),
            zk_writes_per_op: 2.0,
            zk_reads_per_op: 0.0,
            note: interleaved.clone(),
            ..Row::of_samples(
                "floor: ZK create+delete, interleaved with uncontended",
                1,
                &mut floors,
            )
        };
        let curator = (!curators.is_empty()).then(|| Row {
            per_second: rate(&curators),
            // Counted around Curator's batches only.
            zk_writes_per_op: curator_writes / curators.len() as f64,
            zk_reads_per_op: curator_reads / curators.len() as f64,
            note: interleaved,
            ..Row::of_samples("curator: uncontended acquire+release", 1, &mut curators)
        });
        let cycle = Row {
            per_second: rate(&cycles),
            // Counted around lockwarden's batches only.
            zk_writes_per_op: writes / n.max(1) as f64,
            zk_reads_per_op: reads / n.max(1) as f64,
            note: cpu_note(Some(Duration::ZERO), service_cpu, n),
            ..Row::of_samples("uncontended: acquire+release", 1, &mut cycles)
        };
        Ok(Uncontended {
            cycle,
            floor,
            curator,
            rounds,
        })
    }
}

/// One round's p50 and p99 (µs) of each side.
#[derive(Clone, Debug)]
pub struct Round {
    pub lockwarden: (f64, f64),
    pub floor: (f64, f64),
    pub curator: Option<(f64, f64)>,
}

/// The uncontended cycle, the floor and Curator measured with it, and the rounds.
pub struct Uncontended {
    pub cycle: Row,
    pub floor: Row,
    pub curator: Option<Row>,
    pub rounds: Vec<Round>,
}
