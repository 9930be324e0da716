//! What a decision may be made on: which answers need the latest copy (read after a
//! `sync`), when the queue that this instance remembers behind its own last hand-off is the
//! whole queue, and when a read needs the queue at all.
//!
//! Each decision says, by its `trust`, whether it may be acted on the [`Basis`] it was made
//! on, or which read to make it again on.
//!
//! Keeps I4 (DESIGN.md, "Invariants"): an answer that leaves every lease as it was (a
//! refusal, a release that finds nothing to do) is given only on the latest copy, which
//! shows the caller's own grant and renewals (`refusal_trust`). Keeps I7: a remembered queue
//! is decided on only while nobody who could come first can have joined
//! (`remembered_queue_holds`).

use crate::model::UnixMillis;
use crate::record::LockRecord;
use crate::waiter::Waiter;

/// What a decision was made on: how far the record and queue it saw can be trusted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Basis {
    /// The record this instance wrote last and the queue it left behind it, neither read.
    /// Callers of other instances may have joined since; only a decision to wait, which is
    /// made again once the caller has joined, is taken on it by a call that is not yet in
    /// the queue. A release takes it only where it still holds (`remembered_queue_holds`).
    Remembered,
    /// The record this instance wrote last, not read (the queue read when it mattered): good
    /// for a conditional write, which fails if the record has changed, and for nothing else.
    /// As a basis asked for: this, where the instance has it, else a read.
    #[default]
    Cached,
    /// A read of the store, as the server the session is on has it (on ZooKeeper, a
    /// follower that may lag writes acknowledged to others).
    Read,
    /// A read after a `sync`: no older than any write acknowledged before it.
    Latest,
}

/// Whether a decision may be acted on as it was made, or must be made again on a read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trust {
    Act,
    /// Decide again on this basis (`Read` or `Latest`).
    ReadAgain(Basis),
}

/// The rule for an answer that leaves every lease as it was (a refusal, a release that finds
/// nothing to do): given only on the latest copy, which shows the caller's own grant and
/// renewals (I4). On a lagging copy it could tell a holder "not the owner" of a lease it
/// holds, or "released" while its lease goes on holding the lock. Writes need no such read:
/// they are conditional on the version read.
pub fn refusal_trust(basis: Basis) -> Trust {
    if basis == Basis::Latest {
        Trust::Act
    } else {
        Trust::ReadAgain(Basis::Latest)
    }
}

/// What is remembered only serves to wait: anything else is decided on a read.
fn remembered_only_waits(waits: bool) -> Trust {
    if waits {
        Trust::Act
    } else {
        Trust::ReadAgain(Basis::Read)
    }
}

impl super::AcquireDecision {
    /// Remembered: only to wait. Cached: only to write (a grant), or to refuse after a
    /// latest read. A refusal on the latest copy (I4).
    pub fn trust(&self, basis: Basis) -> Trust {
        use super::AcquireDecision::*;
        match (basis, self) {
            (Basis::Latest, _) => Trust::Act,
            (Basis::Remembered, decision) => remembered_only_waits(*decision == Wait),
            (_, Refuse(_)) => refusal_trust(basis),
            (Basis::Cached, AlreadyGranted { .. } | Wait | OwnGrantLanded { .. }) => {
                Trust::ReadAgain(Basis::Read)
            }
            _ => Trust::Act,
        }
    }
}

impl super::RenewDecision {
    /// "Not the owner" on the latest copy (I4); a write on any.
    pub fn trust(&self, basis: Basis) -> Trust {
        match self {
            super::RenewDecision::NotOwner => refusal_trust(basis),
            super::RenewDecision::Write(_) => Trust::Act,
        }
    }
}

impl super::ReleaseDecision {
    /// "Not the owner", or nothing to release, on the latest copy (I4); a write on any.
    pub fn trust(&self, basis: Basis) -> Trust {
        match self {
            super::ReleaseDecision::NotOwner | super::ReleaseDecision::AlreadyFree => {
                refusal_trust(basis)
            }
            _ => Trust::Act,
        }
    }
}

impl super::WaitDecision {
    /// Remembered: only to wait. Superseded on the latest copy (I4); a wait that ran out is a
    /// matter of time alone.
    pub fn trust(&self, basis: Basis) -> Trust {
        use super::{WaitDecision, WaitFailure};
        match (basis, self) {
            (Basis::Remembered, decision) => {
                remembered_only_waits(matches!(decision, WaitDecision::Wait { .. }))
            }
            (_, WaitDecision::Fail(WaitFailure::Superseded)) => refusal_trust(basis),
            _ => Trust::Act,
        }
    }
}

impl super::AcquireRequest {
    /// The basis an acquire's first round decides on, before anything is read:
    /// - `Cached`, for a call with no lease to renew on a lock none of whose callers wait
    ///   here (`waiting_here`): most acquires find no record, or the free record this
    ///   instance left, and write at once (`grant_on_memory`), reading only if that fails.
    ///   Not while callers wait here: a lock they are about to take must not be taken past
    ///   them by a caller who never queued (the record may not say yet that they wait).
    /// - `Latest`, for such a call that will not wait, on a lock this instance last wrote as
    ///   held by a live lease (`last_held`, asked only then): it is most likely refused, and
    ///   a refusal is decided on the latest copy (I4).
    /// - `Remembered`, for a new call (no lease, no `request_id`) willing to wait while
    ///   callers wait here: it nearly always waits too, and what is remembered decides that
    ///   much; it decides again on a read once it has joined, where the lock is granted to
    ///   it if it turns out free for it (the engine refuses such a caller only for a retry or
    ///   a renewal, which the record as it is decides).
    /// - `Read` otherwise.
    pub fn first_basis(&self, waiting_here: bool, last_held: impl FnOnce() -> bool) -> Basis {
        let may_wait = self.waiting_ms.is_some_and(|ms| ms > 0);
        if self.lease_id.is_some() {
            Basis::Read
        } else if !waiting_here {
            if !may_wait && last_held() {
                Basis::Latest
            } else {
                Basis::Cached
            }
        } else if may_wait && self.request_id.is_none() {
            Basis::Remembered
        } else {
            Basis::Read
        }
    }
}

/// Whether an acquire on `Basis::Cached` may plan its grant on `record`, the record this
/// instance wrote last, without reading: it is free, and no caller is marked or asks. (A
/// grant planned on it is conditional on its version; any other decision needs a read.)
pub fn grant_on_memory(record: &LockRecord) -> bool {
    record.holders.is_empty() && !may_have_waiters(record)
}

/// Whether `remembered`, the queue this instance left behind `record` when it wrote it, is
/// still the whole queue as far as a decision goes: nobody who could come first has joined
/// since. A caller joins after marking the record (`queued`) with its priority when that is
/// higher than the mark, and a requestor writes the record; so while the mark equals the
/// remembered head's priority and there is no requestor, every caller not remembered has at
/// most the head's priority and a later sequence number, and queues behind the head (I7).
pub fn remembered_queue_holds(record: &LockRecord, remembered: &[Waiter]) -> bool {
    record.requestor.is_none()
        && remembered
            .first()
            .is_some_and(|head| record.queued == Some(head.priority))
}

/// Whether waiter `me` may decide its turn on the remembered record and queue instead of a
/// read: the remembered queue holds and `me` heads it. Not for a former requestor, whose
/// own registration the remembered record may predate.
pub fn remembered_turn_holds(
    record: &LockRecord,
    remembered: &[Waiter],
    me: &Waiter,
    was_requestor: bool,
) -> bool {
    !was_requestor
        && remembered.first().is_some_and(|head| head.id == me.id)
        && remembered_queue_holds(record, remembered)
}

/// Whether a decision on `record`, read without its queue, can depend on the queue: a free
/// or expired lock (a semaphore's free permit) goes to waiters first, and a requestor may
/// have left.
pub fn queue_matters(record: &LockRecord, now: UnixMillis) -> bool {
    super::live_holders(record, now).count() < record.permits() || record.requestor.is_some()
}

/// Whether a record this instance remembers says callers may wait (its mark or a
/// requestor), so that a decision on it needs the queue.
pub fn may_have_waiters(record: &LockRecord) -> bool {
    record.queued.is_some() || record.requestor.is_some()
}

#[cfg(test)]
#[path = "basis_tests.rs"]
mod tests;
