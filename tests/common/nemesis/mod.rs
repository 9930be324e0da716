//! The chaos rig: a 3-node ZooKeeper ensemble (node 1 a lagging follower), three lockwarden
//! instances that reach every node through a proxy of their own (one of them with its clock
//! skewed by libfaketime), the nemesis that injects faults into any of them, and a run that
//! puts the workload of `history` under the nemesis and checks what it recorded.
//!
//! Everything the rig starts is stopped by pid (through the ensemble and instance handles),
//! and every wait is bounded.

use std::time::{Duration, Instant};

use super::ensemble::{Ensemble, EnsembleOptions, NODES};
use super::framing::op;
use super::instance::{Instance, InstanceOptions};
use super::proxy::{Mode, Proxy};
use super::{unique_root, zk_client_at, znodes_under};

mod chaos;
mod evidence;

#[allow(unused_imports)]
pub use chaos::{run, ChaosOutcome};

/// Taken for the busy part of a run: starting the cluster, the workload under faults and the
/// liveness probe. Those share the machine's two cores, so runs take turns for them. The
/// quiet end of a run, waiting out the collector's two delays (about 14 s of idle processes
/// and a few collector writes), needs no turn and overlaps the next run's start.
static BUSY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub async fn busy_turn() -> tokio::sync::MutexGuard<'static, ()> {
    BUSY.lock().await
}

pub const SESSION_TIMEOUT_MS: u64 = 3000;
/// A write through the lagging follower takes about twice its lag, a sync as long.
pub const STORE_TIMEOUT_MS: u64 = 1000;
/// Above 2 x the store timeout + 1.5 x the session timeout, as the service requires.
pub const GC_DELAY_MS: u64 = 6600;
/// How late node 1 (a follower, mostly) hears from its peers.
pub const FOLLOWER_LAG_MS: u64 = 150;
/// Pairwise clock disagreement the service is told to allow, above the injected skew.
pub const MAX_SKEW_MS: u64 = 5500;
/// How far the skewed instance's clock is moved (ahead for an even seed, behind for odd).
pub const SKEW_MS: i64 = 5000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    KillLeader,
    PauseLeader,
    BlackHoleInstance,
    KillInstance,
    PauseInstance,
    LostCreate,
    LostSetData,
    LostMulti,
    LostDelete,
    SlowReplies,
    QuorumLoss,
}

impl Fault {
    pub const ALL: [Fault; 11] = [
        Fault::KillLeader,
        Fault::PauseLeader,
        Fault::BlackHoleInstance,
        Fault::KillInstance,
        Fault::PauseInstance,
        Fault::LostCreate,
        Fault::LostSetData,
        Fault::LostMulti,
        Fault::LostDelete,
        Fault::SlowReplies,
        Fault::QuorumLoss,
    ];

    /// A fault by its name as printed (`KillLeader`, ...).
    pub fn named(name: &str) -> Option<Fault> {
        Fault::ALL.into_iter().find(|f| format!("{f:?}") == name)
    }
}

pub struct Cluster {
    pub ensemble: Ensemble,
    /// `proxies[i]`: instance i's proxies, one per ZooKeeper node.
    pub proxies: Vec<Vec<Proxy>>,
    pub instances: Vec<Instance>,
    pub offsets: Vec<i64>,
    pub root: String,
    /// Where each instance's log goes (`instance-{i}.log`); kept after the run.
    pub logs: std::path::PathBuf,
}

impl Cluster {
    /// Starts the ensemble and `instances` lockwarden instances; instance 1 (if any) runs
    /// with its clock moved by `skew_ms`.
    pub async fn start(instances: usize, skew_ms: i64) -> Cluster {
        let ensemble = Ensemble::start(EnsembleOptions {
            lagging: Some((1, Duration::from_millis(FOLLOWER_LAG_MS))),
        })
        .await;
        let root = unique_root();
        let logs = std::env::temp_dir().join(format!("lockwarden-chaos{}", root.replace('/', "-")));
        std::fs::create_dir_all(&logs).expect("a log directory");
        let mut proxies = Vec::new();
        let mut started = Vec::new();
        let mut offsets = Vec::new();
        for i in 0..instances {
            let mine: Vec<Proxy> = (1..=NODES)
                .map(|id| Proxy::start(ensemble.client_addr(id)))
                .collect();
            let connect = mine
                .iter()
                .map(|p| p.addr().to_string())
                .collect::<Vec<_>>()
                .join(",");
            let offset = if i == 1 { skew_ms } else { 0 };
            let mut options = InstanceOptions::new(&instance_flags(&connect, &root))
                .log(logs.join(format!("instance-{i}.log")));
            if offset != 0 {
                options = options.clock_offset_ms(offset);
            }
            started.push(Instance::start(options).await);
            proxies.push(mine);
            offsets.push(offset);
        }
        // Up is not ready: a scenario starts once every instance has its ZooKeeper session
        // (on a busy machine, the first session can take longer than a store timeout).
        let http = super::http_client();
        for instance in &started {
            let url = format!("{}/readyz", instance.base());
            super::eventually(Duration::from_secs(30), "an instance to be ready", || {
                let (http, url) = (http.clone(), url.clone());
                async move {
                    let answer = http.get(url).send().await;
                    answer.is_ok_and(|a| a.status() == reqwest::StatusCode::OK)
                }
            })
            .await;
        }
        // Ready is not yet quick: a fresh root's first lock creates its parents, one write
        // after another, and through the lagging follower each takes about twice its lag, so
        // a scenario's first acquire could run out of store timeout. Each instance takes and
        // frees one lock first (retried with one request id, so a lost answer costs nothing).
        for (i, instance) in started.iter().enumerate() {
            let url = format!("{}/v1/locks/warm-up-{i}", instance.base());
            let body = serde_json::json!({"owner": "warm-up", "lease_ms": 5000,
                "request_id": format!("warm-up-{i}")});
            let deadline = Instant::now() + Duration::from_secs(30);
            let lease = loop {
                let answer = http.post(format!("{url}/acquire")).json(&body).send().await;
                let granted: serde_json::Value = match answer {
                    Ok(answer) => answer.json().await.unwrap_or_default(),
                    Err(_) => serde_json::Value::Null,
                };
                if let Some(lease) = granted["lease_id"].as_str() {
                    break lease.to_owned();
                }
                assert!(
                    Instant::now() < deadline,
                    "no first lock on {url}: {granted}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            };
            let released = http
                .post(format!("{url}/release"))
                .json(&serde_json::json!({"lease_id": lease}))
                .send()
                .await
                .map(|a| a.status());
            assert!(
                released.as_ref().is_ok_and(|s| s.is_success()),
                "{released:?}"
            );
        }
        Cluster {
            ensemble,
            proxies,
            instances: started,
            offsets,
            root,
            logs,
        }
    }

    pub fn urls(&self) -> Vec<String> {
        self.instances.iter().map(|i| i.base().to_owned()).collect()
    }

    fn set_proxies(&self, instance: usize, mode: Mode) {
        for proxy in &self.proxies[instance] {
            proxy.set_mode(mode.clone());
        }
    }

    /// Znodes left under the rig's roots (records and queue nodes), after the collector.
    pub async fn garbage(&self) -> Vec<String> {
        let zk = zk_client_at(&self.ensemble.connect_string()).await;
        let mut left = znodes_under(&zk, &format!("{}/locks", self.root)).await;
        left.extend(znodes_under(&zk, &format!("{}/state", self.root)).await);
        // Semaphores and elections keep their records and queues under roots of their own.
        for root in ["semaphores", "elections"] {
            for part in ["records", "state"] {
                let under = format!("{}/{root}/{part}", self.root);
                left.extend(znodes_under(&zk, &under).await);
            }
        }
        left
    }
}

pub fn instance_flags(connect: &str, root: &str) -> Vec<String> {
    [
        ("--zk", connect.to_owned()),
        ("--lock-root", format!("{root}/locks")),
        ("--state-root", format!("{root}/state")),
        ("--election-root", format!("{root}/elections")),
        ("--semaphore-root", format!("{root}/semaphores")),
        ("--store-timeout-ms", STORE_TIMEOUT_MS.to_string()),
        ("--zk-session-timeout-ms", SESSION_TIMEOUT_MS.to_string()),
        ("--gc-delay-ms", GC_DELAY_MS.to_string()),
        ("--max-clock-skew-ms", MAX_SKEW_MS.to_string()),
        // Sweep often, so the garbage check at the end sees what only a sweep removes.
        ("--gc-sweep-interval-ms", "5000".to_string()),
    ]
    .into_iter()
    .flat_map(|(flag, value)| [flag.to_owned(), value])
    .collect()
}

/// One injected fault: what, on which process, and when (ms on the test clock).
#[derive(Clone, Debug)]
pub struct Injection {
    pub fault: Fault,
    pub target: usize,
    pub start_ms: i64,
    pub healed_ms: i64,
    /// From healing until every instance served an acquire and a release again.
    pub recovered_ms: Option<i64>,
}

fn now_ms() -> i64 {
    super::history::now_floor_ms()
}

/// Injects one fault for about `hold`, heals it, and measures recovery.
pub async fn inject(
    cluster: &mut Cluster,
    fault: Fault,
    target: usize,
    hold: Duration,
) -> Injection {
    let start_ms = now_ms();
    let lost = |ops: &[i32]| Mode::CutAfter {
        ops: ops.to_vec(),
        refuse_for: Duration::from_millis(800),
    };
    let instance = target % cluster.instances.len();
    match fault {
        Fault::KillLeader => {
            let leader = cluster.ensemble.leader().await.unwrap_or(2);
            cluster.ensemble.kill(leader);
            tokio::time::sleep(hold).await;
            cluster.ensemble.restart(leader).await;
        }
        Fault::PauseLeader => {
            let leader = cluster.ensemble.leader().await.unwrap_or(2);
            cluster.ensemble.pause(leader);
            let past_session = Duration::from_millis(SESSION_TIMEOUT_MS + 1500);
            tokio::time::sleep(hold.max(past_session)).await;
            cluster.ensemble.resume(leader);
        }
        Fault::QuorumLoss => {
            let leader = cluster.ensemble.leader().await.unwrap_or(2);
            let other = (1..=NODES).find(|id| *id != leader).unwrap_or(1);
            cluster.ensemble.kill(leader);
            cluster.ensemble.kill(other);
            tokio::time::sleep(hold).await;
            cluster.ensemble.restart(leader).await;
            cluster.ensemble.restart(other).await;
        }
        Fault::BlackHoleInstance => {
            cluster.set_proxies(instance, Mode::BlackHole);
            tokio::time::sleep(hold).await;
            cluster.set_proxies(instance, Mode::Pass);
        }
        Fault::SlowReplies => {
            cluster.set_proxies(instance, Mode::DelayReplies(Duration::from_millis(400)));
            tokio::time::sleep(hold).await;
            cluster.set_proxies(instance, Mode::Pass);
        }
        Fault::KillInstance => {
            cluster.instances[instance].kill();
            tokio::time::sleep(hold.min(Duration::from_secs(2))).await;
            cluster.instances[instance].restart().await;
        }
        Fault::PauseInstance => {
            cluster.instances[instance].pause();
            let past_session = Duration::from_millis(SESSION_TIMEOUT_MS + 1500);
            tokio::time::sleep(hold.max(past_session)).await;
            cluster.instances[instance].resume();
        }
        Fault::LostCreate | Fault::LostSetData | Fault::LostMulti | Fault::LostDelete => {
            let ops: &[i32] = match fault {
                Fault::LostCreate => &[op::CREATE, op::CREATE2],
                Fault::LostSetData => &[op::SET_DATA],
                Fault::LostMulti => &[op::MULTI],
                _ => &[op::DELETE],
            };
            let deadline = Instant::now() + hold;
            while Instant::now() < deadline {
                cluster.set_proxies(instance, lost(ops));
                tokio::time::sleep(Duration::from_millis(1500)).await;
            }
            cluster.set_proxies(instance, Mode::Pass);
        }
    }
    let healed_ms = now_ms();
    let recovered_ms = recovery(cluster, Duration::from_secs(30)).await;
    Injection {
        fault,
        target: match fault {
            Fault::KillLeader | Fault::PauseLeader | Fault::QuorumLoss => 0,
            _ => instance,
        },
        start_ms,
        healed_ms,
        recovered_ms: recovered_ms.map(|at| at - healed_ms),
    }
}

/// Waits until every instance grants and releases a probe lock; the time it happened.
async fn recovery(cluster: &Cluster, within: Duration) -> Option<i64> {
    let deadline = Instant::now() + within;
    cluster.ensemble.wait_serving(within).await;
    let http = super::http_client();
    let post = |url: &str, name: &str, action: &str, body: &serde_json::Value| {
        http.post(format!("{url}/v1/locks/{}/{action}", super::encode(name)))
            .json(body)
            .timeout(Duration::from_secs(5))
            .send()
    };
    'again: while Instant::now() < deadline {
        for (i, url) in cluster.urls().iter().enumerate() {
            let name = format!("probe/i{i}");
            let body = serde_json::json!({"owner": "probe", "lease_ms": 2000, "waiting_ms": 3000});
            let answer = post(url, &name, "acquire", &body).await;
            let granted = match answer {
                Ok(response) if response.status().is_success() => {
                    response.json::<serde_json::Value>().await.ok()
                }
                _ => None,
            };
            let Some(granted) = granted else {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue 'again;
            };
            // A release answered 503 (the ensemble still settling) leaves the probe held until
            // its lease runs out, and then an expired record that the garbage check finds:
            // retry until the service answers it.
            let release = serde_json::json!({"lease_id": granted["lease_id"]});
            loop {
                let answer = post(url, &name, "release", &release).await;
                let settled = answer.is_ok_and(|r| !r.status().is_server_error());
                if settled || Instant::now() >= deadline {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        return Some(now_ms());
    }
    None
}
