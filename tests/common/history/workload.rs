//! The workload: concurrent clients that take, hold, renew, validate and release locks on
//! a fixed list of instances and record every call; and the liveness probe for after the
//! faults.
//!
//! Each client runs in its own task, on instance `client % urls.len()`, with its own
//! `fastrand::Rng` seeded from the run's seed and its id, so a seed reproduces every
//! client's choices (not the timings or the answers). One cycle of a client:
//!
//! 1. acquire a random lock: lease 300–2000 ms, `waiting_ms` 0 or 1–1500, priority 0
//!    (75 %) or 1–5, sometimes forceful, `cleanup_ms` 0–300;
//! 2. if granted: write the token to the fenced resource, then up to 3 times: sleep for
//!    1/8–1/3 of the lease (so before half of it is gone), sometimes validate the token,
//!    renew (keeping the length, or with a new one) and write the token again if
//!    acknowledged; stop on a `409`;
//! 3. sometimes validate an old token this client once held;
//! 4. release (85 %) or let the lease lapse (15 %).
//!
//! Hot clients (`WorkloadConfig::hot_clients`, none by default) loop on one more lock
//! instead: a waiting acquire, a release 0–3 ms later, and again at once.
//!
//! The clients pick semaphores and elections (`WorkloadConfig::semaphores`, `elections`)
//! among the locks. An election's cycle is a lock's in the election's words (`Endpoint`):
//! campaign, strict renewals, validate the term, resign; the term is written to the fenced
//! resource as a lock's token is. Elections have no force release.
//!
//! Every call has a client-side timeout; the run ends at its deadline or operation budget
//! (a client holding a lock then still releases it), so every loop is bounded.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Call, Endpoint, FencedResource, History, Kinds, Op};

#[derive(Clone, Debug)]
pub struct WorkloadConfig {
    /// The instances' base URLs (`http://127.0.0.1:port`); index = instance number.
    pub urls: Vec<String>,
    pub clients: usize,
    /// How many locks: `{prefix}/l0` … `{prefix}/l{locks-1}`.
    pub locks: usize,
    pub prefix: String,
    pub seed: u64,
    /// The run ends this long after it starts …
    pub duration: Duration,
    /// … or once this many calls have been made, whichever comes first.
    pub max_ops: Option<usize>,
    /// The client-side limit of one call; past it the outcome is unknown.
    pub http_timeout: Duration,
    /// Sent as a bearer token with every call (an API token, or the admin token).
    pub token: Option<String>,
    /// Per mille of cycles that are an admin force release instead (needs the admin token).
    pub force_release_per_mille: u32,
    /// Further clients that loop on one lock, `{prefix}/hot`: a waiting acquire, the token
    /// written, a release 0–3 ms later, and again at once. On that lock the queue's joins
    /// ride on hand-offs (`service::group_commit`).
    pub hot_clients: usize,
    /// Semaphores of `SEMAPHORE_LIMIT` permits, `{prefix}/s0` …, which the clients pick
    /// among the locks (none by default). Their tokens are not written to the fenced
    /// resource, which accepts one writer at a time.
    pub semaphores: usize,
    /// Elections, `{prefix}/e0` …, which the clients pick among the locks (none by
    /// default): campaigns, strict renewals (I17), validates by term, resignations.
    pub elections: usize,
}

/// The permits of each of the workload's semaphores.
pub const SEMAPHORE_LIMIT: u32 = 2;

impl WorkloadConfig {
    /// 16 clients, 4 locks under `wl`, seed 1, 8 s, 3 s per call.
    pub fn new(urls: Vec<String>) -> WorkloadConfig {
        WorkloadConfig {
            urls,
            clients: 16,
            locks: 4,
            prefix: "wl".to_owned(),
            seed: 1,
            duration: Duration::from_secs(8),
            max_ops: None,
            http_timeout: Duration::from_secs(3),
            token: None,
            force_release_per_mille: 0,
            hot_clients: 0,
            semaphores: 0,
            elections: 0,
        }
    }

    /// Every name the workload uses: its locks, the hot lock, its semaphores and its
    /// elections.
    pub fn lock_names(&self) -> Vec<String> {
        let hot = (self.hot_clients > 0).then(|| self.hot_lock());
        (0..self.locks)
            .map(|i| format!("{}/l{i}", self.prefix))
            .chain(hot)
            .chain(self.semaphore_names())
            .chain(self.election_names())
            .collect()
    }

    pub fn semaphore_names(&self) -> Vec<String> {
        (0..self.semaphores)
            .map(|i| format!("{}/s{i}", self.prefix))
            .collect()
    }

    pub fn election_names(&self) -> Vec<String> {
        (0..self.elections)
            .map(|i| format!("{}/e{i}", self.prefix))
            .collect()
    }

    /// Which of the names are semaphores and which elections.
    pub fn kinds(&self) -> Kinds {
        Kinds {
            semaphores: self.semaphore_names(),
            elections: self.election_names(),
        }
    }

    fn hot_lock(&self) -> String {
        format!("{}/hot", self.prefix)
    }
}

/// An HTTP client for the workload and the probe: no proxy, and no timeout of its own
/// (each call sets one).
pub fn workload_http() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("an HTTP client")
}

pub struct Workload;

impl Workload {
    /// Runs the clients until the deadline or the budget and returns what they did.
    pub async fn run(config: WorkloadConfig) -> History {
        assert!(!config.urls.is_empty(), "the workload needs an instance");
        assert!(config.locks > 0, "the workload needs a lock");
        let http = workload_http();
        let kinds = Arc::new(config.kinds());
        let locks = Arc::new(
            (0..config.locks)
                .map(|i| format!("{}/l{i}", config.prefix))
                .chain(kinds.semaphores.iter().cloned())
                .chain(kinds.elections.iter().cloned())
                .collect::<Vec<_>>(),
        );
        let hot_lock = config.hot_lock();
        let fenced = Arc::new(FencedResource::new());
        let budget = Arc::new(AtomicUsize::new(0));
        let deadline = Instant::now() + config.duration;
        let tasks: Vec<_> = (0..config.clients + config.hot_clients)
            .map(|id| {
                let instance = id % config.urls.len();
                let client = Client {
                    id,
                    endpoint: Endpoint {
                        http: http.clone(),
                        base: config.urls[instance].clone(),
                        instance,
                        timeout: config.http_timeout,
                        token: config.token.clone(),
                        kinds: kinds.clone(),
                    },
                    rng: fastrand::Rng::with_seed(
                        config.seed ^ (id as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                    ),
                    locks: locks.clone(),
                    deadline,
                    budget: budget.clone(),
                    max_ops: config.max_ops.unwrap_or(usize::MAX),
                    fenced: fenced.clone(),
                    force_release_per_mille: config.force_release_per_mille,
                    ops: Vec::new(),
                    old_tokens: VecDeque::new(),
                    hot: (id >= config.clients).then(|| hot_lock.clone()),
                };
                tokio::spawn(client.run())
            })
            .collect();
        let mut ops = Vec::new();
        for task in tasks {
            ops.extend(task.await.expect("a workload client panicked"));
        }
        let mut history = History::new(ops);
        history.fenced_writes = fenced.writes();
        history.fenced_rejections = fenced.rejections();
        history.fenced_rejected = fenced.rejected();
        history
    }
}

/// Old tokens a client remembers, to validate later.
const OLD_TOKENS: usize = 8;

struct Client {
    id: usize,
    endpoint: Endpoint,
    rng: fastrand::Rng,
    locks: Arc<Vec<String>>,
    deadline: Instant,
    budget: Arc<AtomicUsize>,
    max_ops: usize,
    fenced: Arc<FencedResource>,
    force_release_per_mille: u32,
    ops: Vec<Op>,
    old_tokens: VecDeque<(String, u64)>,
    /// The lock a hot client loops on (see `WorkloadConfig::hot_clients`).
    hot: Option<String>,
}

impl Client {
    fn may_go_on(&self) -> bool {
        Instant::now() < self.deadline && self.budget.load(Ordering::Relaxed) < self.max_ops
    }

    async fn call(&mut self, lock: &str, call: Call) -> Op {
        self.budget.fetch_add(1, Ordering::Relaxed);
        let op = self.endpoint.perform(self.id, lock, call).await;
        self.ops.push(op.clone());
        op
    }

    /// Sleeps `ms`, but not past the deadline.
    async fn sleep(&self, ms: u64) {
        let left = self.deadline.saturating_duration_since(Instant::now());
        tokio::time::sleep(Duration::from_millis(ms).min(left)).await;
    }

    async fn run(mut self) -> Vec<Op> {
        while self.may_go_on() {
            self.cycle().await;
        }
        self.ops
    }

    /// Makes the `acquire` call; when granted, writes the token to the fenced resource and
    /// returns the lease and the token, and otherwise pauses 0–50 ms.
    async fn take(&mut self, lock: &str, acquire: Call) -> Option<(String, u64)> {
        let op = self.call(lock, acquire).await;
        let (true, Some(lease_id), Some(token)) = (
            op.outcome.is_ok(),
            op.outcome.lease_id.clone(),
            op.outcome.fencing_token,
        ) else {
            let pause = self.rng.u64(..=50);
            self.sleep(pause).await;
            return None;
        };
        self.write_fenced(lock, token);
        Some((lease_id, token))
    }

    /// Writes `token` to the fenced resource of `lock`, unless `lock` is a semaphore's (an
    /// election's term is written as a lock's token is).
    fn write_fenced(&self, lock: &str, token: u64) {
        if !self.endpoint.kinds.is_semaphore(lock) {
            self.fenced.write_by(self.id, lock, token);
        }
    }

    async fn hot_cycle(&mut self, lock: &str) {
        let acquire = Call::Acquire {
            owner: format!("client-{}", self.id),
            priority: 0,
            lease_ms: 1000,
            waiting_ms: Some(1500),
            forceful: false,
            cleanup_ms: 0,
            request_id: None,
            lease_id: None,
            limit: None,
        };
        let Some((lease_id, _)) = self.take(lock, acquire).await else {
            return;
        };
        let work = self.rng.u64(..=3);
        self.sleep(work).await;
        self.call(lock, Call::release(&lease_id)).await;
    }

    async fn cycle(&mut self) {
        if let Some(lock) = self.hot.clone() {
            return self.hot_cycle(&lock).await;
        }
        let lock = self.locks[self.rng.usize(..self.locks.len())].clone();
        let election = self.endpoint.kinds.is_election(&lock);
        // Elections have no admin DELETE.
        if self.rng.u32(..1000) < self.force_release_per_mille && !election {
            self.call(&lock, Call::ForceRelease).await;
            return;
        }
        let mut lease_ms = self.rng.u64(300..=2000);
        let waiting_ms = if self.rng.bool() {
            0
        } else {
            self.rng.u64(1..=1500)
        };
        let roll = self.rng.u32(..100);
        let priority = if roll < 75 { 0 } else { self.rng.u32(1..=5) };
        let forceful = roll >= 93;
        let cleanup_ms = if self.rng.bool() {
            0
        } else {
            self.rng.u64(1..=300)
        };
        let semaphore = self.endpoint.kinds.is_semaphore(&lock);
        let acquire = Call::Acquire {
            owner: format!("client-{}", self.id),
            priority,
            lease_ms,
            waiting_ms: Some(waiting_ms),
            forceful,
            cleanup_ms,
            request_id: None,
            lease_id: None,
            limit: semaphore.then_some(SEMAPHORE_LIMIT),
        };
        let Some((lease_id, token)) = self.take(&lock, acquire).await else {
            return;
        };
        let mut lost = false;
        for _ in 0..self.rng.u32(..=3) {
            let pause = self.rng.u64(lease_ms / 8..=lease_ms / 3);
            self.sleep(pause).await;
            if !self.may_go_on() {
                break;
            }
            if self.rng.u32(..10) < 3 {
                self.call(&lock, Call::validate(token)).await;
            }
            let new_length = self.rng.bool().then(|| self.rng.u64(300..=2000));
            let renew = Call::Renew {
                lease_id: lease_id.clone(),
                lease_ms: new_length,
                strict: election,
            };
            let op = self.call(&lock, renew).await;
            match op.outcome.status {
                Some(200) => {
                    self.write_fenced(&lock, token);
                    lease_ms = new_length.unwrap_or(lease_ms);
                }
                Some(409) => {
                    lost = true;
                    break;
                }
                _ => {}
            }
        }
        if !self.old_tokens.is_empty() && self.rng.u32(..10) == 0 {
            let (old_lock, old_token) =
                self.old_tokens[self.rng.usize(..self.old_tokens.len())].clone();
            self.call(&old_lock, Call::validate(old_token)).await;
        }
        if self.old_tokens.len() == OLD_TOKENS {
            self.old_tokens.pop_front();
        }
        self.old_tokens.push_back((lock.clone(), token));
        if lost {
            return;
        }
        let work = self.rng.u64(..=lease_ms / 4);
        self.sleep(work).await;
        if self.rng.u32(..100) < 15 && self.may_go_on() {
            return; // the lease lapses
        }
        self.call(&lock, Call::release(&lease_id)).await;
    }
}

/// After the faults have healed: every lock (every permit of each semaphore of `kinds`,
/// held at once; each election of `kinds`, by a campaign and a resignation), all of which
/// `locks` lists, can be taken (waiting out leases the workload left) and released, on
/// every instance, within `within` in all. Returns one line per (lock, instance) that
/// failed.
pub async fn liveness_probe(
    urls: &[String],
    locks: &[String],
    kinds: &Kinds,
    within: Duration,
) -> Vec<String> {
    let http = workload_http();
    let deadline = Instant::now() + within;
    let kinds = Arc::new(kinds.clone());
    let probes = locks
        .iter()
        .map(|lock| probe_lock(&http, urls, lock, &kinds, deadline, within));
    futures::future::join_all(probes)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// Takes and releases `lock` on each instance in turn.
async fn probe_lock(
    http: &reqwest::Client,
    urls: &[String],
    lock: &str,
    kinds: &Arc<Kinds>,
    deadline: Instant,
    within: Duration,
) -> Vec<String> {
    const GRACE: Duration = Duration::from_secs(2);
    let mut failures = Vec::new();
    for (instance, url) in urls.iter().enumerate() {
        let mut endpoint = Endpoint {
            http: http.clone(),
            base: url.clone(),
            instance,
            timeout: GRACE,
            token: None,
            kinds: kinds.clone(),
        };
        let mut last = "no attempt (out of time)".to_owned();
        // Every permit of a semaphore, held at once: its lapsed permits are taken over too.
        let semaphore = kinds.is_semaphore(lock);
        let permits = if semaphore { SEMAPHORE_LIMIT } else { 1 };
        let mut leases = Vec::new();
        while leases.len() < permits as usize && Instant::now() < deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            let wait = left.min(Duration::from_secs(5));
            endpoint.timeout = wait + GRACE;
            let mut call = Call::acquire("liveness-probe", 0, 5000);
            if let Call::Acquire {
                waiting_ms, limit, ..
            } = &mut call
            {
                *waiting_ms = Some((wait.as_millis() as u64).max(1));
                *limit = semaphore.then_some(SEMAPHORE_LIMIT);
            }
            let op = endpoint.perform(usize::MAX, lock, call).await;
            last = op.outcome.label();
            match (op.outcome.is_ok(), op.outcome.lease_id) {
                (true, Some(id)) => leases.push(id),
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
        if leases.len() < permits as usize {
            failures.push(format!(
                "lock {lock} on instance {instance} ({url}): {} of {permits} not taken within \
                 {within:?}; last answer {last}",
                permits as usize - leases.len()
            ));
        }
        endpoint.timeout = GRACE;
        for lease in leases {
            let mut released = false;
            while !released && Instant::now() < deadline + GRACE {
                let op = endpoint
                    .perform(usize::MAX, lock, Call::release(&lease))
                    .await;
                last = op.outcome.label();
                released = op.outcome.is_ok();
                if !released {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
            if !released {
                failures.push(format!(
                    "lock {lock} on instance {instance} ({url}): taken but not released; \
                     last answer {last}"
                ));
            }
        }
    }
    failures
}
