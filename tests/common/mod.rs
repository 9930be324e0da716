//! Shared test harness: a real ZooKeeper, lockwarden instances on loopback, and an HTTP
//! client with helpers that speak the API.

#![allow(dead_code)]

pub mod dashboard;
pub mod ensemble;
pub mod framing;
pub mod history;
pub mod instance;
pub mod late_write;
pub mod nemesis;
pub mod process;
pub mod proxy;
pub mod receiver;
pub mod sse;
pub mod stale_copy;
pub mod tls;
pub mod waiting;
pub mod webdriver;
pub mod zk;

/// Runs each named `async fn(Service)` as three tests: on ZooKeeper and in memory with the
/// performance hints on, and in memory with every hint off (DESIGN.md, "Hints and their
/// switches": a hint may suggest, never decide, so no answer depends on it). The names
/// after `hinted:` test a hint itself, and run with the hints on only.
#[allow(unused_macros)]
macro_rules! on_both_stores {
    ($($name:ident),* $(,)?) => { on_both_stores!($($name),*; hinted:); };
    ($($name:ident),* ; hinted: $($hinted:ident),* $(,)?) => {
        mod on_zookeeper {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(super::common::Service::zk().await).await })*
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $hinted() { super::$hinted(super::common::Service::zk().await).await })*
        }
        mod in_memory {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(super::common::Service::memory().await).await })*
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $hinted() { super::$hinted(super::common::Service::memory().await).await })*
        }
        mod hints_off {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                super::$name(super::common::Service::memory_hints_off().await).await
            })*
        }
    };
}

use std::time::{Duration, Instant};

use lockwarden::config::ServeArgs;
use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use zookeeper_client as zkc;

#[allow(unused_imports)]
pub use process::Process;
pub use zk::ZkServer;

/// Command-line flags for a `Process` on `zk` under `root` (as `zk_args` gives in-process).
pub fn zk_flags(zk: &ZkServer, root: &str, extra: &[&str]) -> Vec<String> {
    let mut flags: Vec<String> = vec![
        "--zk".into(),
        zk.connect_string(),
        "--lock-root".into(),
        format!("{root}/locks"),
        "--state-root".into(),
        format!("{root}/state"),
        "--election-root".into(),
        format!("{root}/elections"),
        "--store-timeout-ms".into(),
        "1000".into(),
        "--zk-session-timeout-ms".into(),
        "4000".into(),
        "--gc-delay-ms".into(),
        "8500".into(),
        // One process on one clock: lazy expiry at the lease's end keeps the tests short.
        // The skew margin is tested where clocks differ (tests/suite/holes.rs, the chaos rig).
        "--max-clock-skew-ms".into(),
        "0".into(),
    ];
    flags.extend(extra.iter().map(|s| s.to_string()));
    flags
}

/// A fresh, unique lock root, so tests sharing one ZooKeeper never see each other's locks.
pub fn unique_root() -> String {
    format!("/t-{}", uuid::Uuid::new_v4().simple())
}

/// Arguments for an instance on `zk` under a fresh root, with short timeouts.
pub fn zk_args(zk: &ZkServer, root: &str) -> ServeArgs {
    let mut args = ServeArgs::defaults();
    args.zk = Some(zk.connect_string());
    args.lock_root = format!("{root}/locks");
    args.state_root = format!("{root}/state");
    args.election_root = format!("{root}/elections");
    args.semaphore_root = format!("{root}/semaphores");
    args.store_timeout_ms = 1000;
    args.gc_delay_ms = 8500;
    args.zk_session_timeout_ms = 4000;
    args.max_clock_skew_ms = 0;
    args
}

/// The admin token of [`service_behind`]'s instances.
pub const ADMIN_BEHIND: &str = "admin-behind";

/// An instance on the shared server whose ZooKeeper is reached through `proxy`, with 10-s
/// sessions (zookeeper-client calls a silent connection lost after 4 s) and a warm session:
/// its lock root made, so a fresh lock's first request is its record's create. Its admin
/// token is [`ADMIN_BEHIND`].
pub async fn service_behind(proxy: std::net::SocketAddr, store_timeout_ms: u64) -> Service {
    let mut args = zk_args(zk::shared(), &unique_root());
    args.zk = Some(proxy.to_string());
    args.zk_session_timeout_ms = 10_000;
    args.store_timeout_ms = store_timeout_ms;
    args.admin_token = Some(ADMIN_BEHIND.into());
    // Covers 2 store timeouts and 1.5 session timeouts, as the service requires.
    args.gc_delay_ms = 2 * store_timeout_ms + 18_000;
    let svc = Service::start(args).await;
    svc.must_take_and_free("warm-up").await;
    svc
}

pub fn encode(name: &str) -> String {
    name.replace('/', "%2F")
}

/// A lockwarden instance running inside the test process.
pub struct Service {
    pub base: String,
    pub http: reqwest::Client,
    pub root: String,
    task: JoinHandle<()>,
}

impl Drop for Service {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

impl Service {
    pub async fn start(args: ServeArgs) -> Service {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let scheme = if args.tls_cert.is_some() {
            "https"
        } else {
            "http"
        };
        let base = format!("{scheme}://{}", listener.local_addr().unwrap());
        let root = args.lock_root.trim_end_matches("/locks").to_owned();
        let task = tokio::spawn(async move {
            lockwarden::server::serve_on(listener, args, std::future::pending())
                .await
                .unwrap();
        });
        Service {
            base,
            http: http_client(),
            root,
            task,
        }
    }

    /// An instance on the shared ZooKeeper, under a fresh lock root.
    pub async fn zk() -> Service {
        Self::start(zk_args(zk::shared(), &unique_root())).await
    }

    pub async fn zk_with(adjust: impl FnOnce(&mut ServeArgs)) -> Service {
        let mut args = zk_args(zk::shared(), &unique_root());
        adjust(&mut args);
        Self::start(args).await
    }

    /// An instance on the embedded in-memory store.
    pub async fn memory() -> Service {
        let mut args = ServeArgs::defaults();
        args.max_clock_skew_ms = 0;
        Self::start(args).await
    }

    /// An instance on the embedded in-memory store with every performance hint off.
    pub async fn memory_hints_off() -> Service {
        let mut args = ServeArgs::defaults();
        args.max_clock_skew_ms = 0;
        args.hints_off = vec![lockwarden::service::Hint::All];
        Self::start(args).await
    }

    pub async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        token: Option<&str>,
    ) -> (StatusCode, Value) {
        send(&self.http, &self.base, method, path, body, token).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.send("POST", path, Some(body), None).await
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.send("GET", path, None, None).await
    }

    pub async fn acquire(&self, name: &str, body: Value) -> (StatusCode, Value) {
        self.post(&format!("/v1/locks/{}/acquire", encode(name)), body)
            .await
    }

    /// Acquires with defaults for the required fields; asserts success; returns the reply.
    pub async fn must_acquire(&self, name: &str, owner: &str, lease_ms: u64) -> Value {
        let (status, body) = self
            .acquire(name, json!({"owner": owner, "lease_ms": lease_ms}))
            .await;
        assert_eq!(status, StatusCode::OK, "acquire {name} as {owner}: {body}");
        body
    }

    /// Takes `name` and frees it again, asserting both: warms up the instance's session.
    pub async fn must_take_and_free(&self, name: &str) {
        let lease = self.must_acquire(name, "warm-up", 60_000).await;
        let (status, body) = self
            .release(name, lease["lease_id"].as_str().unwrap())
            .await;
        assert_eq!(status, StatusCode::OK, "release {name}: {body}");
    }

    pub async fn release(&self, name: &str, lease_id: &str) -> (StatusCode, Value) {
        self.post(
            &format!("/v1/locks/{}/release", encode(name)),
            json!({"lease_id": lease_id}),
        )
        .await
    }

    pub async fn renew(&self, name: &str, body: Value) -> (StatusCode, Value) {
        self.post(&format!("/v1/locks/{}/renew", encode(name)), body)
            .await
    }

    /// The service's `/metrics` text.
    pub async fn metrics(&self) -> String {
        let response = self.http.get(format!("{}/metrics", self.base)).send();
        response.await.unwrap().text().await.unwrap()
    }

    pub async fn info(&self, name: &str) -> Value {
        let (status, body) = self.get(&format!("/v1/locks/{}", encode(name))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body
    }

    /// The value of one series of the service's `/metrics` (see [`metric_value`]).
    pub async fn metric(&self, series: &str) -> u64 {
        metric_value(&self.metrics().await, series)
    }

    /// How many callers the lock's info says are queued for it.
    pub async fn waiters(&self, name: &str) -> u64 {
        let info = self.info(name).await;
        info["waiters"]
            .as_u64()
            .expect("a lock's info has `waiters`")
    }

    /// Polls (for up to 20 s) until the lock's info shows `n` queued callers.
    pub async fn wait_for_waiters(&self, name: &str, n: u64) {
        let what = format!("{n} waiters on {name}");
        eventually(Duration::from_secs(20), &what, || async {
            self.waiters(name).await == n
        })
        .await;
    }

    pub async fn validate(&self, name: &str, token: u64) -> bool {
        let (status, body) = self
            .get(&format!(
                "/v1/locks/{}/validate?fencing_token={token}",
                encode(name)
            ))
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["current"].as_bool().unwrap()
    }
}

pub async fn send(
    http: &reqwest::Client,
    base: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
    token: Option<&str>,
) -> (StatusCode, Value) {
    let mut request = http.request(method.parse().unwrap(), format!("{base}{path}"));
    if let Some(body) = body {
        request = request.json(&body);
    }
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("the service answers");
    let status = response.status();
    let text = response.text().await.unwrap();
    let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, value)
}

/// The value of a series (a name, and any labels to match) in a `/metrics` text, summed
/// over the labels left out (see `metrics::scrape`), or 0 when no series matches yet.
pub fn metric_value(metrics: &str, series: &str) -> u64 {
    lockwarden::metrics::scrape::series_sum(metrics, series).unwrap_or(0.0) as u64
}

/// Polls `check` until it returns true or the deadline passes.
pub async fn eventually<F, Fut>(within: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    loop {
        if check().await {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A direct ZooKeeper session, for seeding and inspecting znodes the way Helix's tests do.
pub async fn zk_client(zk: &ZkServer) -> zkc::Client {
    zkc::Client::connect(&zk.connect_string())
        .await
        .expect("connecting to the test ZooKeeper")
}

/// A direct ZooKeeper session on any connection string (an ensemble's, say).
pub async fn zk_client_at(connect: &str) -> zkc::Client {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match zkc::Client::connect(connect).await {
            Ok(client) => return client,
            Err(error) => assert!(
                Instant::now() < deadline,
                "connecting to {connect}: {error}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Writes a raw Helix ZNRecord with the given simple fields at `path` (parents created).
pub async fn seed_record(client: &zkc::Client, path: &str, fields: Value) {
    let record = json!({"id": "LOCK", "simpleFields": fields, "listFields": {}, "mapFields": {}});
    let options = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
    let parent = &path[..path.rfind('/').unwrap()];
    client
        .mkdir(parent, &options)
        .await
        .or_else(|e| {
            if e == zkc::Error::NodeExists {
                Ok(())
            } else {
                Err(e)
            }
        })
        .unwrap();
    client
        .create(path, &serde_json::to_vec(&record).unwrap(), &options)
        .await
        .unwrap();
}

/// Every znode under `path` (recursively), as paths.
pub async fn znodes_under(client: &zkc::Client, path: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![path.to_owned()];
    while let Some(dir) = pending.pop() {
        let Ok(children) = client.list_children(&dir).await else {
            continue;
        };
        for child in children {
            let full = format!("{dir}/{child}");
            found.push(full.clone());
            pending.push(full);
        }
    }
    found
}

/// The median and the 99th percentile of `samples` (sorted in place).
pub fn stats(samples: &mut [f64]) -> (f64, f64) {
    samples.sort_by(f64::total_cmp);
    let at = |p: f64| samples[((samples.len() - 1) as f64 * p).round() as usize];
    (at(0.5), at(0.99))
}
