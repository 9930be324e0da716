//! The refusal scenario: a try-lock (no `waiting_ms`) on a lock another caller holds, which
//! the service answers `409 lock_held`. A refusal is decided on the latest copy (a read
//! after a `sync`: `service::reading`), so its floor is that read made by the bench's own
//! ZooKeeper client: a `sync` and a `getData` of one znode, sent together. The two sides
//! alternate in batches of 50 within each of `--rounds` rounds, as the uncontended cycle
//! does, and ZooKeeper's counters are read around the service's batches only. The lock has
//! been held for `HELD_FOR` when they begin.

use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::json;
use zookeeper_client as zk;

use super::client::Connection;
use super::scenarios::Bench;
use super::stats::{per_op, percentile, server_counts, ServerCounts};
use super::Row;

const BATCH: usize = 50;

/// How long the lock has been held when the try-locks begin.
const HELD_FOR: Duration = Duration::from_millis(2500);

impl Bench {
    /// The refusal row and its interleaved floor's.
    pub async fn refusal(&self) -> Result<Vec<Row>, String> {
        let held = json!({"owner": "holder", "lease_ms": 600_000}).to_string();
        let (status, holder) = self
            .post(&self.lock_url("refused", "acquire"), &held)
            .await?;
        if status != 200 {
            return Err(format!("the holder's acquire answered {status}: {holder}"));
        }
        // A lock held for a while, as most are when a try-lock meets them: the instance's
        // memory of the grant is older than its store timeout (2 s by default), after which
        // it no longer writes on it.
        tokio::time::sleep(HELD_FOR).await;
        let mut connection = Connection::open(&self.args.url, self.args.token.as_deref()).await?;
        let path = format!("/v1/locks/{}-refused/acquire", self.run);
        let body = Bytes::from(json!({"owner": "prober", "lease_ms": 1000}).to_string());
        let znode = format!("/{}-refusal-floor", self.run);
        let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        match self.zk.create(&znode, &[b'x'; 400], &options).await {
            Ok(_) | Err(zk::Error::NodeExists) => {}
            Err(e) => return Err(e.to_string()),
        }
        for _ in 0..self.args.warmup.min(200) {
            self.try_lock(&mut connection, &path, &body).await?;
            self.latest_read(&znode).await?;
        }
        let rounds = self.args.rounds.max(1);
        let per_round = (self.args.cycles / rounds).max(BATCH);
        let (mut service, mut floor) = (Vec::new(), Vec::new());
        let mut ratios = Vec::new();
        let mut counted = (ServerCounts::default(), 0);
        for round in 0..rounds {
            let (mut ours, mut theirs) = (Vec::new(), Vec::new());
            while ours.len() < per_round {
                // Each round starts with the other side.
                for side in [round % 2, 1 - round % 2] {
                    if side == 0 {
                        let before = server_counts(&self.args.zk);
                        for _ in 0..BATCH {
                            ours.push(self.try_lock(&mut connection, &path, &body).await?);
                        }
                        let after = server_counts(&self.args.zk);
                        counted.0.writes += after.writes - before.writes;
                        counted.0.reads += after.reads - before.reads;
                        counted.1 += BATCH;
                    } else {
                        for _ in 0..BATCH {
                            theirs.push(self.latest_read(&znode).await?);
                        }
                    }
                }
            }
            ratios.push(percentile(&mut ours, 50.0) / percentile(&mut theirs, 50.0));
            service.append(&mut ours);
            floor.append(&mut theirs);
        }
        let release = json!({"lease_id": holder["lease_id"]}).to_string();
        self.post(&self.lock_url("refused", "release"), &release)
            .await?;
        let (writes, reads) = per_op(ServerCounts::default(), counted.0, counted.1);
        ratios.sort_by(f64::total_cmp);
        let ratio = format!(
            "p50 {:.2}× the interleaved floor's (median of {rounds} rounds; {:.2}–{:.2}); \
             answered on the latest copy",
            ratios[ratios.len() / 2],
            ratios[0],
            ratios[ratios.len() - 1],
        );
        Ok(vec![
            Row {
                zk_writes_per_op: 0.0,
                zk_reads_per_op: 0.0,
                note: format!("{rounds} rounds, batches of {BATCH}, alternating with the refusal"),
                ..Row::of_samples(
                    "floor: ZK sync+getData sent together, interleaved with refusal",
                    1,
                    &mut floor,
                )
            },
            Row {
                zk_writes_per_op: writes,
                zk_reads_per_op: reads,
                note: ratio,
                ..Row::of_samples("refusal: a try-lock on a held lock → 409", 1, &mut service)
            },
        ])
    }

    /// One try-lock, which must be refused.
    async fn try_lock(
        &self,
        connection: &mut Connection,
        path: &str,
        body: &Bytes,
    ) -> Result<Duration, String> {
        let started = Instant::now();
        let answer = connection.post(path, body.clone()).await?;
        let took = started.elapsed();
        if answer.status != 409 {
            return Err(format!(
                "a try-lock on a held lock answered {}: {}",
                answer.status,
                answer.text()
            ));
        }
        Ok(took)
    }

    /// The floor: a `sync` and a `getData` sent together (the read is answered after the
    /// sync: a session's requests are processed in order).
    async fn latest_read(&self, znode: &str) -> Result<Duration, String> {
        let started = Instant::now();
        let synced = self.zk.sync("/");
        let read = self.zk.get_data(znode);
        let (synced, read) = tokio::join!(synced, read);
        synced.map_err(|e| e.to_string())?;
        read.map_err(|e| e.to_string())?;
        Ok(started.elapsed())
    }
}
