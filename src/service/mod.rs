//! The lock service: reads a record, asks the engine what to do, performs the one conditional
//! write it names, and retries from the read when the record changed underneath.
//!
//! It also owns the I/O-shaped safety rules: a write whose answer was lost is judged by
//! re-reading (never by guessing), a grant made for a caller who went away is undone, and a
//! waiting caller who leaves takes its queue entry and requestor slot with it.
//!
//! Keeps (DESIGN.md, "Invariants") I1 (`clock` gives the rules the skew margin) and I8
//! (`round_deadline`, `settle_by`, `MAX_ROUNDS`); the read-only calls are in `inspect`.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::engine;
use crate::model::{FencingToken, LockName, UnixMillis};
use crate::record::{Holder, LockRecord};
use crate::store::{LockStore, Stored, Version};
use crate::waiter::Waiter;
use reading::Read;

mod acquire;
mod answer;
mod cache;
pub mod events;
pub mod feed;
mod gc;
mod group_commit;
pub mod hints;
mod inspect;
mod joining;
mod leaving;
mod local;
mod outcome;
pub mod queue_view;
mod reading;
mod reconcile;
mod release;
mod renew;
mod replies;
mod round;
mod seams;
mod turns;
mod waiting;

use crate::metrics::Metrics;
pub use answer::{AcquireOutcome, Granted, LockSnapshot, Refusal, ServiceError};
use events::{EventKind, EventSink, LockEvent};
pub use hints::{Hint, Hints};
pub use seams::{Planted, Seams, WallClock};

/// How many store timeouts the rounds of one call may take in all (`round_deadline`).
const ROUNDS_WITHIN: u32 = 3;

/// How many times one call re-reads after losing a race before giving up.
const MAX_ROUNDS: usize = 64;

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
    /// What this service's names are: locks, or elections (for the webhooks' types).
    resource: crate::resource::Resource,
    /// With the `one-writer` hint: a semaphore's releases on this instance take turns
    /// (see `turns`).
    turns: Option<turns::Turns>,
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
    pub hints: Hints,
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
        margin_ms: clock.max_skew_ms,
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

/// The token of `lease_id`'s grant in `record`.
fn token_of(record: &LockRecord, lease_id: &crate::model::LeaseId) -> FencingToken {
    engine::holder_with_lease(record, lease_id)
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
        let local = Arc::new(local::LocalWaiters::new(timing.hints.in_process));
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
            cache: cache::RecordCache::new(store_timeout, timing.hints),
            local,
            joins: group_commit::JoinBatches::new(timing.join_window),
            head_grace: timing.head_grace,
            audit: Arc::new(crate::audit::AuditLog::Tracing),
            wall: seams.wall,
            planted: seams.planted,
            resource: crate::resource::Resource::Lock,
            turns: timing.hints.one_writer.then(turns::Turns::new),
        }
    }

    /// Where the audit trail goes (stderr, through tracing, unless set).
    pub fn with_audit(mut self, audit: Arc<crate::audit::AuditLog>) -> Self {
        self.audit = audit;
        self
    }

    /// Keeps elections rather than locks: the rules are the lock's, the webhooks' types
    /// and data say `election`.
    pub fn for_elections(mut self) -> Self {
        self.resource = crate::resource::Resource::Election;
        self
    }

    /// Keeps semaphores rather than locks: the rules are the lock's over up to `limit`
    /// holders (I18), the webhooks' types say `semaphore`.
    pub fn for_semaphores(mut self) -> Self {
        self.resource = crate::resource::Resource::Semaphore;
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

    /// Tells `holder` (if any) of `kind`; `record` says who requests (the requestor slot).
    fn emit(
        &self,
        kind: EventKind,
        name: &LockName,
        holder: Option<&Holder>,
        record: &LockRecord,
        caused_at: Instant,
    ) {
        let Some(holder) = holder.cloned() else {
            return;
        };
        if holder.notify_url.is_none() {
            return;
        }
        let requestor = record.requestor.clone();
        let cleanup_deadline = requestor.as_ref().and_then(|r| r.cleanup_deadline);
        self.events.emit(LockEvent {
            kind,
            resource: self.resource,
            lock: name.clone(),
            holder,
            requestor,
            cleanup_deadline,
            caused_at,
        });
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
