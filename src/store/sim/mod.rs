//! A simulated ZooKeeper that fails on purpose, for the deterministic simulation
//! (`tests/simulation/`). Nothing in the service uses it.
//!
//! One [`World`] is the ensemble: the leader's state is a [`MemoryStore`], and every state
//! it passes through is kept for a while. Each service instance talks to it through its own
//! [`SimStore`], which stands for that instance's session and the server it is connected to.
//! A seeded generator picks, for every request, what goes wrong, as ZooKeeper can:
//!
//! - a request is refused (`Unavailable`: nothing changed);
//! - a write's answer is lost, whether it landed or not (`OutcomeUnknown`);
//! - a write lands late, after its answer was lost, within [`Faults::late_max`] (the
//!   landing window the service's collector relies on), unless its session ended first;
//! - a read is served by a follower that lags: an older state, but never older than one the
//!   session has seen (its own writes, a `sync`, a watch that fired);
//! - the session expires: its queue entries vanish, and writes planned on it are refused;
//! - a watch or a change notice comes late.
//!
//! A session's writes land in the order they were sent, as on ZooKeeper: a write sent after
//! a late one waits for it. Run on a current-thread runtime with a paused clock, a seed
//! replays the same faults at the same points.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::broadcast;
use tokio::time::Instant;

use super::memory::MemoryStore;
use super::{Change, HandOff, StoreError, Version, WriteOutcome, FEED_CAPACITY};
use crate::model::LockName;
use crate::record::LockRecord;
use crate::waiter::{Ticket, Waiter};

/// How many past states a lagging follower may serve from.
const KEPT_STATES: usize = 64;

/// How often each fault strikes: a probability per request, and the longest delays.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Faults {
    pub unavailable: f64,
    /// A write is not applied, and its answer is lost.
    pub lost_before: f64,
    /// A write is applied, and its answer is lost.
    pub lost_after: f64,
    /// A write's answer is lost, and it lands up to `late_max` later.
    pub late: f64,
    pub late_max: Duration,
    /// A read is served from an older state, at most `max_lag` old.
    pub stale: f64,
    pub max_lag: Duration,
    /// The session expires (checked on each request).
    pub expiry: f64,
    /// The longest delay of a watch or a change notice.
    pub notice_max: Duration,
    /// The longest time a request takes.
    pub latency_max: Duration,
}

impl Faults {
    /// A store that never fails, with requests that still take time.
    pub fn none() -> Faults {
        Faults {
            unavailable: 0.0,
            lost_before: 0.0,
            lost_after: 0.0,
            late: 0.0,
            late_max: Duration::ZERO,
            stale: 0.0,
            max_lag: Duration::ZERO,
            expiry: 0.0,
            notice_max: Duration::ZERO,
            latency_max: Duration::from_millis(2),
        }
    }
}

/// What happens to one write.
#[derive(Debug)]
enum Fate {
    Answered,
    Refused,
    LostBefore,
    LostAfter,
    Late(Duration),
}

/// The ensemble: the leader's state, its recent past, and the generator every fault is
/// drawn from.
pub struct World {
    leader: MemoryStore,
    born: Instant,
    inner: Mutex<WorldInner>,
}

struct WorldInner {
    rng: fastrand::Rng,
    faults: Faults,
    /// Frozen copies of the last states, each with when it was made; `states[0]` is state
    /// number `first`.
    states: VecDeque<(Instant, Arc<MemoryStore>)>,
    first: usize,
    next_session: i64,
    /// Print every write and its fate (to replay a seed).
    trace: bool,
}

impl WorldInner {
    fn latest(&self) -> usize {
        self.first + self.states.len() - 1
    }

    /// The oldest state a follower may still serve: one that was the leader's within the
    /// last `max_lag`. (ZooKeeper drops a follower that falls further behind.)
    fn oldest_served(&self) -> usize {
        let since = Instant::now().checked_sub(self.faults.max_lag);
        let mut oldest = self.latest();
        while oldest > self.first {
            let replaced_at = self.states[oldest - self.first].0;
            if since.is_none_or(|since| replaced_at < since) {
                break;
            }
            oldest -= 1;
        }
        oldest
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.rng.f64() < p
    }

    fn upto(&mut self, max: Duration) -> Duration {
        let ms = u64::try_from(max.as_millis()).unwrap_or(u64::MAX);
        Duration::from_millis(self.rng.u64(0..=ms))
    }
}

impl World {
    pub fn new(seed: u64, faults: Faults) -> Arc<World> {
        let leader = MemoryStore::new();
        let first_state = Arc::new(leader.frozen_copy());
        Arc::new(World {
            leader,
            born: Instant::now(),
            inner: Mutex::new(WorldInner {
                rng: fastrand::Rng::with_seed(seed),
                faults,
                states: VecDeque::from([(Instant::now(), first_state)]),
                first: 0,
                next_session: 1,
                trace: false,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, WorldInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Changes the faults from now on (a test heals the world before its final checks).
    pub fn set_faults(&self, faults: Faults) {
        self.lock().faults = faults;
    }

    /// Prints every write, its session and its fate, on the simulation's clock.
    pub fn trace(&self, on: bool) {
        self.lock().trace = on;
    }

    /// The leader's state as it is now: what a final check reads.
    pub fn leader(&self) -> &MemoryStore {
        &self.leader
    }

    /// A session (a service instance's connection) to this world.
    pub fn connect(self: &Arc<World>) -> SimStore {
        let mut inner = self.lock();
        let session = inner.next_session;
        inner.next_session += 1;
        let view = inner.latest();
        drop(inner);
        SimStore {
            world: self.clone(),
            me: Arc::new(Mutex::new(Session {
                id: session,
                view,
                entries: Vec::new(),
                late_until: None,
            })),
            feed: broadcast::channel(FEED_CAPACITY).0,
            relay: Mutex::new(None),
        }
    }

    /// Keeps the leader's state after a change, for followers to lag behind on.
    fn changed(&self) {
        let copy = Arc::new(self.leader.frozen_copy());
        let mut inner = self.lock();
        inner.states.push_back((Instant::now(), copy));
        if inner.states.len() > KEPT_STATES {
            inner.states.pop_front();
            inner.first += 1;
        }
    }
}

/// A session's own state: its id, the newest state it has seen, and the queue entries it
/// made (which vanish with it).
struct Session {
    id: i64,
    view: usize,
    entries: Vec<(LockName, Waiter)>,
    /// When the last late write of this session lands: later writes land after it.
    late_until: Option<Instant>,
}

/// One instance's session with the [`World`].
pub struct SimStore {
    world: Arc<World>,
    me: Arc<Mutex<Session>>,
    feed: broadcast::Sender<Change>,
    relay: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Drop for SimStore {
    fn drop(&mut self) {
        if let Some(relay) = self.relay.lock().unwrap_or_else(|e| e.into_inner()).take() {
            relay.abort();
        }
    }
}

/// A write, so that a late one can be applied later.
#[derive(Debug)]
enum Write {
    Create(LockName, LockRecord),
    Update(LockName, LockRecord, Version),
    Fence(LockName, Version),
    Delete(LockName, Version),
    Enqueue(LockName, Ticket),
    Leave(LockName, Waiter),
    HandOff(LockName, LockRecord, Option<Version>, Waiter, Vec<Ticket>),
}

/// What an applied write answered.
enum Applied {
    Outcome(WriteOutcome),
    Entry(Waiter),
    Left(bool),
    HandOff(HandOff),
}

fn unknown() -> StoreError {
    StoreError::OutcomeUnknown("simulated: the answer was lost".into())
}

fn refused() -> StoreError {
    StoreError::Unavailable("simulated: the server refused the request".into())
}

fn lock_of(session: &Mutex<Session>) -> MutexGuard<'_, Session> {
    session.lock().unwrap_or_else(|e| e.into_inner())
}

mod lockstore;
mod session;
use lockstore::apply;
