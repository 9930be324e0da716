//! The benchmark scenarios. Each client is a task with its own loop on one shared HTTP
//! connection pool; bodies are prepared once.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::routing::post;
use serde_json::{json, Value};
use zookeeper_client as zk;

use super::stats::{jain, per_op, percentile, server_counts};
use super::{window, BenchArgs, Row};

pub struct Bench {
    pub(super) args: BenchArgs,
    http: reqwest::Client,
    zk: zk::Client,
    /// A prefix that keeps this run's locks apart from earlier runs'.
    run: String,
}

type Arrivals = Arc<Mutex<Vec<(String, Instant)>>>;

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

    fn lock_url(&self, name: &str, action: &str) -> String {
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

    /// One acquire (waiting if `waiting_ms`) and one release; returns the acquire's latency.
    async fn cycle(
        &self,
        name: &str,
        owner: &str,
        waiting_ms: Option<u64>,
    ) -> Result<Duration, String> {
        let body =
            json!({"owner": owner, "lease_ms": 60_000, "waiting_ms": waiting_ms}).to_string();
        let started = Instant::now();
        let (status, granted) = self.post(&self.lock_url(name, "acquire"), &body).await?;
        let waited = started.elapsed();
        if status != 200 {
            return Err(format!("acquire {name} answered {status}: {granted}"));
        }
        let release = json!({"lease_id": granted["lease_id"]}).to_string();
        let (status, body) = self.post(&self.lock_url(name, "release"), &release).await?;
        if status != 200 {
            return Err(format!(
                "release {name} answered {status}: {body}; the acquire had answered {granted}"
            ));
        }
        Ok(waited)
    }

    pub async fn floor_sequential(&self) -> Result<Row, String> {
        let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        let dir = format!("/{}-floor", self.run);
        self.zk
            .create(&dir, b"", &options)
            .await
            .map_err(|e| e.to_string())?;
        let path = format!("{dir}/x");
        let data = vec![b'x'; 400];
        let mut samples = Vec::with_capacity(self.args.cycles);
        let before = server_counts(&self.args.zk);
        for i in 0..self.args.warmup + self.args.cycles {
            let started = Instant::now();
            self.zk
                .create(&path, &data, &options)
                .await
                .map_err(|e| e.to_string())?;
            self.zk
                .delete(&path, None)
                .await
                .map_err(|e| e.to_string())?;
            if i == self.args.warmup.saturating_sub(1) {
                samples.clear();
            }
            samples.push(started.elapsed());
        }
        let after = server_counts(&self.args.zk);
        let n = samples.len();
        let (w, r) = per_op(before, after, self.args.warmup + self.args.cycles);
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

    pub async fn uncontended(&self) -> Result<Row, String> {
        for _ in 0..self.args.warmup {
            self.cycle("u", "bench", None).await?;
        }
        let mut samples = Vec::with_capacity(self.args.cycles);
        let before = server_counts(&self.args.zk);
        let started = Instant::now();
        for _ in 0..self.args.cycles {
            let t = Instant::now();
            self.cycle("u", "bench", None).await?;
            samples.push(t.elapsed());
        }
        let elapsed = started.elapsed();
        let after = server_counts(&self.args.zk);
        let (w, r) = per_op(before, after, self.args.cycles);
        Ok(Row {
            scenario: "uncontended: acquire+release".into(),
            clients: 1,
            operations: samples.len(),
            p50_us: percentile(&mut samples, 50.0),
            p99_us: percentile(&mut samples, 99.0),
            per_second: self.args.cycles as f64 / elapsed.as_secs_f64(),
            zk_writes_per_op: w,
            zk_reads_per_op: r,
            note: String::new(),
        })
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
                    let mut warm = 0;
                    while Instant::now() < warm_end {
                        bench.cycle(&name, &owner, wait).await?;
                        warm += 1;
                    }
                    let end = warm_end + window(&bench.args);
                    let mut samples = Vec::new();
                    while Instant::now() < end {
                        samples.push(bench.cycle(&name, &owner, wait).await?);
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

    pub async fn parallel(self: &Arc<Self>, clients: usize) -> Result<Row, String> {
        let before = server_counts(&self.args.zk);
        let (per_client, span, warm) = self.loops(clients, false).await?;
        let after = server_counts(&self.args.zk);
        let mut samples: Vec<Duration> = per_client.into_iter().flatten().collect();
        let total = samples.len();
        let (w, r) = per_op(before, after, total + warm);
        Ok(Row {
            scenario: "parallel: own lock each, acquire+release".into(),
            clients,
            operations: total,
            p50_us: percentile(&mut samples, 50.0),
            p99_us: percentile(&mut samples, 99.0),
            per_second: total as f64 / span.as_secs_f64(),
            zk_writes_per_op: w,
            zk_reads_per_op: r,
            note: "p50/p99: the acquire".into(),
        })
    }

    pub async fn contended(self: &Arc<Self>, clients: usize) -> Result<Row, String> {
        let before = server_counts(&self.args.zk);
        let (per_client, span, warm) = self.loops(clients, true).await?;
        let after = server_counts(&self.args.zk);
        let counts: Vec<usize> = per_client.iter().map(Vec::len).collect();
        let mut samples: Vec<Duration> = per_client.into_iter().flatten().collect();
        let total = samples.len();
        let (w, r) = per_op(before, after, total + warm);
        Ok(Row {
            scenario: "contended: one lock, waiting acquire+release".into(),
            clients,
            operations: total,
            p50_us: percentile(&mut samples, 50.0),
            p99_us: percentile(&mut samples, 99.0),
            per_second: total as f64 / span.as_secs_f64(),
            zk_writes_per_op: w,
            zk_reads_per_op: r,
            note: format!(
                "p50/p99: the wait; fairness (Jain) {:.3}, grants per client {}–{}",
                jain(&counts),
                counts.iter().min().unwrap_or(&0),
                counts.iter().max().unwrap_or(&0)
            ),
        })
    }

    /// From a release to the next waiter's 200: one holder, one waiter that queued first.
    pub async fn handoff(self: &Arc<Self>) -> Result<Row, String> {
        let rounds = self.args.cycles.max(10) / 2;
        let warm = self.args.warmup.min(50);
        let mut samples = Vec::with_capacity(rounds);
        let waiting =
            json!({"owner": "next", "lease_ms": 60_000, "waiting_ms": 30_000}).to_string();
        for round in 0..rounds + warm {
            let held = json!({"owner": "first", "lease_ms": 60_000}).to_string();
            let (status, first) = self.post(&self.lock_url("h", "acquire"), &held).await?;
            if status != 200 {
                return Err(format!("holder acquire answered {status}: {first}"));
            }
            let bench = self.clone();
            let body = waiting.clone();
            let next = tokio::spawn(async move {
                let answer = bench.post(&bench.lock_url("h", "acquire"), &body).await;
                (answer, Instant::now())
            });
            // Release only once the waiter is in the queue.
            let info_url = format!("{}/v1/locks/{}-h", self.args.url, self.run);
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let response = self
                    .http
                    .get(&info_url)
                    .send()
                    .await
                    .map_err(|e| e.to_string())?;
                let info: Value =
                    serde_json::from_slice(&response.bytes().await.map_err(|e| e.to_string())?)
                        .unwrap_or(Value::Null);
                if info["waiters"] == 1 {
                    break;
                }
                if Instant::now() > deadline {
                    return Err("the waiter never queued".into());
                }
            }
            let release = json!({"lease_id": first["lease_id"]}).to_string();
            let sent = Instant::now();
            self.post(&self.lock_url("h", "release"), &release).await?;
            let (answer, got) = next.await.map_err(|e| e.to_string())?;
            let (status, granted) = answer?;
            if status != 200 {
                return Err(format!("waiter answered {status}: {granted}"));
            }
            if round >= warm {
                samples.push(got.saturating_duration_since(sent));
            }
            let release = json!({"lease_id": granted["lease_id"]}).to_string();
            self.post(&self.lock_url("h", "release"), &release).await?;
        }
        let n = samples.len();
        Ok(Row {
            scenario: "handoff: release → next waiter's 200".into(),
            clients: 2,
            operations: n,
            p50_us: percentile(&mut samples, 50.0),
            p99_us: percentile(&mut samples, 99.0),
            note: "from sending the release to the waiter receiving its grant".into(),
            ..Row::default()
        })
    }

    /// From a preemption request to the holder's webhook arrival.
    pub async fn preempt(&self) -> Result<Row, String> {
        let arrivals: Arrivals = Arc::default();
        let seen = arrivals.clone();
        let app = axum::Router::new().route(
            "/hook",
            post(move |body: axum::body::Bytes| {
                let seen = seen.clone();
                async move {
                    let at = Instant::now();
                    let event: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    if event["type"] == "lock.cleanup_requested" {
                        let who = event["data"]["requestor"]["owner"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned();
                        seen.lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push((who, at));
                    }
                    axum::http::StatusCode::NO_CONTENT
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| e.to_string())?;
        let hook = format!(
            "http://{}/hook",
            listener.local_addr().map_err(|e| e.to_string())?
        );
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        let rounds = (self.args.cycles / 10).max(5);
        let mut samples = Vec::new();
        for round in 0..rounds + self.args.warmup.min(20) {
            let holder = json!({"owner": "holder", "lease_ms": 60_000, "priority": 1, "cleanup_ms": 60_000, "notify_url": hook}).to_string();
            let (status, held) = self.post(&self.lock_url("pre", "acquire"), &holder).await?;
            if status != 200 {
                server.abort();
                return Ok(Row {
                    scenario: "preempt: request → webhook arrival".into(),
                    note: format!("skipped: the service refused notify_url ({held}); run it with --webhook-secret and --webhook-allow-private"),
                    ..Row::default()
                });
            }
            let who = format!("pre-{round}");
            let preempt =
                json!({"owner": who, "lease_ms": 1000, "priority": 2, "waiting_ms": 0}).to_string();
            let sent = Instant::now();
            self.post(&self.lock_url("pre", "acquire"), &preempt)
                .await?;
            let deadline = Instant::now() + Duration::from_secs(10);
            let arrived = loop {
                if let Some((_, at)) = arrivals
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .iter()
                    .find(|(w, _)| *w == who)
                {
                    break *at;
                }
                if Instant::now() > deadline {
                    return Err(format!("no webhook for {who} within 10 s"));
                }
                tokio::time::sleep(Duration::from_micros(200)).await;
            };
            if round >= self.args.warmup.min(20) {
                samples.push(arrived.saturating_duration_since(sent));
            }
            let release = json!({"lease_id": held["lease_id"]}).to_string();
            self.post(&self.lock_url("pre", "release"), &release)
                .await?;
        }
        server.abort();
        let n = samples.len();
        Ok(Row {
            scenario: "preempt: request → webhook arrival".into(),
            clients: 1,
            operations: n,
            p50_us: percentile(&mut samples, 50.0),
            p99_us: percentile(&mut samples, 99.0),
            note: "measured by the bench's own receiver on loopback".into(),
            ..Row::default()
        })
    }
}
