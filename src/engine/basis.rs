//! What a decision may be made on: which answers need the latest copy (read after a
//! `sync`), when the queue that this instance remembers behind its own last hand-off is the
//! whole queue, and when a read needs the queue at all.
//!
//! Keeps I4 (DESIGN.md, "Invariants"): an answer that leaves every lease as it was (a
//! refusal, a release that finds nothing to do) is given only on the latest copy, which
//! shows the caller's own grant and renewals (`needs_latest_copy`). Keeps I7: a remembered queue
//! is decided on only while nobody who could come first can have joined
//! (`remembered_queue_holds`).

use crate::model::UnixMillis;
use crate::record::LockRecord;
use crate::waiter::Waiter;

// Whether a decision may be answered only on the latest copy (`needs_latest_copy`): an answer
// that leaves every lease as it was, given on a lagging copy, could tell a holder "not the
// owner" of a lease it holds, or "released" while its lease goes on holding the lock. The
// service reads the latest copy and decides again when a decision made on another says so.
// Writes need no such read: they are conditional on the version read.

impl super::AcquireDecision {
    /// A refusal (see the rule above).
    pub fn needs_latest_copy(&self) -> bool {
        matches!(self, super::AcquireDecision::Refuse(_))
    }
}

impl super::RenewDecision {
    /// "Not the owner" (see the rule above).
    pub fn needs_latest_copy(&self) -> bool {
        matches!(self, super::RenewDecision::NotOwner)
    }
}

impl super::ReleaseDecision {
    /// "Not the owner", or nothing to release (see the rule above).
    pub fn needs_latest_copy(&self) -> bool {
        matches!(
            self,
            super::ReleaseDecision::NotOwner | super::ReleaseDecision::AlreadyFree
        )
    }
}

impl super::WaitDecision {
    /// Superseded (see the rule above); a wait that ran out is a matter of time alone.
    pub fn needs_latest_copy(&self) -> bool {
        matches!(
            self,
            super::WaitDecision::Fail(super::WaitFailure::Superseded)
        )
    }
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
/// or expired lock goes to waiters first, and a requestor may have left.
pub fn queue_matters(record: &LockRecord, now: UnixMillis) -> bool {
    super::live_holder(record, now).is_none() || record.requestor.is_some()
}

/// Whether a record this instance remembers says callers may wait (its mark or a
/// requestor), so that a decision on it needs the queue.
pub fn may_have_waiters(record: &LockRecord) -> bool {
    record.queued.is_some() || record.requestor.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::tests::{granted, NOW};
    use crate::engine::waiting_tests::{held, waiter, with_requestor};

    #[test]
    fn only_answers_that_leave_every_lease_as_it_was_need_the_latest_copy() {
        use crate::engine::{
            AcquireDecision, AcquireRefusal, ReleaseDecision, RenewDecision, WaitDecision,
            WaitFailure,
        };
        assert!(AcquireDecision::Refuse(AcquireRefusal::LeaseEnded).needs_latest_copy());
        assert!(!AcquireDecision::Wait.needs_latest_copy());
        assert!(RenewDecision::NotOwner.needs_latest_copy());
        let (record, _) = granted("h", NOW);
        assert!(!RenewDecision::Write(Box::new(record)).needs_latest_copy());
        assert!(ReleaseDecision::NotOwner.needs_latest_copy());
        assert!(ReleaseDecision::AlreadyFree.needs_latest_copy());
        assert!(WaitDecision::Fail(WaitFailure::Superseded).needs_latest_copy());
        assert!(!WaitDecision::Fail(WaitFailure::WaitTimeout).needs_latest_copy());
        assert!(!WaitDecision::Granted.needs_latest_copy());
    }

    #[test]
    fn a_remembered_queue_holds_while_the_mark_is_its_heads_priority_and_nobody_asks() {
        let (head, next) = (waiter("a", 3, 1), waiter("b", 1, 2));
        let mut record = held(0);
        record.queued = Some(3);
        assert!(remembered_queue_holds(
            &record,
            &[head.clone(), next.clone()]
        ));
        // A higher caller marked the record on its way in.
        record.queued = Some(5);
        assert!(!remembered_queue_holds(
            &record,
            &[head.clone(), next.clone()]
        ));
        record.queued = Some(3);
        let asked = with_requestor(record.clone(), &next, 4, NOW.plus(1000));
        assert!(!remembered_queue_holds(&asked, &[head.clone(), next]));
        assert!(!remembered_queue_holds(&record, &[]));
    }

    #[test]
    fn only_the_remembered_head_that_never_asked_takes_its_turn_on_memory() {
        let (head, next) = (waiter("a", 3, 1), waiter("b", 3, 2));
        let mut record = held(0);
        record.queued = Some(3);
        let queue = [head.clone(), next.clone()];
        assert!(remembered_turn_holds(&record, &queue, &head, false));
        assert!(!remembered_turn_holds(&record, &queue, &next, false));
        assert!(!remembered_turn_holds(&record, &queue, &head, true));
    }

    #[test]
    fn the_queue_matters_unless_a_live_holder_keeps_the_lock_and_nobody_asks() {
        let (record, _) = granted("h", NOW);
        assert!(!queue_matters(&record, NOW));
        assert!(queue_matters(&LockRecord::default(), NOW));
        let expired = match record.holder.as_ref().unwrap().expires {
            crate::record::Expiry::At(at) => at,
            crate::record::Expiry::Never => panic!("a granted lease runs out"),
        };
        assert!(queue_matters(&record, expired));
        let asked = with_requestor(record, &waiter("w", 2, 1), 2, NOW.plus(1000));
        assert!(queue_matters(&asked, NOW));
    }

    #[test]
    fn a_remembered_record_may_have_waiters_when_marked_or_asked() {
        let (mut record, _) = granted("h", NOW);
        assert!(!may_have_waiters(&record));
        record.queued = Some(0);
        assert!(may_have_waiters(&record));
        record.queued = None;
        let asked = with_requestor(record, &waiter("w", 2, 1), 2, NOW.plus(1000));
        assert!(may_have_waiters(&asked));
    }
}
