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
    /// raw floor and (when given) Curator and the HTTP relay, so that all of them see the
    /// same moments of a noisy machine. Each batch round-robin starts with a different one.
    pub async fn uncontended(
        &self,
        mut curator: Option<&mut Curator>,
    ) -> Result<Uncontended, String> {
        const BATCH: usize = 50;
        const SIDES: usize = 4;
        let rounds = self.args.rounds.max(1);
        let wanted = self.args.cycles.div_ceil(rounds).max(1);
        let mut client = self.client("u", "bench", None).await?;
        let mut relay = match &self.args.relay_url {
            Some(url) => Some(self.client_at(url, "u", "bench", None, None).await?),
            None => None,
        };
        let path = self.floor_path("paired").await?;
        for _ in 0..self.args.warmup {
            client.cycle().await?;
            self.floor_cycle(&path).await?;
            if let Some(relay) = relay.as_mut() {
                relay.cycle().await?;
            }
        }
        if let Some(curator) = curator.as_deref_mut() {
            let seconds = (self.args.seconds / 5.0).clamp(0.1, 2.0);
            curator.warmup(self.args.warmup, seconds).await?;
        }
        let mut all = Sides::default();
        let mut per_round: Vec<Sides> = (0..rounds).map(|_| Sides::default()).collect();
        let (mut writes, mut reads) = (0.0, 0.0);
        let (mut curator_writes, mut curator_reads) = (0.0, 0.0);
        // The service's CPU time over lockwarden's batches, when its pid is known.
        let mut service_cpu = Some(Duration::ZERO);
        let mut batches = 0usize;
        for round in per_round.iter_mut() {
            while round.lockwarden.len() < wanted {
                let batch = BATCH.min(wanted - round.lockwarden.len());
                for turn in 0..SIDES {
                    match (batches + turn) % SIDES {
                        0 => {
                            let before = server_counts(&self.args.zk);
                            let cpu_before = process_cpu(self.args.service_pid);
                            for _ in 0..batch {
                                let t = Instant::now();
                                client.cycle().await?;
                                round.lockwarden.push(t.elapsed());
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
                                round.floor.push(self.floor_cycle(&path).await?);
                            }
                        }
                        2 => {
                            if let Some(curator) = curator.as_deref_mut() {
                                let before = server_counts(&self.args.zk);
                                round.curator.extend(curator.uncontended(batch).await?);
                                let after = server_counts(&self.args.zk);
                                curator_writes += after.writes - before.writes;
                                curator_reads += after.reads - before.reads;
                            }
                        }
                        _ => {
                            if let Some(relay) = relay.as_mut() {
                                for _ in 0..batch {
                                    let t = Instant::now();
                                    relay.cycle().await?;
                                    round.relay.push(t.elapsed());
                                }
                            }
                        }
                    }
                }
                batches += 1;
            }
            all.extend(round);
        }
        let rounds: Vec<Round> = per_round.iter_mut().map(Sides::round).collect();
        let Sides {
            lockwarden: mut cycles,
            floor: mut floors,
            curator: mut curators,
            relay: mut relays,
        } = all;
        let n = cycles.len();
        let rate = |samples: &[Duration]| {
            samples.len() as f64 / samples.iter().sum::<Duration>().as_secs_f64()
        };
        let others = match (curator.is_some(), relay.is_some()) {
            (true, true) => ", Curator and the HTTP relay",
            (true, false) => " and Curator",
            (false, true) => " and the HTTP relay",
            (false, false) => "",
        };
        let interleaved = format!(
            "{} rounds, batches of {BATCH}, alternating the floor, lockwarden{others}",
            rounds.len()
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
            note: interleaved.clone(),
            ..Row::of_samples("curator: uncontended acquire+release", 1, &mut curators)
        });
        let relay = (!relays.is_empty()).then(|| Row {
            per_second: rate(&relays),
            zk_writes_per_op: 2.0,
            zk_reads_per_op: 0.0,
            note: format!("no lock logic: one create, one delete, over HTTP; {interleaved}"),
            ..Row::of_samples("HTTP relay: create+delete over HTTP", 1, &mut relays)
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
            relay,
            rounds,
        })
    }
}

/// Each side's cycle times, of a round or of the whole run.
#[derive(Default)]
struct Sides {
    lockwarden: Vec<Duration>,
    floor: Vec<Duration>,
    curator: Vec<Duration>,
    relay: Vec<Duration>,
}

impl Sides {
    fn extend(&mut self, other: &Sides) {
        self.lockwarden.extend_from_slice(&other.lockwarden);
        self.floor.extend_from_slice(&other.floor);
        self.curator.extend_from_slice(&other.curator);
        self.relay.extend_from_slice(&other.relay);
    }

    /// The round's p50 and p99 of each side (sorting the samples in place).
    fn round(&mut self) -> Round {
        let p50_p99 = |samples: &mut Vec<Duration>| {
            (!samples.is_empty()).then(|| (percentile(samples, 50.0), percentile(samples, 99.0)))
        };
        Round {
            lockwarden: p50_p99(&mut self.lockwarden).unwrap_or((f64::NAN, f64::NAN)),
            floor: p50_p99(&mut self.floor).unwrap_or((f64::NAN, f64::NAN)),
            curator: p50_p99(&mut self.curator),
            relay: p50_p99(&mut self.relay),
        }
    }
}

/// One round's p50 and p99 (µs) of each side.
#[derive(Clone, Debug)]
pub struct Round {
    pub lockwarden: (f64, f64),
    pub floor: (f64, f64),
    pub curator: Option<(f64, f64)>,
    /// The HTTP relay's, when one was measured.
    pub relay: Option<(f64, f64)>,
}

/// The uncontended cycle, the floor, Curator and the relay measured with it, and the rounds.
pub struct Uncontended {
    pub cycle: Row,
    pub floor: Row,
    pub curator: Option<Row>,
    pub relay: Option<Row>,
    pub rounds: Vec<Round>,
}
