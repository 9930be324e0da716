//! The benchmark scenarios. Each client is a task with its own loop on one shared HTTP
//! connection pool; bodies are prepared once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{json, Value};
use zookeeper_client as zk;

use super::client::Connection;

use super::stats::{jain, per_op, percentile, server_counts};
use super::{window, BenchArgs, Row};

/// One measuring loop's client: its own connection, and its requests prepared once.
struct Client {
    connection: Connection,
    acquire_path: String,
    release_path: String,
    acquire: Bytes,
}

impl Client {
    /// One acquire (waiting if the prepared body says so) and one release; returns the
    /// acquire's latency.
    async fn cycle(&mut self) -> Result<Duration, String> {
        let started = Instant::now();
        let granted = self
            .connection
            .post(&self.acquire_path, self.acquire.clone())
            .await?;
        let waited = started.elapsed();
        let lease_id = match granted.lease_id() {
            Some(id) if granted.status == 200 => id,
            _ => {
                return Err(format!(
                    "acquire {} answered {}: {}",
                    self.acquire_path,
                    granted.status,
                    granted.text()
                ))
            }
        };
        let release = Bytes::from(format!(r#"{{"lease_id":"{lease_id}"}}"#));
        let released = self.connection.post(&self.release_path, release).await?;
        if released.status != 200 {
            return Err(format!(
                "release {} answered {}: {}; the acquire had answered {}",
                self.release_path,
                released.status,
                released.text(),
                granted.text()
            ));
        }
        Ok(waited)
    }
}

pub struct Bench {
    pub(super) args: BenchArgs,
    pub(super) http: reqwest::Client,
    zk: zk::Client,
    /// A prefix that keeps this run's locks apart from earlier runs'.
    pub(super) run: String,
}

impl Bench {
    pub async fn new(args: &BenchArgs) -> Result<Bench, String> {
        let http = reqwest::Client::builder()
            .no_proxy()
            .tcp_nodelay(true)
            .pool_max_idle_per_host(256)
            .build()
            .map_err(|e| e.to_string())?;
        let zk = zk::Client::connect(&args.zk)
            .await
            .map_err(|e| format!("connecting to ZooKeeper at {}: {e}", args.zk))?;
        let run = format!("bench-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
        Ok(Bench {
            args: args.clone(),
            http,
            zk,
            run,
        })
    }

    pub(super) fn run(&self) -> &str {
        &self.run
    }

    pub(super) fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// The URL of an action on a lock whose (percent-encoded) name is given in full.
    pub(super) fn raw_url(&self, name: &str, action: &str) -> String {
        format!("{}/v1/locks/{name}/{action}", self.args.url)
    }

    pub(super) fn lock_url(&self, name: &str, action: &str) -> String {
        format!("{}/v1/locks/{}-{name}/{action}", self.args.url, self.run)
    }

    pub(super) async fn post(&self, url: &str, body: &str) -> Result<(u16, Value), String> {
        let mut request = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .body(body.to_owned());
        if let Some(token) = &self.args.token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let bytes = response.bytes().await.map_err(|e| e.to_string())?;
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Ok((status, body))
    }

    /// One client's connection and the path and body of its acquire, prepared once.
    async fn client(
        &self,
        name: &str,
        owner: &str,
        waiting_ms: Option<u64>,
    ) -> Result<Client, String> {
        let connection = Connection::open(&self.args.url, self.args.token.as_deref()).await?;
        let acquire =
            json!({"owner": owner, "lease_ms": 60_000, "waiting_ms": waiting_ms}).to_string();
        Ok(Client {
            connection,
            acquire_path: format!("/v1/locks/{}-{name}/acquire", self.run),
            release_path: format!("/v1/locks/{}-{name}/release", self.run),
            acquire: Bytes::from(acquire),
        })
    }

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
            scenario: "floor: ZK create+delete".into(),
            clients: 1,
            operations: n,
            p50_us: percentile(&mut samples, 50.0),
            p99_us: percentile(&mut samples, 99.0),
            per_second: n as f64 / total.as_secs_f64(),
            zk_writes_per_op: w,
            zk_reads_per_op: r,
            note: "the baseline".into(),
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
            scenario: "floor: ZK create+delete, interleaved with uncontended".into(),
            clients: 1,
            operations: floors.len(),
            p50_us: percentile(&mut floors, 50.0),
            p99_us: percentile(&mut floors, 99.0),
            per_second: floor_rate,
            zk_writes_per_op: 2.0,
            zk_reads_per_op: 0.0,
            note: format!("batches of {BATCH}, alternating with the uncontended cycle's"),
        };
        let cycle = Row {
            scenario: "uncontended: acquire+release".into(),
            clients: 1,
            operations: n,
            p50_us: percentile(&mut cycles, 50.0),
            p99_us: percentile(&mut cycles, 99.0),
            per_second: cycle_rate,
            zk_writes_per_op: writes,
            zk_reads_per_op: reads,
            note: String::new(),
        };
        Ok((cycle, floor))
    }

    /// `clients` loops for the window, on their own locks or (`shared`) on one lock.
    async fn loops(
        self: &Arc<Self>,
        clients: usize,
        shared: bool,
    ) -> Result<(Vec<Vec<Duration>>, Duration, usize), String> {
        let warm_end =
            Instant::now() + Duration::from_secs_f64((self.args.seconds / 5.0).clamp(0.1, 2.0));
        let tasks: Vec<_> = (0..clients)
            .map(|c| {
                let bench = self.clone();
                tokio::spawn(async move {
                    let name = if shared {
                        "c".to_string()
                    } else {
                        format!("p{c}")
                    };
                    let wait = shared.then_some(120_000);
                    let owner = format!("client-{c}");
                    let mut client = bench.client(&name, &owner, wait).await?;
                    let mut warm = 0;
                    while Instant::now() < warm_end {
                        client.cycle().await?;
                        warm += 1;
                    }
                    let end = warm_end + window(&bench.args);
                    let mut samples = Vec::new();
                    while Instant::now() < end {
                        samples.push(client.cycle().await?);
                    }
                    Ok::<(Vec<Duration>, usize), String>((samples, warm))
                })
            })
            .collect();
        let (mut all, mut warm) = (Vec::new(), 0);
        for task in tasks {
            let (samples, warmed) = task.await.map_err(|e| e.to_string())??;
            all.push(samples);
            warm += warmed;
        }
        Ok((all, window(&self.args), warm))
    }

    /// Runs `clients` loops for the window and reports them, with the server's counters.
    async fn throughput(
        self: &Arc<Self>,
        clients: usize,
        shared: bool,
        scenario: &str,
    ) -> Result<(Row, Vec<usize>), String> {
        let before = server_counts(&self.args.zk);
        let (per_client, span, warm) = self.loops(clients, shared).await?;
        let after = server_counts(&self.args.zk);
        let counts: Vec<usize> = per_client.iter().map(Vec::len).collect();
        let mut samples: Vec<Duration> = per_client.into_iter().flatten().collect();
        let total = samples.len();
        let (w, r) = per_op(before, after, total + warm);
        let row = Row {
            scenario: scenario.into(),
            clients,
            operations: total,
            p50_us: percentile(&mut samples, 50.0),
            p99_us: percentile(&mut samples, 99.0),
            per_second: total as f64 / span.as_secs_f64(),
            zk_writes_per_op: w,
            zk_reads_per_op: r,
            note: String::new(),
        };
        Ok((row, counts))
    }

    pub async fn parallel(self: &Arc<Self>, clients: usize) -> Result<Row, String> {
        let (row, _) = self
            .throughput(clients, false, "parallel: own lock each, acquire+release")
            .await?;
        Ok(Row {
            note: "p50/p99: the acquire".into(),
            ..row
        })
    }

    pub async fn contended(self: &Arc<Self>, clients: usize) -> Result<Row, String> {
        let (row, counts) = self
            .throughput(
                clients,
                true,
                "contended: one lock, waiting acquire+release",
            )
            .await?;
        let note = format!(
            "p50/p99: the wait; fairness (Jain) {:.3}, grants per client {}–{}",
            jain(&counts),
            counts.iter().min().unwrap_or(&0),
            counts.iter().max().unwrap_or(&0)
        );
        Ok(Row { note, ..row })
    }
}
