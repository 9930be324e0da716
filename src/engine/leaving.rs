//! How a waiting call ends other than by taking the lock: what a vanished queue entry
//! means for its caller, what a caller that gives up reads and whether the lock reached it
//! first, and what a caller that left still owes the record (its requestor slot, or a lock
//! that reached it).
//!
//! Keeps I11 (DESIGN.md, "Invariants"): a caller gone leaves no lock, entry or requestor
//! slot, and one that gives up takes a lock handed to it before it left.

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
    if record.requestor.as_ref().and_then(|r| r.waiter.as_deref()) != Some(me) {
        return AfterLeaving::Nothing;
    }
    AfterLeaving::Withdraw(Box::new(LockRecord {
        requestor: None,
        forced: None,
        ..record.clone()
    }))
}
