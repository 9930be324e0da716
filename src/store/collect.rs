//! The collector's steps on the store ([`LockStore::collect`]): the two-phase removal of a
//! free record, and the removal of queue containers nobody waits in. The collector
//! (`service::gc`) only schedules them, a delay apart, and sweeps for free records nobody
//! scheduled; what each step reads and writes is here, once for every store.
//!
//! ZooKeeper restarts a znode's version when the znode is created again, so a conditional
//! write planned against a deleted record could land on its successor at the same version
//! (an ABA: two holders). A release therefore writes a *free* record, and the collector
//! removes it in two steps, each a delay apart:
//!
//! 1. **fence**: on a fresh read, if the record is still free, rewrite it as a fenced free
//!    record. On ZooKeeper a fenced record sits at an **odd** version, and no live record
//!    ever does (every lockwarden write leaves an even version: `zk::ops`,
//!    `Ops::set_record`). The step answers a [`FenceMark`]: the id of the write that left
//!    the fenced state.
//! 2. **delete**: a full delay after the fence, on a fresh read, delete it if it is still
//!    in the very state the fence left (the same mark: the same write, even across a delete
//!    and re-create).
//!
//! Why no write can meet a new record:
//! - Every step re-reads (with `sync`, so not from a lagging follower) right before its
//!   write, and the write goes out on the session of that read, within the store timeout.
//!   A collector item is only a reminder: however late it runs (a pause, a burst of items
//!   behind a slow store, instances with different delays), it acts on the present state.
//! - A write planned on a fenced record names an odd version, so it can land only on a
//!   fenced free record, never on a live record that replaced it.
//! - A write planned on a record before its fence names an even version. It is sent on the
//!   session of its read, within the request timeout, and a request can be held across a
//!   reconnect for at most 1.5 session timeouts; that whole window is shorter than the
//!   delay (`ServeArgs::check`). A pause longer than the session timeout ends the session,
//!   and the write with it. So it lands before the delete: on the old record, where the
//!   fence has moved the version (it fails) or has not yet (it reuses the lock, and the
//!   fence and delete then fail).
//! - The delete names the fenced version and is checked against the fence's mark: it only
//!   ever removes a fenced free record that nobody has touched for a full delay.
//!
//! Limits of the argument, stated so they can be checked:
//! - "Sent within the request timeout" means the write is *issued* before its deadline;
//!   a task delayed between the check and the send may issue it a little later. The delay
//!   exceeds the window by a margin for that.
//! - `sync` then read is how ZooKeeper offers an up-to-date read; across a leader change it
//!   is not strictly linearizable (ZOOKEEPER-1675). The collector needs only that the read is
//!   not older than the request timeout, which holds.
//! - Parity holds for records only lockwarden writes. A Helix client's plain `setData` may
//!   leave a live record at an odd version; such a record relies on the timing argument
//!   alone (session binding and the mark check), which still holds.
//!
//! Keeps I13 (the argument above) and, with the collector's sweep, I12 (no empty queue
//! container is left behind); see DESIGN.md, "Invariants".

use async_trait::async_trait;
use tokio::time::Instant;

use super::{Fresh, LockStore, Reads, StoreError, Version, WriteOutcome};
use crate::model::LockName;
use crate::record::LockRecord;

/// One step of the collector ([`LockStore::collect`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Collect<'a> {
    /// Fences the lock's record, if it is still free.
    Fence(&'a LockName),
    /// Deletes the lock's record, if it is still in the state its fence left.
    Delete(&'a LockName, FenceMark),
    /// Removes queue containers that hold no waiter. ZooKeeper reaps an emptied container
    /// by itself, but not one that never had a child: a join whose waiter create was lost
    /// after its container was made leaves one.
    EmptyQueues,
}

/// The state a fence left a record in, as its delete checks it. What it is made of is the
/// store's (on ZooKeeper: the id of the fence's write, its `mzxid`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FenceMark(i64);

/// What a step did, and what the collector does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Collected {
    /// Fenced: delete it a delay later, if it is still in this state.
    Fenced(FenceMark),
    /// Nothing more to do: deleted, gone, taken again (its next release schedules it
    /// anew), moved since its fence (whoever moved it has it scheduled, or the sweep finds
    /// it), a parent of nested locks (a later sweep finds it), or queues cleared.
    Done,
    /// The record changed under the write (or the session did): fence again a delay later.
    Again,
}

/// A record whose fresh read `free` lets go: the rule is the engine's
/// (`engine::collectable`).
pub type Free = fn(&LockRecord) -> bool;

/// The writes a store's collector steps are made of; each is conditional on `version`, and
/// goes out on the session it was read on. A supertrait of [`LockStore`] that only the
/// stores in `src/store` can name: the service asks for [`Collect`] steps, never these.
#[async_trait]
pub trait Removal {
    /// Rewrites a free record as a fenced free record: `Written` with the id of the write
    /// that left it fenced (on ZooKeeper, one at an odd version already is answered as it is).
    async fn fence(
        &self,
        name: &LockName,
        version: Version,
        deadline: Instant,
    ) -> Result<WriteOutcome, StoreError>;
    /// Removes the record; `NestedLocks` when locks are nested under it.
    async fn delete(
        &self,
        name: &LockName,
        version: Version,
        deadline: Instant,
    ) -> Result<WriteOutcome, StoreError>;
    /// See [`Collect::EmptyQueues`].
    async fn remove_empty_queues(&self, deadline: Instant) -> Result<(), StoreError>;
}

/// Runs one step: a fresh read, then the conditional write the step and the state call for.
pub(super) async fn step<S: LockStore + ?Sized>(
    store: &S,
    step: Collect<'_>,
    free: Free,
    deadline: Instant,
) -> Result<Collected, StoreError> {
    let name = match step {
        Collect::Fence(name) | Collect::Delete(name, _) => name,
        Collect::EmptyQueues => {
            store.remove_empty_queues(deadline).await?;
            return Ok(Collected::Done);
        }
    };
    let Some(stored) = store.read(name, Fresh::Latest, deadline).await? else {
        return Ok(Collected::Done);
    };
    // A znode that holds no record is a container of nested names, which ZooKeeper reaps.
    if !free(&stored.record) || !stored.version.holds_record() {
        return Ok(Collected::Done);
    }
    let version = stored.version;
    let outcome = match step {
        Collect::Fence(_) => store.fence(name, version, deadline).await?,
        Collect::Delete(_, FenceMark(fenced)) if fenced == version.mzxid => {
            store.delete(name, version, deadline).await?
        }
        // Written since the fence: by a release, or by another instance's fence. Were this
        // step to fence again, items of three instances a little apart would each move the
        // record just before another's delete, and none would ever delete it.
        Collect::Delete(..) | Collect::EmptyQueues => return Ok(Collected::Done),
    };
    Ok(match (step, outcome) {
        (Collect::Fence(_), WriteOutcome::Written { zxid, .. }) => {
            Collected::Fenced(FenceMark(zxid))
        }
        (_, WriteOutcome::Written { .. }) => Collected::Done,
        // Locks are nested under it: it stays as their parent; a later sweep finds it.
        (Collect::Delete(..), WriteOutcome::NestedLocks) => Collected::Done,
        (_, WriteOutcome::Conflict | WriteOutcome::NestedLocks) => Collected::Again,
    })
}
