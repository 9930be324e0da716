//! Rule-by-rule tests of preemption: who may preempt, the requestor slot, its deadline,
//! and what a preemptor does when its wait or the holder's cleanup window runs out.
//! The queue and hand-off rules are tested in `handoff_tests`.

use super::tests::{granted, request, NOW};
use super::*;
use crate::waiter::Watch;

pub(super) fn waiter(id_key: &str, priority: u32, seq: u64) -> Waiter {
    Waiter::parse(&format!("{}{seq:010}", Waiter::id_prefix(priority, id_key))).unwrap()
}

pub(super) fn ticket(
    owner: &str,
    priority: u32,
    waiting_ms: Option<u64>,
    forceful: bool,
) -> Ticket {
    let mut req = request(owner);
    req.priority = Priority::new(i64::from(priority)).unwrap();
    req.waiting_ms = waiting_ms;
    req.forceful = forceful;
    req.ticket(owner.into(), LeaseId::random(), NOW)
}

/// A lock held by "h" at priority 1 with the given cleanup window.
pub(super) fn held(cleanup_ms: u64) -> LockRecord {
    let (mut record, _) = granted("h", NOW);
    let holder = record.holder_mut().unwrap();
    holder.priority = 1;
    holder.cleanup_ms = cleanup_ms;
    holder.expires = Expiry::At(NOW.plus(60_000));
    record
}

pub(super) fn with_requestor(
    mut record: LockRecord,
    w: &Waiter,
    priority: u32,
    deadline: UnixMillis,
) -> LockRecord {
    record.requestor = Some(Requestor {
        owner: w.key.clone(),
        priority,
        waiting_ms: None,
        requested_at: NOW,
        waiter: Some(w.id.clone()),
        forceful: false,
        cleanup_deadline: Some(deadline),
    });
    record
}

fn acquire_at(priority: i64, waiting_ms: Option<u64>) -> AcquireRequest {
    let mut req = request("c");
    req.priority = Priority::new(priority).unwrap();
    req.waiting_ms = waiting_ms;
    req
}

#[test]
fn a_higher_priority_caller_waits_to_preempt_and_an_equal_one_is_refused() {
    let record = held(1000);
    let decide = |p, w| decide_acquire(&record, &[], &acquire_at(p, w), NOW, LeaseId::random());
    assert_eq!(decide(2, None), AcquireDecision::Wait);
    assert_eq!(
        decide(1, None),
        AcquireDecision::Refuse(AcquireRefusal::LockHeld)
    );
    assert_eq!(
        decide(0, Some(0)),
        AcquireDecision::Refuse(AcquireRefusal::LockHeld)
    );
    assert_eq!(
        decide(1, Some(500)),
        AcquireDecision::Wait,
        "waiting_ms > 0 queues"
    );
}

#[test]
fn a_pending_requestor_of_equal_or_higher_priority_blocks_preemption() {
    let r = waiter("r", 5, 1);
    let record = with_requestor(held(1000), &r, 5, NOW.plus(1000));
    let queue = [r.clone()];
    let decide = |p| {
        decide_acquire(
            &record,
            &queue,
            &acquire_at(p, None),
            NOW,
            LeaseId::random(),
        )
    };
    assert_eq!(decide(5), AcquireDecision::Refuse(AcquireRefusal::LockHeld));
    assert_eq!(
        decide(3),
        AcquireDecision::Refuse(AcquireRefusal::LockHeld),
        "between holder and requestor (Helix bug B1)"
    );
    assert_eq!(decide(6), AcquireDecision::Wait);
    // A requestor whose waiter has gone is void.
    assert_eq!(
        decide_acquire(&record, &[], &acquire_at(3, None), NOW, LeaseId::random()),
        AcquireDecision::Wait
    );
}

#[test]
fn a_free_lock_with_waiters_goes_to_the_queue_first() {
    let queue = [waiter("w", 3, 1)];
    let free = LockRecord::default();
    assert_eq!(
        decide_acquire(&free, &queue, &acquire_at(3, None), NOW, LeaseId::random()),
        AcquireDecision::Refuse(AcquireRefusal::LockHeld)
    );
    assert_eq!(
        decide_acquire(
            &free,
            &queue,
            &acquire_at(3, Some(10)),
            NOW,
            LeaseId::random()
        ),
        AcquireDecision::Wait
    );
    assert!(matches!(
        decide_acquire(&free, &queue, &acquire_at(4, None), NOW, LeaseId::random()),
        AcquireDecision::Grant { .. }
    ));
}

#[test]
fn the_first_preemptor_registers_with_a_deadline_from_the_holders_cleanup() {
    let me = ticket("p", 2, Some(5000), false);
    let w = waiter("p", 2, 1);
    let current = held(1000);
    let decision = decide_waiting(&current, std::slice::from_ref(&w), &me, &w.id, false, NOW);
    let WaitDecision::Register { record, first } = decision else {
        panic!("{decision:?}")
    };
    assert!(first);
    let slot = record.requestor.clone().unwrap();
    assert_eq!(slot.waiter.as_deref(), Some(w.id.as_str()));
    assert_eq!(slot.cleanup_deadline, Some(NOW.plus(1000)));
    assert_eq!(
        record.holder(),
        current.holder(),
        "the holder keeps the lock meanwhile"
    );
}

#[test]
fn a_higher_requestor_displaces_a_lower_one_and_keeps_the_deadline() {
    let low = waiter("low", 2, 1);
    let high = waiter("high", 3, 2);
    let record = with_requestor(held(1000), &low, 2, NOW.plus(1000));
    let queue = [high.clone(), low.clone()];
    let me = ticket("high", 3, Some(30_000), false);
    let later = NOW.plus(400);
    let WaitDecision::Register {
        record: next,
        first,
    } = decide_waiting(&record, &queue, &me, &high.id, false, later)
    else {
        panic!()
    };
    assert!(!first, "the holder is not asked twice");
    assert_eq!(
        next.requestor.as_ref().unwrap().cleanup_deadline,
        Some(NOW.plus(1000))
    );
    let low_ticket = ticket("low", 2, Some(30_000), false);
    assert_eq!(
        decide_waiting(&next, &queue, &low_ticket, &low.id, true, later),
        WaitDecision::Fail(WaitFailure::Superseded)
    );
}

#[test]
fn a_requestor_waits_then_forces_or_gives_up_at_the_earlier_of_its_wait_and_the_deadline() {
    let w = waiter("p", 2, 1);
    let record = with_requestor(held(1000), &w, 2, NOW.plus(1000));
    let patient = ticket("p", 2, Some(5000), false);
    assert_eq!(
        decide_waiting(
            &record,
            std::slice::from_ref(&w),
            &patient,
            &w.id,
            true,
            NOW.plus(10)
        ),
        WaitDecision::Wait {
            until: Some(NOW.plus(1000)),
            watch: Watch::Record
        }
    );
    let hasty = ticket("p", 2, Some(300), false);
    assert_eq!(
        decide_waiting(
            &record,
            std::slice::from_ref(&w),
            &hasty,
            &w.id,
            true,
            NOW.plus(10)
        ),
        WaitDecision::Wait {
            until: Some(NOW.plus(300)),
            watch: Watch::Record
        }
    );
    let WaitDecision::GiveUpCleanup { record: kept } = decide_waiting(
        &record,
        std::slice::from_ref(&w),
        &patient,
        &w.id,
        true,
        NOW.plus(1000),
    ) else {
        panic!()
    };
    assert!(kept.requestor.is_none());
    assert_eq!(
        kept.holder(),
        record.holder(),
        "a non-forceful requestor leaves the holder in place"
    );
    let forceful = ticket("p", 2, Some(300), true);
    let WaitDecision::Take {
        record: taken,
        revoked,
    } = decide_waiting(
        &record,
        std::slice::from_ref(&w),
        &forceful,
        &w.id,
        true,
        NOW.plus(300),
    )
    else {
        panic!()
    };
    assert_eq!(
        taken.holder().cloned().unwrap().lease_id,
        Some(forceful.lease_id)
    );
    assert_eq!(revoked.unwrap().owner, "h");
}

#[test]
fn a_zero_cleanup_window_hands_over_at_once() {
    let w = waiter("p", 2, 1);
    let me = ticket("p", 2, None, false);
    let decision = decide_waiting(&held(0), std::slice::from_ref(&w), &me, &w.id, false, NOW);
    assert!(
        matches!(
            decision,
            WaitDecision::Take {
                revoked: Some(_),
                ..
            }
        ),
        "{decision:?}"
    );
}

#[test]
fn the_waiters_cap_counts_only_callers_who_joined_earlier() {
    let queue: Vec<Waiter> = (1..=4)
        .map(|seq| waiter(&format!("k{seq}"), 0, seq))
        .collect();
    // A caller of higher priority sorts first, yet three joined before it.
    let me = waiter("me", 5, 4);
    let mut with_me = queue[..3].to_vec();
    with_me.insert(0, me.clone());
    assert!(over_waiters_cap(&with_me, &me, 5, 3));
    assert!(!over_waiters_cap(&with_me, &me, 5, 4));
    // Later joiners never count.
    assert!(!over_waiters_cap(&queue, &queue[0], 0, 1));
    assert!(over_waiters_cap(&queue, &queue[3], 0, 3));
}

#[test]
fn the_waiters_cap_turns_a_caller_away_only_on_the_latest_copy_of_a_read_queue() {
    use Basis::*;
    let queue: Vec<Waiter> = (1..=4)
        .map(|seq| waiter(&format!("k{seq}"), 0, seq))
        .collect();
    let (first, last) = (&queue[0], &queue[3]);
    // (me, basis, admission) with a cap of 3: `last` is over it, `first` within it.
    let table = [
        (first, Read, Admission::Admitted),
        (first, Latest, Admission::Admitted),
        (first, Cached, Admission::Admitted),
        (first, Remembered, Admission::Unjudged),
        (last, Remembered, Admission::Unjudged),
        (last, Cached, Admission::ReadAgain(Latest)),
        (last, Read, Admission::ReadAgain(Latest)),
        (last, Latest, Admission::TooMany),
    ];
    for (i, (me, basis, want)) in table.into_iter().enumerate() {
        assert_eq!(admission(&queue, me, 0, 3, basis), want, "row {i}");
    }
    let overriding = Priority::OVERRIDE.get();
    assert_eq!(
        admission(&queue, last, overriding, 3, Latest),
        Admission::Admitted
    );
}

#[test]
fn an_sre_override_is_never_turned_away_by_the_waiters_cap() {
    let queue: Vec<Waiter> = (1..=4)
        .map(|seq| waiter(&format!("k{seq}"), 0, seq))
        .collect();
    let overriding = Priority::OVERRIDE.get();
    assert!(!over_waiters_cap(&queue, &queue[3], overriding, 0));
}

#[test]
fn a_waiter_that_left_passes_on_a_lock_that_reached_it() {
    let (record, lease) = granted("w", NOW);
    let me = waiter("w", 0, 1);
    let mut mine = ticket("w", 0, Some(1_000), false);
    mine.lease_id = lease;
    assert_eq!(after_leaving(&record, &me.id, &mine), AfterLeaving::PassOn);
}

/// A retry of the call may come through another instance and be told it holds the lock: the
/// call's own leaving must not pass that grant on.
#[test]
fn a_waiter_with_a_request_id_that_left_keeps_a_lock_that_reached_it_for_its_retry() {
    let (record, lease) = granted("w", NOW);
    let me = waiter("w", 0, 1);
    let mut mine = ticket("w", 0, Some(1_000), false);
    mine.lease_id = lease;
    mine.request_id = Some("r1".into());
    assert_eq!(
        after_leaving(&record, &me.id, &mine),
        AfterLeaving::KeepForRetry
    );
}

#[test]
fn a_waiter_that_left_withdraws_its_requestor_slot_and_nothing_else() {
    let me = waiter("w", 5, 1);
    let other = waiter("o", 5, 2);
    let mut record = with_requestor(held(30_000), &me, 5, NOW.plus(30_000));
    record.queued = Some(5);
    let mine = ticket("w", 5, Some(1_000), false);
    let AfterLeaving::Withdraw(cleared) = after_leaving(&record, &me.id, &mine) else {
        panic!("the requestor slot is withdrawn");
    };
    assert_eq!(cleared.requestor, None);
    assert_eq!(cleared.holder(), record.holder());
    assert_eq!(cleared.queued, Some(5), "others may still wait");
    // Another waiter's slot, or none, is not this waiter's to touch.
    assert_eq!(
        after_leaving(&record, &other.id, &mine),
        AfterLeaving::Nothing
    );
    assert_eq!(
        after_leaving(&held(0), &me.id, &mine),
        AfterLeaving::Nothing
    );
}

#[test]
fn a_calls_other_entries_are_orphans_and_only_its_own_slot_names_it() {
    let me = waiter("k", 1, 2);
    let lost = waiter("k", 1, 1);
    let other = waiter("j", 1, 3);
    let queue = [lost.clone(), me.clone(), other.clone()];
    let found: Vec<&Waiter> = orphans(&queue, &me).collect();
    assert_eq!(found, [&lost]);
    let asked = with_requestor(held(0), &me, 2, NOW.plus(1000));
    assert!(names_requestor(&asked, &me.id));
    assert!(!names_requestor(&asked, &lost.id));
    assert!(!names_requestor(&held(0), &me.id));
}
