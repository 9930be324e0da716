//! One simulated run: instances of the real service (engine, service, collector, hints, the
//! event hub) on a [`World`] that fails on purpose, clients calling them concurrently, all on
//! a current-thread runtime whose paused clock the simulation controls. The run's history
//! goes to the project's checker, with what the store holds at the end.

use std::sync::Arc;
use std::time::Duration;

use lockwarden::api::error::ApiError;
use lockwarden::audit::Actor;
use lockwarden::engine::AcquireRequest;
use lockwarden::metrics::Metrics;
use lockwarden::model::{LeaseId, LockName, Owner, Priority, RequestId, UnixMillis};
use lockwarden::service::events::NoEvents;
use lockwarden::service::{
    AcquireOutcome, Hints, LockService, Planted, Seams, ServiceError, Timing, WallClock,
};
use lockwarden::store::sim::{Faults, World};
use lockwarden::store::{Fresh, ListQuery, LockStore};
use tokio::time::Instant;

use crate::common::history::{check, Call, CheckConfig, History, Op, Outcome, Report};
use lockwarden::store::Reads;

/// The unix time at which every simulated run starts.
const EPOCH_MS: i64 = 1_800_000_000_000;
const STORE_TIMEOUT: Duration = Duration::from_millis(500);
const MAX_SKEW_MS: u64 = 200;
const GC_DELAY: Duration = Duration::from_secs(3);
/// Far longer than the delay, as in production (10 minutes against 15 s): each instance's
/// sweep fences every free record it finds, and sweeps closer than the delay keep
/// re-fencing what another instance fenced, so that nothing is ever deleted.
const SWEEP_EVERY: Duration = Duration::from_secs(20);

/// What one run is made of.
#[derive(Clone, Debug)]
pub struct Setup {
    pub instances: usize,
    pub clients: usize,
    pub locks: usize,
    pub ops_per_client: usize,
    pub faults: Faults,
    pub planted: Planted,
    /// Every performance hint on, or every one off.
    pub hints: bool,
    /// Print every store write and its fate.
    pub trace: bool,
}

impl Setup {
    pub fn new(faults: Faults) -> Setup {
        Setup {
            instances: 3,
            clients: 5,
            locks: 3,
            ops_per_client: 10,
            faults,
            planted: Planted::default(),
            hints: true,
            trace: false,
        }
    }
}

/// The faults a run is judged under: every kind, often enough to meet in a short run.
pub fn harsh() -> Faults {
    Faults {
        unavailable: 0.02,
        lost_before: 0.02,
        lost_after: 0.03,
        late: 0.02,
        late_max: Duration::from_millis(400),
        stale: 0.3,
        max_lag: Duration::from_millis(200),
        expiry: 0.002,
        notice_max: Duration::from_millis(20),
        latency_max: Duration::from_millis(3),
    }
}

pub struct Run {
    pub history: History,
    pub report: Report,
}

/// Runs seed `seed` of `setup` to the end, and checks it.
pub fn run(seed: u64, setup: &Setup) -> Run {
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_time().start_paused(true);
    // tokio's own randomness (which receiver of a `watch` channel wakes first) from the seed
    // too: otherwise two tasks woken at one instant run in either order (.cargo/config.toml).
    #[cfg(tokio_unstable)]
    builder.rng_seed(tokio::runtime::RngSeed::from_bytes(&seed.to_le_bytes()));
    let runtime = builder.build().expect("a runtime");
    let history = runtime.block_on(simulate(seed, setup.clone()));
    drop(runtime);
    let config = CheckConfig {
        offsets: offsets(seed, setup.instances),
        tolerance_ms: 1,
        max_skew_ms: MAX_SKEW_MS as i64,
        unknown_window_ms: 5_000,
        answer_within_ms: Some(4 * STORE_TIMEOUT.as_millis() as i64),
        ..CheckConfig::default()
    };
    let report = check(&history, &config);
    Run { history, report }
}

/// How far each instance's wall clock runs ahead of the simulation's: within the skew the
/// services are configured to allow.
fn offsets(seed: u64, instances: usize) -> Vec<i64> {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x5eed);
    (0..instances)
        .map(|_| rng.i64(0..=MAX_SKEW_MS as i64))
        .collect()
}

/// Shared by the clients of one run.
pub struct Ctx {
    services: Vec<Arc<LockService>>,
    locks: Vec<LockName>,
    start: Instant,
}

impl Ctx {
    /// The simulation's clock, in unix ms.
    fn now_ms(&self) -> i64 {
        EPOCH_MS + self.start.elapsed().as_millis() as i64
    }

    fn ceil_ms(&self) -> i64 {
        EPOCH_MS + self.start.elapsed().as_nanos().div_ceil(1_000_000) as i64
    }
}

async fn simulate(seed: u64, setup: Setup) -> History {
    let world = World::new(seed, setup.faults);
    world.trace(setup.trace);
    let start = Instant::now();
    let timing = Timing {
        store_timeout: STORE_TIMEOUT,
        gc_delay: GC_DELAY,
        gc_sweep_every: SWEEP_EVERY,
        max_clock_skew_ms: MAX_SKEW_MS,
        max_waiters_per_lock: 8,
        max_waiting_calls: 64,
        join_window: Duration::from_millis(if setup.hints { 10 } else { 0 }),
        head_grace: Duration::from_millis(if setup.hints { 5 } else { 0 }),
        hints: if setup.hints {
            Hints::ALL_ON
        } else {
            Hints::ALL_OFF
        },
    };
    let services = offsets(seed, setup.instances)
        .into_iter()
        .map(|offset| {
            let wall = WallClock::new(move || {
                UnixMillis(EPOCH_MS + offset + start.elapsed().as_millis() as i64)
            });
            let seams = Seams {
                wall,
                planted: setup.planted,
            };
            let store: Arc<dyn LockStore> = Arc::new(world.connect());
            Arc::new(LockService::with_seams(
                store,
                timing,
                Arc::new(NoEvents),
                Arc::new(Metrics::new()),
                seams,
            ))
        })
        .collect();
    let locks = (0..setup.locks)
        .map(|i| LockName::parse(&format!("sim/l{i}")).unwrap())
        .collect();
    let ctx = Arc::new(Ctx {
        services,
        locks,
        start,
    });
    let mut clients = Vec::new();
    for client in 0..setup.clients {
        let rng = fastrand::Rng::with_seed(seed.wrapping_mul(31).wrapping_add(client as u64));
        let ops = setup.ops_per_client;
        clients.push(tokio::spawn(crate::clients::client(
            ctx.clone(),
            client,
            rng,
            ops,
        )));
    }
    let mut ops = Vec::new();
    for client in clients {
        ops.extend(client.await.expect("a client task"));
    }
    // Heal, and wait out every lease, the landing window, a sweep, and the collector's two
    // phases after it.
    world.set_faults(Faults::none());
    tokio::time::sleep_until(start + SWEEP_EVERY * 2).await;
    let mut history = History::new(ops);
    history.leftovers = leftovers(&world, &ctx.locks).await;
    history
}

/// Free records and queue entries still in the store.
async fn leftovers(world: &World, locks: &[LockName]) -> Vec<String> {
    let store = world.leader();
    let deadline = Instant::now() + STORE_TIMEOUT;
    let mut left = Vec::new();
    let query = ListQuery {
        prefix: String::new(),
        after: None,
        limit: 1000,
        free: true,
        within: None,
    };
    for (name, _) in store.list(&query, deadline).await.unwrap().locks {
        let stored = store.read(&name, Fresh::Any, deadline).await.unwrap();
        left.push(format!("{name}: a free record {stored:?}"));
    }
    for name in locks {
        for waiter in store.queue(name, deadline).await.unwrap() {
            left.push(format!("{name}: queue entry {}", waiter.id));
        }
    }
    left
}

/// Calls an instance, and records the call as an op.
pub struct Caller {
    ctx: Arc<Ctx>,
    pub client: usize,
    /// Every choice the client makes comes from here.
    pub rng: fastrand::Rng,
}

impl Caller {
    pub fn new(ctx: Arc<Ctx>, client: usize, rng: fastrand::Rng) -> Caller {
        Caller { ctx, client, rng }
    }

    pub fn locks(&self) -> usize {
        self.ctx.locks.len()
    }

    pub fn instances(&self) -> usize {
        self.ctx.services.len()
    }

    /// Makes `call` on `instance`; a client that gives up after `patience` records no answer.
    pub async fn call(
        &mut self,
        instance: usize,
        lock: usize,
        call: Call,
        patience: Duration,
    ) -> Op {
        let service = self.ctx.services[instance].clone();
        let name = self.ctx.locks[lock].clone();
        let invoke_ms = self.ctx.now_ms();
        let fresh = LeaseId::from_random_bytes(std::array::from_fn(|_| self.rng.u8(..)));
        let answer = tokio::time::timeout(patience, perform(&service, &name, &call, fresh));
        let outcome = answer.await.unwrap_or_else(|_| Outcome {
            error: Some("timeout".into()),
            ..Outcome::default()
        });
        Op {
            id: 0,
            client: self.client,
            instance,
            lock: name.to_string(),
            call,
            invoke_ms,
            complete_ms: self.ctx.ceil_ms(),
            outcome,
        }
    }
}

async fn perform(
    service: &Arc<LockService>,
    name: &LockName,
    call: &Call,
    fresh: LeaseId,
) -> Outcome {
    let actor = Actor {
        role: "api",
        ..Actor::default()
    };
    match call {
        Call::Acquire {
            owner,
            priority,
            lease_ms,
            waiting_ms,
            forceful,
            cleanup_ms,
            request_id,
            lease_id,
            limit,
        } => {
            let request = AcquireRequest {
                owner: Owner::parse(owner).unwrap(),
                lease_ms: *lease_ms,
                message: String::new(),
                priority: Priority::new(i64::from(*priority)).unwrap(),
                cleanup_ms: *cleanup_ms,
                waiting_ms: *waiting_ms,
                forceful: *forceful,
                notify_url: None,
                request_id: request_id.as_deref().map(|r| RequestId::parse(r).unwrap()),
                request_digest: format!("{owner}/{priority}/{lease_ms}/{waiting_ms:?}"),
                lease_id: lease_id.as_deref().map(|l| LeaseId::parse(l).unwrap()),
                limit: *limit,
                actor,
            };
            let new_lease = new_lease(request_id.as_deref(), fresh);
            acquired(service.acquire(name.clone(), request, new_lease).await)
        }
        Call::Renew {
            lease_id,
            lease_ms,
            strict,
        } => {
            let lease = LeaseId::parse(lease_id).unwrap();
            let renewal = lockwarden::engine::Renewal {
                lease_ms: *lease_ms,
                message: None,
                strict: *strict,
            };
            match service.renew(name, &lease, &renewal).await {
                Ok(lock) => {
                    // The renewed permit (a lock's one holder).
                    let mine = (lock.record.holders.iter()).find(|h| h.lease_id == Some(lease));
                    Outcome {
                        status: Some(200),
                        fencing_token: mine.and_then(|h| h.fencing_token).map(|t| t.0),
                        expires_at: mine.and_then(expiry),
                        ..Outcome::default()
                    }
                }
                Err(error) => failed(error),
            }
        }
        Call::Release { lease_id } => {
            let lease = LeaseId::parse(lease_id).unwrap();
            done(service.release(name, &lease).await.map(|_| ()))
        }
        Call::Validate { fencing_token } => {
            let token = lockwarden::model::FencingToken(*fencing_token);
            match service.validate(name, token).await {
                Ok(current) => Outcome {
                    status: Some(200),
                    current: Some(current),
                    ..Outcome::default()
                },
                Err(error) => failed(error),
            }
        }
        Call::ForceRelease => done(service.force_release(name, &actor, None).await.map(|_| ())),
    }
}

/// The lease a fresh grant gets: random, or derived from the request id, so that a retry
/// of the same request is offered the same lease (as the API's seal does).
fn new_lease(request_id: Option<&str>, fresh: LeaseId) -> LeaseId {
    let Some(id) = request_id else {
        return fresh;
    };
    let mut bytes = [0u8; 16];
    for (i, b) in id.bytes().enumerate() {
        bytes[i % 16] = bytes[i % 16].wrapping_mul(31).wrapping_add(b);
    }
    LeaseId::from_random_bytes(bytes)
}

fn expiry(holder: &lockwarden::record::Holder) -> Option<i64> {
    match holder.expires {
        lockwarden::record::Expiry::At(at) => Some(at.0),
        lockwarden::record::Expiry::Never => None,
    }
}

fn acquired(outcome: AcquireOutcome) -> Outcome {
    match outcome {
        Ok(granted) => {
            // The caller's permit (a lock's one holder).
            let holder =
                (granted.lock.record.holders.iter()).find(|h| h.lease_id == Some(granted.lease_id));
            Outcome {
                status: Some(200),
                acquired: Some(true),
                lease_id: Some(granted.lease_id.to_string()),
                fencing_token: Some(granted.fencing_token.0),
                expires_at: holder.and_then(expiry),
                acquired_at: holder.and_then(|h| h.acquired_at).map(|at| at.0),
                priority: holder.map(|h| h.priority),
                ..Outcome::default()
            }
        }
        Err(error) => failed(error),
    }
}

fn done(result: Result<(), ServiceError>) -> Outcome {
    match result {
        Ok(()) => Outcome {
            status: Some(200),
            ..Outcome::default()
        },
        Err(error) => failed(error),
    }
}

/// An error as the API answers it: its status and code.
fn failed(error: ServiceError) -> Outcome {
    let answer = ApiError::from(error);
    Outcome {
        status: Some(answer.code.status().as_u16()),
        error: Some(answer.code.as_str().to_owned()),
        ..Outcome::default()
    }
}
