//! How a waiting call ends other than by taking the lock: what a vanished queue entry
//! means for its caller, what a caller that gives up reads and whether the lock reached it
//! first, what a caller that left still owes the record (its requestor slot, or a lock
//! that reached it), and when a caller whose rounds fail stops trying.
//!
//! Keeps (DESIGN.md, "Invariants") I8 (`gives_up_in_trouble`: a waiter in trouble is
//! answered) and I11 (a caller gone leaves no lock, entry or requestor slot, and one that
//! gives up takes a lock handed to it before it left).

use std::time::Duration;

use super::{holder_with_lease, Basis};
use crate::model::LeaseId;
use crate::record::LockRecord;
use crate::waiter::Ticket;

/// What a vanished queue entry (`WaitDecision::Vanished`) means for its caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vanished {
    /// It may have gone with its store session: the caller hears that the store failed.
    WithSession,
    /// A hand-off removed it, so the lock reached the caller, and it was taken from the
    /// caller before it heard (preempted, force released, or its lease ran out): `lease_ended`.
    GrantEnded,
}

/// See [`Vanished`]. `kept`: the entry's key is its call's alone and the store session it
/// was made on was alive from before the join until now (`store::EntryLife`), so the session
/// kept it; the only write that removes such an entry, other than the call's own leaving,
/// is a hand-off to it. The read that found it gone showed one state (record and queue) in
/// which the caller does not hold the lock, so that grant has ended.
pub fn vanished(kept: bool) -> Vanished {
    if kept {
        Vanished::GrantEnded
    } else {
        Vanished::WithSession
    }
}

/// What a waiting caller that gives up reads after leaving its queue; `left` says whether its
/// own delete removed its entry. If it did, no hand-off can have reached the caller (a
/// hand-off deletes the entry in the same write), and a read serves the refusal. If the
/// entry was gone already, it may have gone in a hand-off to this caller that the server
/// the read goes to has not applied yet: the read is made on the latest copy (I11).
pub fn giving_up_reads_on(left: bool) -> Basis {
    if left {
        Basis::Read
    } else {
        Basis::Latest
    }
}

/// Whether a waiting caller that gave up (see `giving_up_reads_on`) was handed the lock
/// before it left, as `record`, read after that, shows: then its answer is the grant.
pub fn gave_up_holding(left: bool, record: &LockRecord, lease_id: &LeaseId) -> bool {
    !left && holder_with_lease(record, lease_id).is_some()
}

/// What a waiting caller that has left its queue still owes the record, read after its
/// leave was answered (no hand-off can reach it any more).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AfterLeaving {
    /// The lock reached it just before: release it, so that it goes on.
    PassOn,
    /// The lock reached it just before, and the call has a `request_id`: the grant is kept
    /// for the call's retry, which may come through any instance (and may have come
    /// already), until its lease runs out, as any grant made for a `request_id` is (I9,
    /// I11's exception).
    KeepForRetry,
    /// It is the requestor: write `record`, the same without its requestor slot.
    Withdraw(Box<LockRecord>),
    /// Nothing of it is left in the record.
    Nothing,
}

/// See [`AfterLeaving`]. `me` is the waiter's id, `ticket` what it joined with.
pub fn after_leaving(record: &LockRecord, me: &str, ticket: &Ticket) -> AfterLeaving {
    if holder_with_lease(record, &ticket.lease_id).is_some() {
        return match ticket.request_id {
            Some(_) => AfterLeaving::KeepForRetry,
            None => AfterLeaving::PassOn,
        };
    }
    if !super::names_requestor(record, me) {
        return AfterLeaving::Nothing;
    }
    AfterLeaving::Withdraw(Box::new(LockRecord {
        requestor: None,
        forced: None,
        ..record.clone()
    }))
}

/// Whether a waiting call whose rounds have failed for `troubled` stops trying, and answers
/// the last error (503). It tries for the store timeout in any case; then, while its wait has
/// not run out, for as long as its queue entry may outlive the loss of contact with the store
/// (`store::EntryLife`). A waiter parked on its watch never notices a short outage (an
/// election, a lost connection), and one whose round happened to fall into it must not lose
/// its place for it: the entry is still there, and the first round after the outage goes on
/// as if nothing happened. Beyond that time the entry has most likely gone with its session,
/// and the caller hears so instead of waiting on (I8).
pub fn gives_up_in_trouble(
    troubled: Duration,
    store_timeout: Duration,
    entry_outlives_outage: Duration,
    waited_out: bool,
) -> bool {
    troubled >= store_timeout && (waited_out || troubled >= entry_outlives_outage)
}

#[cfg(test)]
#[path = "leaving_tests.rs"]
mod tests;
