//! The storage boundary: versioned lock records with conditional writes.
//!
//! Every store (`zk`, `memory.rs`, `sim`) offers the same model as a ZooKeeper znode: a
//! record carries a version and the id (zxid) of the write that last changed it, every write
//! names the version it expects, and a write against a changed record reports
//! [`WriteOutcome::Conflict`] so the caller can re-read and decide again. What a [`Version`]
//! is made of, session identity and the collector's fence and delete (`collect.rs`, I13)
//! stay behind [`LockStore`]; the service hands versions back and asks them questions.

use std::time::Duration;
use tokio::time::Instant;

use async_trait::async_trait;

use crate::model::LockName;
use crate::record::LockRecord;
use crate::waiter::Watch;
use crate::waiter::{Ticket, Waiter};

mod collect;
pub mod memory;
mod reads;
pub mod sim;
mod version;
pub mod zk;

pub use collect::{Collect, Collected, FenceMark, Free};
pub use reads::{Found, Fresh, Reads, Take};
pub use version::Version;

/// A record as read, with what a conditional write against it needs.
#[derive(Clone, Debug)]
pub struct Stored {
    /// The record, with the holder's fencing token resolved.
    pub record: LockRecord,
    pub version: Version,
}

/// A store session that owns queue entries (see [`EntryLife`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntrySession(pub(in crate::store) i64);

/// What queue entries live and die with, as this instance sees it now
/// ([`LockStore::entry_life`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryLife {
    /// The store session that entries made now are made on, while it is connected and
    /// alive (`None` otherwise). A session that is this both before a join and after it was
    /// so throughout (a replaced session never comes back), so the entry made in between is
    /// on it and has not vanished with it: an entry that is gone was then removed by a
    /// write. For an entry whose key is its call's alone, the only such write other than the
    /// call's own leaving is a hand-off to it. (Judged by the client's view of its session;
    /// a session that expired while the client still thinks it connected would be taken for
    /// alive. Only the error a caller gets depends on it.)
    pub session: Option<EntrySession>,
    /// How long a queue entry may outlive this instance's loss of contact with the store:
    /// ZooKeeper keeps a disconnected session, and the entries made on it, for its session
    /// timeout. A waiting call that cannot reach the store keeps trying about that long,
    /// since its place may still be there (see `engine::gives_up_in_trouble`).
    pub outlives_outage: Duration,
}

/// A conditional write of one lock's record.
#[derive(Clone, Copy, Debug)]
pub enum RecordWrite<'a> {
    /// Creates the record of a lock that has none.
    Create(&'a LockRecord),
    /// Replaces the record, if it is still at the version.
    Update(&'a LockRecord, Version),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The write landed; `zxid` identifies it (the fencing token of a grant), and `version`
    /// is the record's new version, on the store session it was written on (number -1 once
    /// deleted).
    Written { zxid: i64, version: Version },
    /// The record changed since it was read (or appeared, or vanished): read again.
    Conflict,
    /// The name is the parent of existing nested locks, and cannot hold a record itself.
    NestedLocks,
}

#[derive(Clone, Debug, thiserror::Error)]
pub enum StoreError {
    /// The store could not be reached in time; nothing was changed.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// A write was sent but its answer was lost: it may or may not have landed.
    #[error("outcome of a store write is unknown: {0}")]
    OutcomeUnknown(String),
}

/// Which locks a listing wants.
#[derive(Clone, Debug)]
pub struct ListQuery {
    /// A plain string prefix of the lock name.
    pub prefix: String,
    /// Return only names after this one (the cursor).
    pub after: Option<LockName>,
    pub limit: usize,
    /// List free records (nobody holds, asks or waits) instead of held or expired ones: what
    /// the collector may delete.
    pub free: bool,
    /// Only names these prefixes cover (a scoped token's listing); `None`: every name.
    pub within: Option<std::sync::Arc<crate::scope::Prefixes>>,
}

/// Held or expired locks in name order, and whether more may follow.
#[derive(Clone, Debug, Default)]
pub struct ListPage {
    pub locks: Vec<(LockName, LockRecord)>,
    pub more: bool,
}

#[async_trait]
pub trait LockStore: collect::Removal + Send + Sync + 'static {
    /// Reads what `take` names of a lock, as fresh as `fresh` says. `Take::Both` reads the
    /// record and the queue as **one state** of the store: a waiter decides each round on
    /// both, and two reads with a hand-off between them would show it neither its entry nor
    /// its grant, so it would be told its grant ended while it holds the lock. ZooKeeper
    /// reads both in one request (a read-only `multi`), which also costs one trip through its
    /// pipeline; the record alone is one `getData`, the queue alone one `getChildren`. The
    /// shapes callers use are [`Reads`]'.
    async fn fetch(
        &self,
        name: &LockName,
        take: Take,
        fresh: Fresh,
        deadline: Instant,
    ) -> Result<Found, StoreError>;
    /// Writes a lock's record, on the condition [`RecordWrite`] names.
    async fn write(
        &self,
        name: &LockName,
        write: RecordWrite<'_>,
        deadline: Instant,
    ) -> Result<WriteOutcome, StoreError>;
    async fn list(&self, query: &ListQuery, deadline: Instant) -> Result<ListPage, StoreError>;
    /// Succeeds when the store answers a request within the deadline.
    async fn ready(&self, deadline: Instant) -> Result<(), StoreError>;
    /// Runs one step of the collector ([`Collect`]): fences a record that `free` lets go,
    /// deletes a fenced one still in the state its fence left, or removes empty queue
    /// containers. Each record step reads afresh (ZooKeeper: `sync`, then one `getData`) and
    /// writes on that read's session; the steps and why they never remove a live record
    /// (I13) are in `collect.rs`.
    async fn collect(
        &self,
        step: Collect<'_>,
        free: Free,
        deadline: Instant,
    ) -> Result<Collected, StoreError> {
        collect::step(self, step, free, deadline).await
    }

    /// What queue entries live and die with (see [`EntryLife`]). The in-memory store's
    /// entries never vanish with a session and outlive no outage: session `0`, always alive.
    fn entry_life(&self) -> EntryLife {
        EntryLife {
            session: Some(EntrySession(0)),
            outlives_outage: Duration::ZERO,
        }
    }
    /// Joins the queue. The entry lives as long as this instance's store session. If an
    /// entry with the ticket's key exists already (a retry), that entry is returned. A
    /// store may give attempts after an answered one as long as the first had (the ZooKeeper
    /// store: up to four times the time to `deadline` in all).
    async fn enqueue(
        &self,
        name: &LockName,
        ticket: &Ticket,
        deadline: Instant,
    ) -> Result<Waiter, StoreError>;
    /// The ticket a waiter joined with; `None` once it has left.
    async fn ticket(
        &self,
        name: &LockName,
        waiter: &Waiter,
        deadline: Instant,
    ) -> Result<Option<Ticket>, StoreError>;
    /// Leaves the queue; false when the entry was already gone (for instance handed over).
    async fn leave(
        &self,
        name: &LockName,
        waiter: &Waiter,
        deadline: Instant,
    ) -> Result<bool, StoreError>;
    /// In one atomic write: replaces the record (creates it when `version` is `None`) and
    /// removes `waiter` from the queue. A conflict if either changed.
    ///
    /// `joining` are callers of this instance about to join the same queue: the store may
    /// create their entries in that same write (a group commit: one flush of the store's log
    /// instead of two), and says in [`HandOff::joined`] whether it did. It never makes an entry
    /// without the hand-off, nor the hand-off without the entries it said it carries.
    async fn hand_off(
        &self,
        name: &LockName,
        record: &LockRecord,
        version: Option<Version>,
        waiter: &Waiter,
        joining: &[Ticket],
        deadline: Instant,
    ) -> Result<HandOff, StoreError>;
    /// Returns once what `watch` names may have changed since the record was read at `seen`
    /// (`None`: absent), or at `until`.
    async fn wait_change(
        &self,
        name: &LockName,
        watch: &Watch,
        seen: Option<Version>,
        until: Instant,
    ) -> Result<Wake, StoreError>;

    /// Subscribes to the change feed. On ZooKeeper, the watches behind it are set only
    /// while someone subscribes, so a service nobody streams from pays nothing for it.
    fn changes(&self) -> tokio::sync::broadcast::Receiver<Change>;
}

/// What a hand-off did.
#[derive(Debug)]
pub struct HandOff {
    pub outcome: WriteOutcome,
    pub joined: Joined,
}

impl HandOff {
    /// A hand-off that carried no joining caller.
    pub fn alone(outcome: WriteOutcome) -> Self {
        HandOff {
            outcome,
            joined: Joined::NotCarried,
        }
    }
}

/// What a hand-off did for the callers joining with it (see [`LockStore::hand_off`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Joined {
    /// No entry was made: each caller joins on its own.
    NotCarried,
    /// Their entries, in the order of the tickets.
    Carried(Vec<Waiter>),
    /// Entries were made but could not be told apart: each caller looks for its own by key.
    Unknown,
}

/// What the change feed reports: a lock whose record or queue changed (through any
/// instance), or that changes may have been missed (a new ZooKeeper session, a reader that
/// fell behind), so that whatever a reader knows must be read again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    Lock(LockName),
    Resync,
}

/// How many changes the feed buffers for a reader that falls behind.
pub const FEED_CAPACITY: usize = 4096;

/// Why a wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// The record changed (only the head and the requestor watch it).
    Record,
    /// The waiter ahead left.
    Predecessor,
    /// The timer ran out.
    Timer,
}

/// True when `name` belongs in a listing for `query`.
pub(crate) fn listed(query: &ListQuery, name: &LockName, record: &LockRecord) -> bool {
    let wanted = if query.free {
        record.is_free() && record.queued.is_none()
    } else {
        !record.holders.is_empty()
    };
    wanted
        && name.as_str().starts_with(&query.prefix)
        && query.after.as_ref().is_none_or(|after| name > after)
        && query
            .within
            .as_ref()
            .is_none_or(|w| w.covers(name.as_str()))
}
