//! The benchmark's state and its throughput scenarios (parallel and contended). Each
//! measuring client is a task with its own loop on its own HTTP connection, with its
//! requests prepared once; the other requests go through one shared pool.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{json, Value};
use zookeeper_client as zk;

use super::client::Connection;

use super::stats::{cpu_note, jain, joined, per_op, process_cpu, server_counts};
use super::{BenchArgs, Row};

/// What a throughput scenario's loops take: a lock each, one lock for all (waiting), or
/// permits of one semaphore of this many (waiting).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum On {
    Own,
    Shared,
    Semaphore(u32),
}

/// One measuring loop's client: its own connection, and its requests prepared once.
pub(super) struct Client {
    connection: Connection,
    acquire_path: String,
    release_path: String,
    acquire: Bytes,
}

impl Client {
    /// One acquire (waiting if the prepared body says so) and one release; returns the
    /// acquire's latency.
    pub(super) async fn cycle(&mut self) -> Result<Duration, String> {
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
    pub(super) zk: zk::Client,
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
    pub(super) async fn client(
        &self,
        name: &str,
        owner: &str,
        waiting_ms: Option<u64>,
    ) -> Result<Client, String> {
        self.client_at(&self.args.url, name, owner, waiting_ms, None)
            .await
    }

    /// The measuring loop `index`'s instance: `--url` and `--also-url` in turn.
    fn instance_url(&self, index: usize) -> &str {
        let count = 1 + self.args.also_url.len();
        match index % count {
            0 => &self.args.url,
            other => &self.args.also_url[other - 1],
        }
    }

    /// A client (as [`Bench::client`]) talking to the instance at `url`; with `limit`, of
    /// the semaphore `name` of that many permits.
    pub(super) async fn client_at(
        &self,
        url: &str,
        name: &str,
        owner: &str,
        waiting_ms: Option<u64>,
        limit: Option<u32>,
    ) -> Result<Client, String> {
        let connection = Connection::open(url, self.args.token.as_deref()).await?;
        let mut acquire = json!({"owner": owner, "lease_ms": 60_000, "waiting_ms": waiting_ms});
        let root = match limit {
            Some(limit) => {
                acquire["limit"] = json!(limit);
                "semaphores"
            }
            None => "locks",
        };
        Ok(Client {
            connection,
            acquire_path: format!("/v1/{root}/{}-{name}/acquire", self.run),
            release_path: format!("/v1/{root}/{}-{name}/release", self.run),
            acquire: Bytes::from(acquire.to_string()),
        })
    }

    /// `clients` loops for the window `on` their locks, one lock or one semaphore, via `via`.
    async fn loops(
        self: &Arc<Self>,
        clients: usize,
        on: On,
        window: Duration,
        via: Option<&str>,
    ) -> Result<(Vec<Vec<Duration>>, Duration, usize), String> {
        let warm_end = Instant::now() + super::warm_up(window);
        let tasks: Vec<_> = (0..clients)
            .map(|c| {
                let bench = self.clone();
                let url = via.unwrap_or_else(|| self.instance_url(c)).to_owned();
                tokio::spawn(async move {
                    let (name, limit) = match on {
                        On::Own => (format!("p{c}"), None),
                        On::Shared => ("c".to_string(), None),
                        On::Semaphore(limit) => ("s".to_string(), Some(limit)),
                    };
                    let wait = (on != On::Own).then_some(120_000);
                    let owner = format!("client-{c}");
                    let mut client = bench.client_at(&url, &name, &owner, wait, limit).await?;
                    let mut warm = 0;
                    while Instant::now() < warm_end {
                        client.cycle().await?;
                        warm += 1;
                    }
                    let end = warm_end + window;
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
        Ok((all, window, warm))
    }

    /// Runs `clients` loops for `window` and reports them, with the server's counters and,
    /// when they talk to the service (not `via` the relay), the service's CPU time.
    async fn throughput(
        self: &Arc<Self>,
        clients: usize,
        on: On,
        scenario: &str,
        window: Duration,
        via: Option<&str>,
    ) -> Result<(Row, Vec<usize>), String> {
        let service_pid = self.args.service_pid.filter(|_| via.is_none());
        let before = server_counts(&self.args.zk);
        let cpu_before = process_cpu(service_pid);
        let (per_client, span, warm) = self.loops(clients, on, window, via).await?;
        let cpu_after = process_cpu(service_pid);
        let after = server_counts(&self.args.zk);
        let counts: Vec<usize> = per_client.iter().map(Vec::len).collect();
        let mut samples: Vec<Duration> = per_client.into_iter().flatten().collect();
        let total = samples.len();
        let (w, r) = per_op(before, after, total + warm);
        let row = Row {
            per_second: total as f64 / span.as_secs_f64(),
            zk_writes_per_op: w,
            zk_reads_per_op: r,
            note: cpu_note(cpu_before, cpu_after, total + warm),
            ..Row::of_samples(scenario, clients, &mut samples)
        };
        Ok((row, counts))
    }

    pub async fn parallel(
        self: &Arc<Self>,
        clients: usize,
        window: Duration,
    ) -> Result<Row, String> {
        let (row, _) = self
            .throughput(
                clients,
                On::Own,
                "parallel: own lock each, acquire+release",
                window,
                None,
            )
            .await?;
        Ok(Row {
            note: joined("p50/p99: the acquire", &row.note),
            ..row
        })
    }

    /// The parallel loops against the HTTP relay (`--relay-url`) instead of lockwarden.
    pub async fn relay_parallel(
        self: &Arc<Self>,
        clients: usize,
        window: Duration,
    ) -> Result<Row, String> {
        let url = self.args.relay_url.clone().ok_or("no --relay-url")?;
        let (row, _) = self
            .throughput(
                clients,
                On::Own,
                "HTTP relay: parallel create+delete over HTTP",
                window,
                Some(&url),
            )
            .await?;
        Ok(Row {
            note: "p50/p99: the create; no lock logic".into(),
            ..row
        })
    }

    pub async fn contended(
        self: &Arc<Self>,
        clients: usize,
        window: Duration,
    ) -> Result<Row, String> {
        let scenario = "contended: one lock, waiting acquire+release";
        self.waiting(clients, On::Shared, scenario, window).await
    }

    /// `clients` waiting loops `on` one lock or semaphore: fairness, hand-off write mean.
    pub(super) async fn waiting(
        self: &Arc<Self>,
        clients: usize,
        on: On,
        scenario: &str,
        window: Duration,
    ) -> Result<Row, String> {
        let before = self.handoff_writes().await;
        let (row, counts) = self.throughput(clients, on, scenario, window, None).await?;
        let after = self.handoff_writes().await;
        let write = match (before, after) {
            (Some((s0, n0)), Some((s1, n1))) if n1 > n0 => {
                format!(
                    "; hand-off write (ZooKeeper multi) mean {:.0} µs",
                    (s1 - s0) / (n1 - n0) * 1e6
                )
            }
            _ => String::new(),
        };
        let note = format!(
            "p50/p99: the wait; fairness (Jain) {:.3}, grants per client {}–{}{write}",
            jain(&counts),
            counts.iter().min().unwrap_or(&0),
            counts.iter().max().unwrap_or(&0)
        );
        Ok(Row {
            note: joined(&note, &row.note),
            ..row
        })
    }

    /// The service's running total of hand-off write time (seconds) and count, from
    /// `/metrics`: the part of a hand-off that ZooKeeper takes.
    async fn handoff_writes(&self) -> Option<(f64, f64)> {
        let url = format!("{}/metrics", self.args.url);
        let text = self.http.get(url).send().await.ok()?.text().await.ok()?;
        let value = |series: &str| crate::metrics::scrape::series_sum(&text, series);
        Some((
            value("lockwarden_handoff_write_seconds_sum{resource=\"lock\"}")?,
            value("lockwarden_handoff_write_seconds_count{resource=\"lock\"}")?,
        ))
    }
}
