//! Rule-by-rule tests of what a decision may be made on.

use super::*;
use crate::engine::tests::{granted, NOW};
use crate::engine::waiting_tests::{held, waiter, with_requestor};

#[test]
fn only_answers_that_leave_every_lease_as_it_was_need_the_latest_copy() {
    use crate::engine::{
        AcquireDecision, AcquireRefusal, ReleaseDecision, RenewDecision, WaitDecision, WaitFailure,
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
fn an_acquire_starts_on_memory_a_read_or_the_latest_copy_by_what_it_asks() {
    use crate::engine::tests::request;
    use crate::model::RequestId;
    use Basis::*;
    let lease = granted("h", NOW).1;
    let waits = |ms| crate::engine::AcquireRequest {
        waiting_ms: Some(ms),
        ..request("c")
    };
    let retry = crate::engine::AcquireRequest {
        request_id: Some(RequestId::parse("r1").unwrap()),
        ..waits(100)
    };
    let renew = crate::engine::AcquireRequest {
        lease_id: Some(lease),
        ..request("c")
    };
    // (request, callers wait here, last written held, basis)
    let table = [
        (request("c"), false, false, Cached),
        (request("c"), false, true, Latest),
        (waits(0), false, true, Latest),
        (waits(100), false, true, Cached),
        (waits(100), true, false, Remembered),
        (waits(0), true, false, Read),
        (request("c"), true, true, Read),
        (retry.clone(), true, false, Read),
        (retry, false, true, Cached),
        (renew.clone(), false, true, Read),
        (renew, true, false, Read),
    ];
    for (i, (request, here, held, want)) in table.into_iter().enumerate() {
        assert_eq!(request.first_basis(here, || held), want, "row {i}");
    }
    let asked = std::cell::Cell::new(false);
    let basis = waits(100).first_basis(false, || {
        asked.set(true);
        true
    });
    assert_eq!(basis, Cached);
    assert!(
        !asked.get(),
        "what was last written is asked only of a call that will not wait"
    );
}

#[test]
fn a_grant_is_planned_on_memory_only_over_a_free_unmarked_record_nobody_asks_for() {
    assert!(grant_on_memory(&LockRecord::default()));
    let (record, _) = granted("h", NOW);
    assert!(!grant_on_memory(&record));
    let marked = LockRecord {
        queued: Some(0),
        ..LockRecord::default()
    };
    assert!(!grant_on_memory(&marked));
    let asked = with_requestor(LockRecord::default(), &waiter("w", 2, 1), 2, NOW.plus(1000));
    assert!(!grant_on_memory(&asked));
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
    let expired = match record.holder().unwrap().expires {
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
