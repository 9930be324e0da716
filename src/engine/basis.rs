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
        use Basis::*;
        let latest = Trust::ReadAgain(Latest);
        let refused = AcquireDecision::Refuse(AcquireRefusal::LeaseEnded);
        for (basis, want) in [(Cached, latest), (Read, latest), (Latest, Trust::Act)] {
            assert_eq!(refused.trust(basis), want, "{basis:?}");
            assert_eq!(RenewDecision::NotOwner.trust(basis), want);
            assert_eq!(ReleaseDecision::NotOwner.trust(basis), want);
            assert_eq!(ReleaseDecision::AlreadyFree.trust(basis), want);
            let superseded = WaitDecision::Fail(WaitFailure::Superseded);
            assert_eq!(superseded.trust(basis), want);
        }
        let (record, _) = granted("h", NOW);
        assert_eq!(
            RenewDecision::Write(Box::new(record)).trust(Cached),
            Trust::Act
        );
        assert_eq!(AcquireDecision::Wait.trust(Read), Trust::Act);
        let timeout = WaitDecision::Fail(WaitFailure::WaitTimeout);
        assert_eq!(timeout.trust(Read), Trust::Act, "a matter of time alone");
        assert_eq!(WaitDecision::Granted.trust(Read), Trust::Act);
    }

    #[test]
    fn what_is_remembered_only_serves_to_wait() {
        use crate::engine::{AcquireDecision, AcquireRefusal, WaitDecision};
        use Basis::*;
        let read = Trust::ReadAgain(Read);
        assert_eq!(AcquireDecision::Wait.trust(Remembered), Trust::Act);
        let refused = AcquireDecision::Refuse(AcquireRefusal::LockHeld);
        assert_eq!(refused.trust(Remembered), read);
        let (record, lease_id) = granted("h", NOW);
        let grant = AcquireDecision::Grant {
            record: record.clone(),
            lease_id,
        };
        assert_eq!(grant.trust(Remembered), read);
        let wait = WaitDecision::Wait {
            until: None,
            watch: crate::waiter::Watch::Record,
        };
        assert_eq!(wait.trust(Remembered), Trust::Act);
        assert_eq!(WaitDecision::Granted.trust(Remembered), read);
    }

    #[test]
    fn a_cached_record_is_only_good_for_a_conditional_write() {
        use crate::engine::AcquireDecision;
        use Basis::*;
        let (record, lease_id) = granted("h", NOW);
        let grant = AcquireDecision::Grant { record, lease_id };
        assert_eq!(grant.trust(Cached), Trust::Act);
        let read = Trust::ReadAgain(Read);
        assert_eq!(AcquireDecision::Wait.trust(Cached), read);
        assert_eq!(
            AcquireDecision::AlreadyGranted { lease_id }.trust(Cached),
            read
        );
        assert_eq!(
            AcquireDecision::OwnGrantLanded { lease_id }.trust(Cached),
            read
        );
        assert_eq!(
            AcquireDecision::AlreadyGranted { lease_id }.trust(Read),
            Trust::Act
        );
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
