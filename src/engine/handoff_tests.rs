//! Rule-by-rule tests of the queue and hand-off: who a waiter watches, who a release or an
//! expiry hands the lock to, and what happens to the requestor slot meanwhile.
//! It shares the helpers of `waiting_tests`.

use super::tests::{delete, granted, hand_off, request, NOW};
use super::waiting_tests::{held, ticket, waiter, with_requestor};
use super::*;
use crate::waiter::Watch;

#[test]
fn an_expired_holder_passes_to_the_head_without_notice() {
    let w = waiter("p", 2, 1);
    let me = ticket("p", 2, None, false);
    let record = with_requestor(held(1000), &w, 2, NOW.plus(1000));
    let decision = decide_waiting(
        &record,
        std::slice::from_ref(&w),
        &me,
        &w.id,
        true,
        NOW.plus(60_000),
    );
    assert!(
        matches!(decision, WaitDecision::Take { revoked: None, .. }),
        "{decision:?}"
    );
}

#[test]
fn queued_waiters_watch_their_predecessor_and_the_head_watches_the_record() {
    let unflagged = held(1000);
    let record = LockRecord {
        queued: Some(1),
        ..unflagged.clone()
    };
    let (a, b) = (waiter("a", 1, 1), waiter("b", 1, 2));
    let queue = [a.clone(), b.clone()];
    let ta = ticket("a", 1, Some(10_000), false);
    let tb = ticket("b", 1, Some(10_000), false);
    assert_eq!(
        decide_waiting(&record, &queue, &ta, &a.id, false, NOW),
        WaitDecision::Wait {
            until: Some(NOW.plus(10_000)),
            watch: Watch::Record
        }
    );
    assert_eq!(
        decide_waiting(&record, &queue, &tb, &b.id, false, NOW),
        WaitDecision::Wait {
            until: Some(NOW.plus(10_000)),
            watch: Watch::Predecessor(a.id.clone())
        }
    );
    assert_eq!(
        decide_waiting(&record, &queue, &tb, &b.id, false, NOW.plus(10_000)),
        WaitDecision::Fail(WaitFailure::WaitTimeout)
    );
    assert!(matches!(
        decide_waiting(&LockRecord::default(), &queue, &ta, &a.id, false, NOW),
        WaitDecision::Take { revoked: None, .. }
    ));
    assert!(matches!(
        decide_waiting(&LockRecord::default(), &queue, &tb, &b.id, false, NOW),
        WaitDecision::Wait { .. }
    ));
    assert_eq!(
        decide_waiting(&record, std::slice::from_ref(&b), &ta, &a.id, false, NOW),
        WaitDecision::Vanished
    );
}

#[test]
fn a_handed_over_waiter_sees_its_grant() {
    let w = waiter("p", 1, 1);
    let me = ticket("p", 1, Some(1000), false);
    let record = handed_to(&LockRecord::default(), &me, "w", None, NOW.into(), None);
    assert_eq!(
        decide_waiting(&record, &[], &me, &w.id, false, NOW),
        WaitDecision::Granted
    );
}

#[test]
fn release_hands_over_to_the_live_requestor_first_then_the_queue_head() {
    let (record, lease) = granted("h", NOW);
    let (a, r) = (waiter("a", 9, 1), waiter("r", 5, 2));
    assert_eq!(decide_release(&record, &[], &lease, NOW), delete(&record));
    assert_eq!(
        decide_release(&record, std::slice::from_ref(&a), &lease, NOW),
        hand_off(&record, a.clone())
    );
    let with_slot = with_requestor(record.clone(), &r, 5, NOW.plus(10));
    assert_eq!(
        decide_release(&with_slot, &[a.clone(), r.clone()], &lease, NOW),
        hand_off(&record, r.clone())
    );
    assert_eq!(
        decide_release(&with_slot, std::slice::from_ref(&a), &lease, NOW),
        hand_off(&record, a.clone()),
        "a void requestor is skipped"
    );
    assert_eq!(
        decide_force_release(&with_slot, std::slice::from_ref(&r), None),
        hand_off(&record, r)
    );
}

#[test]
fn renewal_keeps_the_requestor() {
    let (record, lease) = granted("h", NOW);
    let w = waiter("r", 5, 1);
    let with_slot = with_requestor(record, &w, 5, NOW.plus(10));
    let RenewDecision::Write(renewed) =
        decide_renew(&with_slot, &lease, &Renewal::lease(None), NOW.plus(5))
    else {
        panic!()
    };
    assert_eq!(renewed.requestor, with_slot.requestor);
}

#[test]
fn a_void_requestor_is_replaced_by_a_fresh_round() {
    let dead = waiter("dead", 2, 1);
    let me_w = waiter("me", 2, 2);
    let record = with_requestor(held(1000), &dead, 2, NOW.plus(10));
    let me = ticket("me", 2, Some(5000), false);
    let later = NOW.plus(500);
    let WaitDecision::Register {
        record: next,
        first,
    } = decide_waiting(
        &record,
        std::slice::from_ref(&me_w),
        &me,
        &me_w.id,
        false,
        later,
    )
    else {
        panic!()
    };
    assert!(first, "the holder is asked again");
    assert_eq!(
        next.requestor.unwrap().cleanup_deadline,
        Some(NOW.plus(1000)),
        "from when the call was received"
    );
}

#[test]
fn a_waiter_that_outranks_a_later_holder_starts_its_request_then() {
    let w = waiter("p", 2, 1);
    let me = ticket("p", 2, Some(60_000), false);
    let mut current = held(1000);
    current.holder_mut().unwrap().acquired_at = Some(NOW.plus(5000));
    let at = NOW.plus(6000);
    let WaitDecision::Register { record, .. } =
        decide_waiting(&current, std::slice::from_ref(&w), &me, &w.id, false, at)
    else {
        panic!()
    };
    let slot = record.requestor.unwrap();
    assert_eq!(slot.requested_at, at);
    assert_eq!(slot.cleanup_deadline, Some(at.plus(1000)));
}

#[test]
fn a_waiter_announces_itself_on_a_record_that_says_nobody_waits() {
    let w = waiter("a", 1, 1);
    let me = ticket("a", 1, Some(10_000), false);
    let current = held(1000);
    let WaitDecision::Announce { record } =
        decide_waiting(&current, std::slice::from_ref(&w), &me, &w.id, false, NOW)
    else {
        panic!()
    };
    assert_eq!(record.queued, Some(1));
    assert_eq!(record.holder(), current.holder());
}

#[test]
fn the_head_takes_an_expired_lock_only_after_the_clock_skew_and_wakes_for_it() {
    let w = waiter("p", 0, 1);
    let me = ticket("p", 0, Some(120_000), false);
    let record = LockRecord {
        queued: Some(0),
        ..held(1000)
    };
    let queue = std::slice::from_ref(&w);
    let clock = |now: UnixMillis| Clock {
        now,
        max_skew_ms: 700,
    };
    let expiry = NOW.plus(60_000);
    let early = decide_waiting(&record, queue, &me, &w.id, false, clock(expiry));
    assert_eq!(
        early,
        WaitDecision::Wait {
            until: Some(expiry.plus(700)),
            watch: Watch::Record
        },
        "waits until the lease has ended on every clock"
    );
    let late = decide_waiting(&record, queue, &me, &w.id, false, clock(expiry.plus(700)));
    assert!(matches!(late, WaitDecision::Take { .. }), "{late:?}");
}

#[test]
fn an_entry_whose_lease_holds_the_lock_is_spent_and_never_handed_it() {
    // A retried request_id call was granted through one entry; its first call's join landed
    // late as a second entry with the same ticket's lease.
    let (record, lease) = granted("h", NOW);
    let mut late_join = ticket("h", 0, None, false);
    late_join.lease_id = lease;
    assert!(spent_entry(&record, &late_join));
    // ... also once that lease has run out, or as an admin forces it out.
    let expired = LockRecord {
        holders: record
            .holders
            .iter()
            .map(|h| Holder {
                expires: Expiry::At(NOW.minus(1)),
                ..h.clone()
            })
            .collect(),
        ..record.clone()
    };
    assert!(spent_entry(&expired, &late_join));
    // Any other waiter's entry is not, nor any entry once the lock is free.
    assert!(!spent_entry(&record, &ticket("w", 0, Some(1000), false)));
    assert!(!spent_entry(&LockRecord::default(), &late_join));
}

/// A ticket of the same request as `record`'s holder: the late join of its first call.
fn late_join_of(record: &LockRecord) -> Ticket {
    let mut late_join = ticket("h", 0, None, false);
    late_join.lease_id = record.holder().and_then(|h| h.lease_id).unwrap();
    late_join
}

#[test]
fn an_entry_whose_lease_held_the_lock_one_holder_earlier_is_spent() {
    // The retry was granted; a preemptor took the lock at once (cleanup 0).
    let (granted_record, _) = granted("h", NOW);
    let late_join = late_join_of(&granted_record);
    let (w, me) = (waiter("p", 5, 2), ticket("p", 5, Some(1000), false));
    let queue = std::slice::from_ref(&w);
    let WaitDecision::Take { record: taken, .. } =
        decide_waiting(&granted_record, queue, &me, &w.id, false, NOW)
    else {
        panic!("the preemptor takes the lock");
    };
    assert_eq!(taken.ended_lease, Some(late_join.lease_id));
    // As the preemptor lets go, the late join heads the queue: spent, not handed the lock.
    assert!(spent_entry(&taken, &late_join));
    assert!(!spent_entry(&taken, &ticket("w", 0, Some(1000), false)));
    // Released or forced to free, the lock remembers it too.
    let freed = succeeding(&granted_record, LockRecord::default());
    assert!(spent_entry(&freed, &late_join));
    // A waiter handed the lock after that ends the preemptor's hold, which it then remembers.
    let next = handed_to(
        &taken,
        &ticket("w", 0, Some(1000), false),
        "w",
        taken.holder(),
        NOW.into(),
        None,
    );
    assert_eq!(next.ended_lease, holder_lease(&taken));
}

fn holder_lease(record: &LockRecord) -> Option<LeaseId> {
    record.holder().and_then(|h| h.lease_id)
}

#[test]
fn a_write_that_keeps_the_holder_keeps_the_ended_lease_and_a_new_holder_replaces_it() {
    let ended = LeaseId::random();
    let (mut record, lease) = granted("h", NOW);
    record.ended_lease = Some(ended);
    let renewed = match decide_renew(&record, &lease, &Renewal::lease(Some(5000)), NOW) {
        RenewDecision::Write(renewed) => renewed,
        other => panic!("{other:?}"),
    };
    assert_eq!(renewed.ended_lease, Some(ended));
    let mut again = request("h");
    again.lease_id = Some(lease);
    let AcquireDecision::Reacquire { record: kept, .. } =
        decide_acquire(&record, &[], &again, NOW, LeaseId::random())
    else {
        panic!("a re-acquire");
    };
    assert_eq!(kept.ended_lease, Some(ended));
    let marked = announce_waiter(&record, 3).unwrap();
    assert_eq!(marked.ended_lease, Some(ended));
    // A grant over the lapsed lease ends it; a grant of a free lock keeps what it remembers.
    let later = NOW.plus(60_000);
    let AcquireDecision::Grant { record: over, .. } =
        decide_acquire(&record, &[], &request("x"), later, LeaseId::random())
    else {
        panic!("a grant over an expired lease");
    };
    assert_eq!(over.ended_lease, Some(lease));
    let free = succeeding(&record, LockRecord::default());
    let AcquireDecision::Grant { record: fresh, .. } =
        decide_acquire(&free, &[], &request("x"), NOW, LeaseId::random())
    else {
        panic!("a grant of a free lock");
    };
    assert_eq!(fresh.ended_lease, Some(lease));
}

#[test]
fn a_waiter_whose_lease_held_the_lock_last_does_not_take_it_again() {
    // A request_id call still waits while its retry was granted, and an admin then forced
    // the lock free: its lease's hold has ended, and taking the lock would grant it again.
    let (granted_record, _) = granted("h", NOW);
    let waiting = late_join_of(&granted_record);
    let freed = succeeding(&granted_record, LockRecord::default());
    let w = waiter("h", 0, 3);
    let queue = std::slice::from_ref(&w);
    assert_eq!(
        decide_waiting(&freed, queue, &waiting, &w.id, false, NOW),
        WaitDecision::Fail(WaitFailure::LeaseEnded)
    );
    // Any other head takes it.
    let other = ticket("w", 0, Some(1000), false);
    assert!(matches!(
        decide_waiting(&freed, queue, &other, &w.id, false, NOW),
        WaitDecision::Take { .. }
    ));
}
