//! Rule-by-rule tests of the lock decision.

use super::*;
use crate::record::Requestor;

pub(super) const NOW: UnixMillis = UnixMillis(1_000_000);

pub(super) fn request(owner: &str) -> AcquireRequest {
    AcquireRequest {
        owner: Owner::parse(owner).unwrap(),
        lease_ms: 1000,
        message: "msg".into(),
        priority: Priority::default(),
        cleanup_ms: 0,
        waiting_ms: None,
        forceful: false,
        notify_url: None,
        request_id: None,
        request_digest: "d1".into(),
        lease_id: None,
        limit: None,
        actor: Default::default(),
    }
}

/// The release decision that ends `record`'s (a lock's) hold with nobody waiting.
pub(super) fn delete(record: &LockRecord) -> ReleaseDecision {
    ReleaseDecision::Delete {
        ending: Box::new(record.holder().unwrap().clone()),
    }
}

/// The release decision that hands `record`'s lock to `to`.
pub(super) fn hand_off(record: &LockRecord, to: crate::waiter::Waiter) -> ReleaseDecision {
    ReleaseDecision::HandOff {
        to,
        ending: Box::new(record.holder().unwrap().clone()),
    }
}

pub(super) fn granted(owner: &str, now: UnixMillis) -> (LockRecord, LeaseId) {
    let lease = LeaseId::random();
    match decide_acquire(&LockRecord::default(), &[], &request(owner), now, lease) {
        AcquireDecision::Grant {
            mut record,
            lease_id,
        } => {
            record.resolve_token(77);
            (record, lease_id)
        }
        other => panic!("expected a grant, got {other:?}"),
    }
}

#[test]
fn a_free_lock_is_granted_with_a_new_lease() {
    let lease = LeaseId::random();
    let decision = decide_acquire(&LockRecord::default(), &[], &request("a"), NOW, lease);
    let AcquireDecision::Grant { record, lease_id } = decision else {
        panic!("{decision:?}")
    };
    assert_eq!(lease_id, lease);
    let holder = record.holder().cloned().unwrap();
    assert_eq!(holder.owner, "a");
    assert_eq!(holder.expires, Expiry::At(UnixMillis(1_001_000)));
    assert_eq!(holder.acquired_at, Some(NOW));
    assert_eq!(
        holder.fencing_token, None,
        "the grant's token is its write's zxid"
    );
}

#[test]
fn a_live_lock_is_refused_at_equal_or_lower_priority() {
    let (record, _) = granted("a", NOW);
    let other = request("b");
    assert_eq!(
        decide_acquire(&record, &[], &other, NOW.plus(999), LeaseId::random()),
        AcquireDecision::Refuse(AcquireRefusal::LockHeld)
    );
}

#[test]
fn the_same_owner_string_is_not_the_holder_without_its_lease() {
    let (record, _) = granted("a", NOW);
    assert_eq!(
        decide_acquire(&record, &[], &request("a"), NOW, LeaseId::random()),
        AcquireDecision::Refuse(AcquireRefusal::LockHeld)
    );
}

#[test]
fn an_expired_lock_is_granted_to_the_next_caller() {
    let (record, _) = granted("a", NOW);
    let at_expiry = NOW.plus(1000);
    let decision = decide_acquire(&record, &[], &request("b"), at_expiry, LeaseId::random());
    assert!(
        matches!(decision, AcquireDecision::Grant { .. }),
        "{decision:?}"
    );
}

#[test]
fn a_never_expiring_helix_lease_stays_held() {
    let (mut record, _) = granted("a", NOW);
    record.holder_mut().unwrap().expires = Expiry::Never;
    let far = UnixMillis(i64::MAX - 1);
    assert_eq!(state(&record, far), LockState::Held);
    assert_eq!(remaining_ms(&record, far), None);
}

#[test]
fn reacquire_keeps_lease_token_and_requestor_and_updates_the_rest() {
    let (mut record, lease) = granted("a", NOW);
    record.requestor = Some(Requestor {
        owner: "r".into(),
        priority: 3,
        waiting_ms: None,
        requested_at: NOW,
        waiter: None,
        forceful: false,
        cleanup_deadline: None,
    });
    let mut again = request("a");
    again.lease_id = Some(lease);
    again.lease_ms = 5000;
    again.message = "new".into();
    again.priority = Priority::new(2).unwrap();
    let later = NOW.plus(10);
    let decision = decide_acquire(&record, &[], &again, later, LeaseId::random());
    let AcquireDecision::Reacquire {
        record: new,
        lease_id,
    } = decision
    else {
        panic!("{decision:?}")
    };
    assert_eq!(lease_id, lease);
    let holder = new.holder().unwrap();
    assert_eq!(holder.fencing_token, Some(FencingToken(77)));
    assert_eq!(holder.expires, Expiry::At(later.plus(5000)));
    assert_eq!(holder.message, "new");
    assert_eq!(holder.priority, 2);
    assert_eq!(holder.acquired_at, Some(NOW));
    assert_eq!(new.requestor, record.requestor);
}

#[test]
fn an_expired_but_untaken_lease_can_be_reacquired() {
    let (record, lease) = granted("a", NOW);
    let mut again = request("a");
    again.lease_id = Some(lease);
    let decision = decide_acquire(&record, &[], &again, NOW.plus(5000), LeaseId::random());
    assert!(
        matches!(decision, AcquireDecision::Reacquire { .. }),
        "{decision:?}"
    );
}

#[test]
fn a_stale_lease_id_on_a_free_lock_gets_a_fresh_grant() {
    let mut req = request("a");
    req.lease_id = Some(LeaseId::random());
    let decision = decide_acquire(&LockRecord::default(), &[], &req, NOW, LeaseId::random());
    assert!(matches!(decision, AcquireDecision::Grant { .. }));
}

#[test]
fn a_retried_request_id_returns_the_same_grant() {
    let mut req = request("a");
    req.request_id = Some(RequestId::parse("r1").unwrap());
    let lease = LeaseId::random();
    let AcquireDecision::Grant { record, .. } =
        decide_acquire(&LockRecord::default(), &[], &req, NOW, lease)
    else {
        panic!()
    };
    assert_eq!(
        decide_acquire(&record, &[], &req, NOW.plus(1), LeaseId::random()),
        AcquireDecision::AlreadyGranted { lease_id: lease }
    );
    let mut changed = req.clone();
    changed.request_digest = "d2".into();
    assert_eq!(
        decide_acquire(&record, &[], &changed, NOW.plus(1), LeaseId::random()),
        AcquireDecision::Refuse(AcquireRefusal::RequestIdReused)
    );
    let mut other_owner = req.clone();
    other_owner.owner = Owner::parse("b").unwrap();
    assert_eq!(
        decide_acquire(&record, &[], &other_owner, NOW.plus(1), LeaseId::random()),
        AcquireDecision::Refuse(AcquireRefusal::LockHeld),
        "a request id only matches for the same owner"
    );
}

#[test]
fn renew_extends_from_now_and_may_change_the_length() {
    let (record, lease) = granted("a", NOW);
    let later = NOW.plus(500);
    let RenewDecision::Write(same_len) =
        decide_renew(&record, &lease, &Renewal::lease(None), later)
    else {
        panic!()
    };
    assert_eq!(
        same_len.holder().unwrap().expires,
        Expiry::At(later.plus(1000))
    );
    let RenewDecision::Write(longer) =
        decide_renew(&record, &lease, &Renewal::lease(Some(9000)), later)
    else {
        panic!()
    };
    let holder = longer.holder().cloned().unwrap();
    assert_eq!(holder.expires, Expiry::At(later.plus(9000)));
    assert_eq!(holder.lease_ms, Some(9000));
    assert_eq!(holder.fencing_token, Some(FencingToken(77)));
}

#[test]
fn renew_works_after_lazy_expiry_but_not_for_strangers() {
    let (record, lease) = granted("a", NOW);
    assert!(matches!(
        decide_renew(&record, &lease, &Renewal::lease(None), NOW.plus(10_000)),
        RenewDecision::Write(_)
    ));
    assert_eq!(
        decide_renew(&record, &LeaseId::random(), &Renewal::lease(None), NOW),
        RenewDecision::NotOwner
    );
    assert_eq!(
        decide_renew(&LockRecord::default(), &lease, &Renewal::lease(None), NOW),
        RenewDecision::NotOwner
    );
}

#[test]
fn release_rules() {
    let (record, lease) = granted("a", NOW);
    let stranger = LeaseId::random();
    assert_eq!(decide_release(&record, &[], &lease, NOW), delete(&record));
    assert_eq!(
        decide_release(&record, &[], &lease, NOW.plus(5000)),
        delete(&record)
    );
    assert_eq!(
        decide_release(&record, &[], &stranger, NOW),
        ReleaseDecision::NotOwner
    );
    assert_eq!(
        decide_release(&record, &[], &stranger, NOW.plus(1000)),
        ReleaseDecision::AlreadyFree,
        "an expired lock is free to release, and a stranger's release leaves it alone"
    );
    assert_eq!(
        decide_release(&LockRecord::default(), &[], &stranger, NOW),
        ReleaseDecision::AlreadyFree
    );
}

#[test]
fn force_release_removes_any_holder() {
    let (record, _) = granted("a", NOW);
    assert_eq!(decide_force_release(&record, &[], None), delete(&record));
    assert_eq!(
        decide_force_release(&LockRecord::default(), &[], None),
        ReleaseDecision::AlreadyFree
    );
}

#[test]
fn validate_is_true_only_for_the_live_holders_token() {
    let (record, _) = granted("a", NOW);
    assert!(is_current(&record, FencingToken(77), NOW));
    assert!(!is_current(&record, FencingToken(76), NOW));
    assert!(!is_current(&record, FencingToken(77), NOW.plus(1000)));
    assert!(!is_current(&LockRecord::default(), FencingToken(77), NOW));
}

#[test]
fn state_and_remaining_time() {
    let (record, _) = granted("a", NOW);
    assert_eq!(state(&LockRecord::default(), NOW), LockState::Free);
    assert_eq!(state(&record, NOW), LockState::Held);
    assert_eq!(remaining_ms(&record, NOW.plus(400)), Some(600));
    assert_eq!(state(&record, NOW.plus(1000)), LockState::Expired);
    assert_eq!(remaining_ms(&record, NOW.plus(3000)), Some(0));
}

fn queued_at(key: &str, priority: u32) -> Waiter {
    Waiter::parse(&format!("{}0000000001", Waiter::id_prefix(priority, key))).unwrap()
}

#[test]
fn a_joining_caller_writes_the_record_only_when_it_would_be_passed_over() {
    let (held, _) = granted("a", NOW);
    let marked = announce_waiter(&held, 3).expect("nobody was queued");
    assert_eq!(marked.queued, Some(3));
    assert_eq!(
        marked.holder(),
        held.holder(),
        "only the queue mark changes"
    );
    assert_eq!(
        announce_waiter(&marked, 3),
        None,
        "equal priority queues behind"
    );
    assert_eq!(
        announce_waiter(&marked, 1),
        None,
        "lower priority queues behind"
    );
    assert_eq!(
        announce_waiter(&marked, 7).map(|r| r.queued),
        Some(Some(7)),
        "a higher priority must change the record"
    );
    assert_eq!(
        announce_waiter(&LockRecord::default(), 9),
        None,
        "a free lock is taken by the head, never released past it"
    );
}

#[test]
fn a_hand_off_that_queues_callers_marks_their_highest_priority() {
    assert_eq!(queued_with(None, []), None, "nobody joins: no mark");
    assert_eq!(queued_with(Some(4), []), Some(4), "the mark stays");
    assert_eq!(queued_with(None, [2, 6, 1]), Some(6));
    assert_eq!(queued_with(Some(9), [2, 6]), Some(9), "never lowered");
    assert_eq!(queued_with(Some(0), [0]), Some(0));
}

#[test]
fn a_caller_rides_on_a_hand_off_only_behind_the_waiter_handed_the_lock() {
    assert!(
        may_ride_behind(3, Some(3)),
        "equal: it arrived later, so behind"
    );
    assert!(may_ride_behind(2, Some(5)));
    assert!(
        !may_ride_behind(6, Some(5)),
        "it would come first: it joins alone"
    );
    assert!(
        !may_ride_behind(0, None),
        "the lock is freed: nobody to ride behind"
    );
}

#[test]
fn a_hand_off_keeps_the_queues_priority_until_the_queue_is_empty() {
    let (mut held, _) = granted("a", NOW);
    held.queued = Some(5);
    let queue = [queued_at("x", 5), queued_at("y", 1)];
    assert_eq!(
        queued_after(&held, &queue, Some(&queue[0].id), true),
        Some(5)
    );
    assert_eq!(
        queued_after(&held, &queue[1..], None, true),
        Some(5),
        "a high-water mark: it does not fall while anyone waits"
    );
    assert_eq!(
        queued_after(&held, &queue[1..], Some(&queue[1].id), true),
        None
    );
    assert_eq!(
        queued_after(&held, &queue[1..], Some(&queue[1].id), false),
        Some(5),
        "a remembered queue may have grown unseen: the record still says someone waits"
    );
    held.queued = Some(1);
    assert_eq!(queued_after(&held, &queue, None, true), Some(5));
}

#[test]
fn a_retried_request_id_whose_lease_ran_out_is_not_reported_as_held() {
    let mut req = request("a");
    req.request_id = Some(RequestId::parse("r1").unwrap());
    let AcquireDecision::Grant { record, .. } =
        decide_acquire(&LockRecord::default(), &[], &req, NOW, LeaseId::random())
    else {
        panic!()
    };
    // The lease (1000 ms) ran out and nobody took the lock yet: the retry must not say that
    // it holds, because validate of its token already says it does not.
    assert_eq!(
        decide_acquire(&record, &[], &req, NOW.plus(1000), LeaseId::random()),
        AcquireDecision::Refuse(AcquireRefusal::LeaseEnded)
    );
}

#[test]
fn a_call_whose_lease_held_the_lock_last_is_not_granted_it_again() {
    let mut req = request("a");
    req.request_id = Some(RequestId::parse("r1").unwrap());
    let lease = LeaseId::random();
    let AcquireDecision::Grant { record, .. } =
        decide_acquire(&LockRecord::default(), &[], &req, NOW, lease)
    else {
        panic!()
    };
    // Force released: the lock is free, and remembers the lease whose hold ended.
    let freed = succeeding(&record, LockRecord::default());
    assert_eq!(freed.ended_lease, Some(lease));
    assert_eq!(
        decide_acquire(&freed, &[], &req, NOW.plus(10), lease),
        AcquireDecision::Refuse(AcquireRefusal::LeaseEnded)
    );
    assert!(matches!(
        decide_acquire(&freed, &[], &req, NOW.plus(10), LeaseId::random()),
        AcquireDecision::Grant { .. }
    ));
}

fn skewed(now: UnixMillis, max_skew_ms: u64) -> Clock {
    Clock { now, max_skew_ms }
}

#[test]
fn an_expired_lease_is_taken_over_only_once_it_has_ended_on_every_clock() {
    let (record, lease) = granted("a", NOW);
    let expiry = NOW.plus(1000);
    let other = request("b");
    // Expired on this instance's clock, but another's may still be up to 500 ms behind.
    for at in [expiry, expiry.plus(499)] {
        assert_eq!(
            decide_acquire(&record, &[], &other, skewed(at, 500), LeaseId::random()),
            AcquireDecision::Refuse(AcquireRefusal::LockHeld),
            "taken over at {at:?}"
        );
        assert!(!is_current(&record, FencingToken(77), at), "validate: over");
        assert!(
            matches!(
                decide_renew(&record, &lease, &Renewal::lease(None), at),
                RenewDecision::Write(_)
            ),
            "the holder may still renew"
        );
    }
    assert!(matches!(
        decide_acquire(
            &record,
            &[],
            &other,
            skewed(expiry.plus(500), 500),
            LeaseId::random()
        ),
        AcquireDecision::Grant { .. }
    ));
}

#[test]
fn only_a_free_record_with_no_queue_mark_is_collectable() {
    assert!(collectable(&LockRecord::default()));
    let marked = LockRecord {
        queued: Some(0),
        ..LockRecord::default()
    };
    assert!(
        !collectable(&marked),
        "a caller may be about to wait for it"
    );
    assert!(!collectable(&LockRecord::held_by(Holder::minimal("o"))));
}
