//! The lock service: reads a record, asks the engine what to do, performs the one conditional
//! write it names, and retries from the read when the record changed underneath.
//!
//! It also owns the I/O-shaped safety rules: a write whose answer was lost is judged by
//! re-reading (never by guessing), a grant made for a caller who went away is undone, and a
//! waiting caller who leaves takes its queue entry and requestor slot with it.
//!
//! Keeps (DESIGN.md, "Invariants") I1 (`clock` gives the rules the skew margin), I3 (`validate`
//! after a `sync`), I4 (`get` with an owner reads the latest copy) and I8 (`round_deadline`,
//! `settle_by`, `MAX_ROUNDS`).

use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use tokio::time::Instant;

use crate::engine;
use crate::model::{FencingToken, LeaseId, LockName, UnixMillis};
use crate::record::LockRecord;
use crate::store::{Fresh, ListQuery, LockStore, StoreError, Stored, Version};
use crate::waiter::Waiter;
use reading::Read;

mod acquire;
mod cache;
pub mod events;
pub mod feed;
mod gc;
mod group_commit;
mod joining;
mod leaving;
mod local;
mod outcome;
pub mod queue_view;
mod reading;
mod reconcile;
mod release;
mod replies;
mod round;
mod seams;
mod waiting;

use crate::metrics::Metrics;
use events::{EventKind, EventSink, LockEvent};
pub use seams::{Planted, Seams, WallClock};

/// How many store timeouts the rounds of one call may take in all (`round_deadline`).
const ROUNDS_WITHIN: u32 = 3;

/// How many times one call re-reads after losing a race before giving up.
const MAX_ROUNDS: usize = 64;

/// The most queue reads one listing has in flight at once (see `LockService::list`): enough
/// to overlap their round trips, few enough that a page of a thousand queued locks does not
/// put a thousand requests at once ahead of every other call on the session.
const QUEUE_READS_AT_ONCE: usize = 32;

/// A lock as read at one instant; the API renders it as LockInfo.
#[derive(Clone, Debug)]
pub struct LockSnapshot {
    pub name: LockName,
    /// The record, with a void requestor (one whose waiter has gone) removed.
    pub record: LockRecord,
    pub read_at: UnixMillis,
    /// When the lock may be taken over, while its lease has ended but is within the
    /// takeover margin (`engine::Clock::pending_takeover`).
    pub takeover_at: Option<UnixMillis>,
    pub waiters: u64,
}

#[derive(Clone, Debug)]
pub struct Granted {
    pub lease_id: LeaseId,
    pub fencing_token: FencingToken,
    pub lock: LockSnapshot,
    /// This call created the grant (rather than renewing or repeating one).
    pub fresh: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// `retry_at`: when asking again can be expected to take the lock (`engine::retry_at`).
    LockHeld {
        retry_at: Option<UnixMillis>,
    },
    NotOwner,
    /// The name is the parent of existing nested locks.
    NameConflict,
    CleanupTimeout,
    Superseded,
    WaitTimeout,
    /// The grant this call made has ended before its answer: a retry of a request_id whose
    /// lease has ended since, or a waiter handed the lock and preempted (or force released)
    /// before it heard.
    LeaseEnded,
    /// The lock's queue holds `--max-waiters-per-lock` callers already.
    TooManyWaiters,
}

#[derive(Clone, Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("refused: {refusal:?}")]
    Refused {
        refusal: Refusal,
        lock: Box<LockSnapshot>,
    },
    #[error("request_id was used before with a different request")]
    RequestIdReused,
    /// This instance has `--max-waiting-calls` calls waiting already.
    #[error("too many waiting calls")]
    TooManyWaiting,
    #[error("store unavailable: {0}")]
    StoreUnavailable(String),
}

impl From<StoreError> for ServiceError {
    fn from(error: StoreError) -> Self {
        ServiceError::StoreUnavailable(error.to_string())
    }
}

pub type AcquireOutcome = Result<Granted, ServiceError>;

/// What an acquire can do at once. (Boxing the outcome would cost an allocation on the hot
/// path to save stack space in a value that lives for one call.)
#[allow(clippy::large_enum_variant)]
enum Immediate {
    Done(AcquireOutcome),
    /// The caller must join the lock's queue (to wait, or to preempt).
    MustWait(WaitBasis),
}

/// What the decision to wait was made on. (Not boxed for the reason `Immediate` is not.)
#[allow(clippy::large_enum_variant)]
enum WaitBasis {
    /// The record as read, which also decides whether joining must mark the record.
    Read(Option<Stored>),
    /// The record this instance wrote last, not read again: whether it is current is
    /// known only once a hand-off conditional on it lands (see `group_commit`).
    Remembered,
}

pub struct LockService {
    store: Arc<dyn LockStore>,
    store_timeout: Duration,
    replies: replies::ReplyCache,
    events: Arc<dyn EventSink>,
    pub metrics: Arc<Metrics>,
    cache: cache::RecordCache,
    local: Arc<local::LocalWaiters>,
    joins: group_commit::JoinBatches,
    /// See `joining::await_release_here`.
    head_grace: Duration,
    collector: gc::Collector,
    reconciler: reconcile::Reconciler,
    max_clock_skew_ms: u64,
    max_waiters_per_lock: usize,
    /// One permit per call that waits in a queue on this instance.
    waiting_calls: Arc<tokio::sync::Semaphore>,
    max_waiting_calls: usize,
    /// The source of the event streams.
    pub feed: feed::Hub,
    audit: Arc<crate::audit::AuditLog>,
    /// The wall clock leases are judged by.
    wall: WallClock,
    planted: Planted,
}

/// The service's time limits and capacities (see `ServeArgs` for what each means).
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub store_timeout: Duration,
    pub gc_delay: Duration,
    pub gc_sweep_every: Duration,
    pub max_clock_skew_ms: u64,
    pub max_waiters_per_lock: usize,
    pub max_waiting_calls: usize,
    /// See `group_commit` (zero: every caller joins on its own).
    pub join_window: Duration,
    /// See `joining::await_release_here` (zero: the head watches the record at once).
    pub head_grace: Duration,
}

/// The result of trying one write.
enum Put {
    /// The record as written, and its new version.
    Landed(Box<LockRecord>, Version),
    Raced,
    NestedLocks,
}

/// The lock as read at `clock.now`, on the clock the lock rules judge it by, so that it
/// shows the takeover margin that they keep.
fn snapshot(
    name: &LockName,
    record: &LockRecord,
    queue: &[Waiter],
    clock: engine::Clock,
) -> LockSnapshot {
    let mut record = record.clone();
    if engine::live_requestor(&record, queue).is_none() {
        record.requestor = None;
    }
    LockSnapshot {
        name: name.clone(),
        takeover_at: clock.pending_takeover(&record),
        record,
        read_at: clock.now,
        waiters: queue.len() as u64,
    }
}

fn refused(
    refusal: Refusal,
    name: &LockName,
    record: &LockRecord,
    queue: &[Waiter],
    clock: engine::Clock,
) -> ServiceError {
    ServiceError::Refused {
        refusal,
        lock: Box::new(snapshot(name, record, queue, clock)),
    }
}

fn token_of(record: &LockRecord) -> FencingToken {
    record
        .holder
        .as_ref()
        .and_then(|h| h.fencing_token)
        .unwrap_or(FencingToken(0))
}

impl LockService {
    /// `timing.gc_delay` is how long a released record stays before it is deleted; it must
    /// be longer than a write can take to land (see `gc`). Must run inside a tokio runtime.
    pub fn new(
        store: Arc<dyn LockStore>,
        timing: Timing,
        events: Arc<dyn EventSink>,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self::with_seams(store, timing, events, metrics, Seams::default())
    }

    /// As [`LockService::new`], on a simulation's wall clock and with its planted bugs.
    pub fn with_seams(
        store: Arc<dyn LockStore>,
        timing: Timing,
        events: Arc<dyn EventSink>,
        metrics: Arc<Metrics>,
        seams: Seams,
    ) -> Self {
        let store_timeout = timing.store_timeout;
        let gc_timing = gc::GcTiming {
            delay: timing.gc_delay,
            store_timeout,
            sweep_every: timing.gc_sweep_every,
        };
        let collector = gc::Collector::start(store.clone(), gc_timing);
        let local: Arc<local::LocalWaiters> = Arc::default();
        let reconciler = reconcile::Reconciler::start(
            store.clone(),
            local.clone(),
            collector.clone(),
            store_timeout,
            seams.planted.skip_repair,
        );
        LockService {
            collector,
            reconciler,
            max_clock_skew_ms: timing.max_clock_skew_ms,
            max_waiters_per_lock: timing.max_waiters_per_lock,
            waiting_calls: Arc::new(tokio::sync::Semaphore::new(timing.max_waiting_calls)),
            max_waiting_calls: timing.max_waiting_calls,
            feed: feed::Hub::start(
                store.clone(),
                feed::HubSettings {
                    store_timeout,
                    reads: metrics.event_hub_reads.clone(),
                    clock: seams.wall.clone(),
                    max_clock_skew_ms: timing.max_clock_skew_ms,
                },
            ),
            store,
            store_timeout,
            replies: replies::ReplyCache::default(),
            events,
            metrics,
            // Cached versions are only used while they are younger than one request timeout,
            // which `ServeArgs::check` counts in the collector's delay.
            cache: cache::RecordCache::new(store_timeout),
            local,
            joins: group_commit::JoinBatches::new(timing.join_window),
            head_grace: timing.head_grace,
            audit: Arc::new(crate::audit::AuditLog::Tracing),
            wall: seams.wall,
            planted: seams.planted,
        }
    }

    /// Where the audit trail goes (stderr, through tracing, unless set).
    pub fn with_audit(mut self, audit: crate::audit::AuditLog) -> Self {
        self.audit = Arc::new(audit);
        self
    }

    fn deadline(&self) -> Instant {
        Instant::now() + self.store_timeout
    }

    /// The deadline of a round (a read and a conditional write) of a call that began at
    /// `began`: a store timeout of its own, so that a server answering every request slowly
    /// still serves a call of several requests, but never past `ROUNDS_WITHIN` store
    /// timeouts from the call's start, so that a call whose rounds keep failing (a server
    /// that answers reads but no write, whose writes each settle as "did not land") still
    /// ends (I8).
    fn round_deadline(&self, began: Instant) -> Instant {
        self.deadline()
            .min(began + self.store_timeout * ROUNDS_WITHIN)
    }

    /// Until when the read that settles a lost answer may wait: what is left of the call's
    /// `deadline`, unless the write ran out of it; then a store timeout of its own. A write
    /// whose answer did not come in time was given up at that deadline, so a read held to it
    /// would time out before it was sent: the caller would hear 503 for a write that may
    /// well have landed (a grant it is then never told of), every time the server is slow.
    /// An answer lost to a closed connection (the quorum gone, say) leaves the deadline as
    /// it is, so such a call still answers within the store timeout.
    fn settle_by(&self, deadline: Instant) -> Instant {
        if Instant::now() >= deadline {
            self.deadline()
        } else {
            deadline
        }
    }

    /// The clock the lock rules judge takeovers by (see `engine::Clock`).
    fn clock(&self, now: UnixMillis) -> engine::Clock {
        engine::Clock {
            now,
            max_skew_ms: if self.planted.no_skew_margin {
                0
            } else {
                self.max_clock_skew_ms
            },
        }
    }

    fn emit(&self, kind: EventKind, name: &LockName, record: &LockRecord, caused_at: Instant) {
        let Some(holder) = record.holder.clone() else {
            return;
        };
        if holder.notify_url.is_none() {
            return;
        }
        let requestor = record.requestor.clone();
        let cleanup_deadline = requestor.as_ref().and_then(|r| r.cleanup_deadline);
        self.events.emit(LockEvent {
            kind,
            lock: name.clone(),
            holder,
            requestor,
            cleanup_deadline,
            caused_at,
        });
    }

    /// The lock, as the server this instance's session is on has it, or, if `latest`, as
    /// the leader has it (a read after a `sync`): a caller asking whether it owns the lock
    /// is answered as a renew would be (see `reading`).
    pub async fn get(&self, name: &LockName, latest: bool) -> Result<LockSnapshot, ServiceError> {
        Ok(self.look(name, self.deadline(), latest).await?.0)
    }

    /// The lock as it is now, and its queue: what `get` and the queue view show.
    async fn look(
        &self,
        name: &LockName,
        deadline: Instant,
        latest: bool,
    ) -> Result<(LockSnapshot, Vec<Waiter>), ServiceError> {
        let now = self.wall.now();
        let (stored, queue) = if latest {
            self.store
                .read_with_queue(name, Fresh::Latest, deadline)
                .await?
        } else {
            let stored = self.store.read(name, Fresh::Any, deadline).await?;
            // A lock with a record may have waiters, shown too; one read of its queue.
            let queue = match &stored {
                Some(_) => self.store.queue(name, deadline).await?,
                None => Vec::new(),
            };
            (stored, queue)
        };
        let record = stored.map(|s| s.record).unwrap_or_default();
        Ok((snapshot(name, &record, &queue, self.clock(now)), queue))
    }

    pub async fn validate(
        &self,
        name: &LockName,
        token: FencingToken,
    ) -> Result<bool, ServiceError> {
        // Not from a lagging follower: after a newer grant was acknowledged to anyone, this
        // must not call an older token current.
        let current = if self.planted.stale_validate {
            self.store.read(name, Fresh::Any, self.deadline()).await?
        } else {
            self.store
                .read(name, Fresh::Latest, self.deadline())
                .await?
        };
        let record = current.map(|s| s.record).unwrap_or_default();
        Ok(engine::is_current(&record, token, self.wall.now()))
    }

    /// Held or expired locks, in name order, each with its waiters and live requestor as
    /// `get` shows them; the bool says whether more may follow. A lock's queue is read only
    /// where its record says callers may wait (`engine::may_have_waiters`), up to
    /// `QUEUE_READS_AT_ONCE` at a time: a listing of locks nobody waits for costs the one read
    /// it always did.
    pub async fn list(&self, query: &ListQuery) -> Result<(Vec<LockSnapshot>, bool), ServiceError> {
        let deadline = self.deadline();
        let page = self.store.list(query, deadline).await?;
        let reads: Vec<_> = page
            .locks
            .iter()
            .map(|(name, record)| async move {
                if engine::may_have_waiters(record) {
                    self.store.queue(name, deadline).await
                } else {
                    Ok(Vec::new())
                }
            })
            .collect();
        let queues: Vec<Vec<Waiter>> = futures::stream::iter(reads)
            .buffered(QUEUE_READS_AT_ONCE)
            .try_collect()
            .await?;
        let now = self.wall.now();
        let locks = page
            .locks
            .iter()
            .zip(&queues)
            .map(|((name, record), queue)| snapshot(name, record, queue, self.clock(now)))
            .collect();
        Ok((locks, page.more))
    }

    pub async fn ready(&self) -> Result<(), ServiceError> {
        Ok(self.store.ready(self.deadline()).await?)
    }

    /// Sets the gauges that are read off the service's state rather than kept up to date
    /// on every call (which would cost the hot path): done before each scrape.
    pub fn update_gauges(&self) {
        let waiting = self
            .max_waiting_calls
            .saturating_sub(self.waiting_calls.available_permits());
        self.metrics.waiting_calls.set(waiting as i64);
        let held = self.cache.held(self.wall.now());
        self.metrics.locks_held.set(held as i64);
        self.metrics.joins_seated.set(self.joins.seated() as i64);
    }
}
