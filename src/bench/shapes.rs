//! What ZooKeeper pays for a lock cycle's writes by their shape, without the service: C
//! clients each writing their own node through the same client crate, as create+delete
//! pairs (the floor's shape), as two `multi`s of a record write each (lockwarden's shape,
//! `store::zk::ops`), and as the same writes through the store's coalescer
//! (`store::zk::batch`, 4 in flight), which lets waiting writes share a `multi`. With
//! `--zk-pid`, each row also gives ZooKeeper's CPU time per pair.

use std::sync::Arc;
use std::time::{Duration, Instant};

use zookeeper_client as zk;

use super::scenarios::Bench;
use super::stats::{per_op, process_cpu, server_counts};
use super::Row;
use crate::store::zk::access::ZkAccess;
use crate::store::zk::batch::Coalescer;
use crate::store::zk::ops::Ops;

/// Record writes in flight before the coalescer shares `multi`s: the service's default.
const IN_FLIGHT: usize = 4;

#[derive(Clone, Copy)]
enum Shape {
    CreateDelete,
    RecordWrites,
    Shared,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Shape::CreateDelete => "zk shapes: create + delete (the floor)",
            Shape::RecordWrites => "zk shapes: two record-write multis, alone",
            Shape::Shared => "zk shapes: two record-write multis, shared when 4 wait",
        }
    }
}

impl Bench {
    /// One row per shape, each run for `window` with `clients` in flight.
    pub async fn shapes(&self, clients: usize, window: Duration) -> Result<Vec<Row>, String> {
        let dir = format!("/{}-shapes", self.run);
        let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        match self.zk.create(&dir, b"", &options).await {
            Ok(_) | Err(zk::Error::NodeExists) => {}
            Err(e) => return Err(e.to_string()),
        }
        let metrics = crate::metrics::Metrics::new();
        let connected = |client: &zk::Client| client.state() == zk::SessionState::SyncConnected;
        let coalescer = Arc::new(Coalescer::new(
            IN_FLIGHT,
            Arc::new(connected),
            ZkAccess::open(),
            metrics.zookeeper(),
        ));
        let shapes = [Shape::CreateDelete, Shape::RecordWrites, Shape::Shared];
        for shape in shapes {
            let warm = super::warm_up(window);
            self.run_shape(shape, &dir, clients, warm, &coalescer)
                .await?;
        }
        let mut rows = Vec::new();
        for shape in shapes {
            let before = (server_counts(&self.args.zk), process_cpu(self.args.zk_pid));
            let pairs = self
                .run_shape(shape, &dir, clients, window, &coalescer)
                .await?;
            let after = (server_counts(&self.args.zk), process_cpu(self.args.zk_pid));
            let (writes, reads) = per_op(before.0, after.0, pairs);
            let note = match (before.1, after.1) {
                (Some(b), Some(a)) if pairs > 0 => format!(
                    "ZooKeeper CPU {:.0} µs per pair",
                    a.saturating_sub(b).as_secs_f64() * 1e6 / pairs as f64
                ),
                _ => String::new(),
            };
            rows.push(Row {
                scenario: shape.name().into(),
                clients,
                operations: pairs,
                per_second: pairs as f64 / window.as_secs_f64(),
                zk_writes_per_op: writes,
                zk_reads_per_op: reads,
                p50_us: f64::NAN,
                p99_us: f64::NAN,
                note,
            });
        }
        Ok(rows)
    }

    /// Runs `clients` loops of one shape for `window`; returns the pairs they completed.
    async fn run_shape(
        &self,
        shape: Shape,
        dir: &str,
        clients: usize,
        window: Duration,
        coalescer: &Arc<Coalescer>,
    ) -> Result<usize, String> {
        let end = Instant::now() + window;
        let tasks: Vec<_> = (0..clients)
            .map(|c| {
                let (zk, coalescer) = (self.zk.clone(), coalescer.clone());
                let path = format!("{dir}/c{c}");
                tokio::spawn(async move {
                    let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
                    let record = vec![b'x'; 400];
                    let failed = |e: &dyn std::fmt::Display| format!("{path}: {e}");
                    if !matches!(shape, Shape::CreateDelete) {
                        zk.create(&path, &record, &options)
                            .await
                            .map_err(|e| failed(&e))?;
                    }
                    let mut version = 0;
                    let mut pairs = 0usize;
                    while Instant::now() < end {
                        match shape {
                            Shape::CreateDelete => {
                                zk.create(&path, &record, &options)
                                    .await
                                    .map_err(|e| failed(&e))?;
                                zk.delete(&path, None).await.map_err(|e| failed(&e))?;
                            }
                            Shape::RecordWrites | Shape::Shared => {
                                for _ in 0..2 {
                                    let mut ops = Ops::default();
                                    ops.set_record(path.clone(), record.clone(), version);
                                    let answer = match shape {
                                        Shape::Shared => coalescer
                                            .commit(&zk, ops)
                                            .await
                                            .map_err(|e| failed(&e))?
                                            .ok_or_else(|| failed(&"not sent: disconnected"))?,
                                        _ => {
                                            let mut writer = zk.new_multi_writer();
                                            ops.stage(&mut writer, zk::Acls::anyone_all())
                                                .map_err(|e| failed(&e))?;
                                            writer.commit().await
                                        }
                                    };
                                    answer.map_err(|e| failed(&e))?;
                                    version += 2;
                                }
                            }
                        }
                        pairs += 1;
                    }
                    if !matches!(shape, Shape::CreateDelete) {
                        zk.delete(&path, None).await.map_err(|e| failed(&e))?;
                    }
                    Ok::<usize, String>(pairs)
                })
            })
            .collect();
        let mut total = 0;
        for task in tasks {
            total += task.await.map_err(|e| e.to_string())??;
        }
        Ok(total)
    }
}
