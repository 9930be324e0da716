//! The source of the event streams: turns the store's change feed (ZooKeeper watches, so
//! changes made through any instance) into typed lock events, and keeps what a stream
//! needs to start or to resume.
//!
//! One task (the hub) does it all, in order: subscriptions, changes and expiries are
//! handled one at a time, so a new stream's snapshot and the events after it never
//! interleave, and every event is classified against the state it follows.
//!
//! - **Interests.** A stream covers one lock or a name prefix. The hub reads a changed lock
//!   (its record and queue) only if some stream covers it, and watches ZooKeeper only while
//!   some stream is open (and for [`LINGER`] after the last one closes, so that a client
//!   that reconnects can resume).
//! - **Ids.** An event's id is the zxid of the write it reports (the record's `mzxid`).
//!   Queue and expiry events, which have no write of their own to name, and changes read
//!   out of order, take the last id with a sequence suffix (`zxid.n`), so ids only grow.
//! - **Resuming.** Recent events are kept ([`RING`]). A client that presents the id of the
//!   last event it saw gets what followed, if that event is still kept and its interest has
//!   been covered since (so nothing that followed is missing); otherwise it gets a fresh
//!   snapshot.
//! - **Expiry.** `expired` is sent when a lease runs out on this instance's clock, whether or
//!   not anybody touches the lock: once per lease. Each lease end the hub reads is armed
//!   once, and a read never arms one again (see [`LeaseEnd`]); a lease that has already run
//!   out when first read is told at once, or, in a snapshot, shown as `expired`. The hub
//!   reads the lock once when an armed end comes, so that a renewal it has not heard of yet
//!   is not reported as an expiry.
//! - **Turns.** The hub handles one thing a turn (a command, one lease end, or the changes
//!   already queued, at most 32) and then selects again, so no run of expiries or changes
//!   keeps a new stream waiting. Its store reads are counted in
//!   `lockwarden_event_hub_reads_total`. DESIGN.md, "The event hub", has its rules.
//! - **Lifetime.** The task ends when the [`Hub`] handle and every stream it opened are gone.
//!
//! Keeps I14 (DESIGN.md, "Invariants"), with `hub`, `expiry`, `classify` and `id`; a stream that
//! falls `STREAM_BUFFER` events behind is closed, not buffered.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use prometheus::IntCounter;
use tokio::sync::{broadcast, mpsc, oneshot};
use tracing::debug;

use super::WallClock;
use super::{snapshot, LockSnapshot};
use crate::model::{FencingToken, LockName, UnixMillis};
use crate::record::LockRecord;
use crate::store::{Change, ListQuery, LockStore, StoreError};
use crate::waiter::Waiter;

mod classify;
mod id;

pub use classify::{classify, EventType, Told};
pub use id::EventId;

/// Events kept for resuming streams.
pub const RING: usize = 1024;
/// Events buffered for one stream; a stream that falls further behind is closed.
pub const STREAM_BUFFER: usize = 1024;
/// How long an interest stays covered after its last stream closed.
pub const LINGER: Duration = Duration::from_secs(60);
/// The most locks a prefix stream's snapshot lists.
pub const SNAPSHOT_MAX: usize = 10_000;

#[derive(Clone, Debug)]
pub struct StreamEvent {
    pub id: EventId,
    pub kind: EventType,
    pub lock: LockSnapshot,
    /// The fencing token of the grant the event is about (a semaphore's stream names its
    /// permit): the new grant's for `acquired` and `handed_off`, the ended one's for
    /// `released`, `expired`, `revoked` and `force_released`, the holder's otherwise.
    pub token: Option<FencingToken>,
}

/// What a stream follows.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Interest {
    Lock(LockName),
    Prefix(String),
}

impl Interest {
    pub fn covers(&self, name: &LockName) -> bool {
        match self {
            Interest::Lock(lock) => lock == name,
            Interest::Prefix(prefix) => name.as_str().starts_with(prefix.as_str()),
        }
    }
}

/// How a stream begins.
pub enum Opening {
    /// The current state: one lock, or every held lock under a prefix (and whether the list
    /// was cut at [`SNAPSHOT_MAX`]).
    Snapshot {
        id: EventId,
        locks: Vec<LockSnapshot>,
        truncated: bool,
    },
    /// What followed the id the client presented.
    Replay(Vec<Arc<StreamEvent>>),
}

pub struct Subscription {
    pub opening: Opening,
    pub live: LiveEvents,
}

/// The events that follow a stream's opening. Dropping it closes the stream.
pub struct LiveEvents {
    events: broadcast::Receiver<Arc<StreamEvent>>,
    _open: OpenStream,
}

impl LiveEvents {
    /// The next event the stream's interest covers; `None` when the stream fell more than
    /// [`STREAM_BUFFER`] events behind (it is closed rather than buffered without bound;
    /// the client reconnects and resumes) or the hub stopped.
    pub async fn next(&mut self) -> Option<Arc<StreamEvent>> {
        loop {
            let event = self.events.recv().await.ok()?;
            if self._open.interest.covers(&event.lock.name) {
                return Some(event);
            }
        }
    }
}

/// Tells the hub when a stream closes.
struct OpenStream {
    commands: mpsc::UnboundedSender<Command>,
    interest: Interest,
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        let _ = self.commands.send(Command::Close(self.interest.clone()));
    }
}

/// What the hub's task is started with.
pub struct HubSettings {
    pub store_timeout: Duration,
    /// Counts the hub's store reads.
    pub reads: IntCounter,
    pub clock: WallClock,
    /// `--max-clock-skew-ms`, for the takeover margin the locks' snapshots show.
    pub max_clock_skew_ms: u64,
}

enum Command {
    Open {
        interest: Interest,
        last_seen: Option<EventId>,
        reply: oneshot::Sender<Result<Subscription, StoreError>>,
    },
    Close(Interest),
}

/// The handle the API opens streams through.
pub struct Hub {
    commands: mpsc::UnboundedSender<Command>,
}

impl Hub {
    /// Starts the hub's task. Must run inside a tokio runtime.
    pub fn start(store: Arc<dyn LockStore>, settings: HubSettings) -> Hub {
        let (commands, receiver) = mpsc::unbounded_channel();
        let state = State {
            store,
            store_timeout: settings.store_timeout,
            reads: settings.reads,
            clock: settings.clock,
            max_skew_ms: settings.max_clock_skew_ms,
            commands: commands.downgrade(),
            events: broadcast::channel(STREAM_BUFFER).0,
            changes: None,
            covers: HashMap::new(),
            known: HashMap::new(),
            expiries: BTreeSet::new(),
            ring: VecDeque::new(),
            last: EventId::default(),
        };
        tokio::spawn(state.run(receiver));
        Hub { commands }
    }

    /// Opens a stream on `interest`, resuming after `last_seen` if that can be done.
    pub async fn open(
        &self,
        interest: Interest,
        last_seen: Option<EventId>,
    ) -> Result<Subscription, StoreError> {
        let (reply, answer) = oneshot::channel();
        let command = Command::Open {
            interest,
            last_seen,
            reply,
        };
        let gone = || StoreError::Unavailable("the event hub has stopped".into());
        self.commands.send(command).map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }
}

struct Cover {
    streams: usize,
    since: EventId,
    idle_since: Option<tokio::time::Instant>,
}

#[derive(Default)]
struct Known {
    record: LockRecord,
    /// The record's version when read (none when absent).
    version: Option<crate::store::Version>,
    queue: Vec<Waiter>,
    /// The ends of the holders' leases as last read.
    leases: Vec<LeaseEnd>,
}

/// The end of a lease the hub follows (unix ms), the token of its grant, and whether its
/// streams were told it ran out. A new value is made only when a read shows a different
/// end, and only a new value is armed, so a lease is armed once and told once, however
/// often it is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LeaseEnd {
    token: Option<FencingToken>,
    at: i64,
    told: bool,
}

/// When to look at a lease end again: (when, lock, the lease end it is for). An entry whose
/// lock no longer has that lease end untold is stale and is dropped without a read.
type Armed = (i64, LockName, i64);

struct State {
    store: Arc<dyn LockStore>,
    store_timeout: Duration,
    reads: IntCounter,
    clock: WallClock,
    max_skew_ms: u64,
    /// Weak, so that the task ends when the handle and every stream are gone.
    commands: mpsc::WeakUnboundedSender<Command>,
    events: broadcast::Sender<Arc<StreamEvent>>,
    /// The store's change feed, while any interest is covered.
    changes: Option<broadcast::Receiver<Change>>,
    covers: HashMap<Interest, Cover>,
    known: HashMap<LockName, Known>,
    expiries: BTreeSet<Armed>,
    ring: VecDeque<Arc<StreamEvent>>,
    last: EventId,
}

mod expiry;
mod hub;
mod opening;
#[cfg(test)]
mod tests;
