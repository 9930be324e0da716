//! Rule-by-rule tests of a semaphore's permits (I18): a lock's rules over up to `limit`
//! holders.

use super::tests::{request, NOW};
use super::waiting_tests::{ticket, waiter};
use super::*;
use crate::model::Priority;

/// A request for one of `limit` permits.
fn asking(owner: &str, limit: u32, priority: u32) -> AcquireRequest {
    AcquireRequest {
        limit: Some(limit),
        priority: Priority::new(i64::from(priority)).unwrap(),
        ..request(owner)
    }
}

/// `record` after granting `owner` a permit of `limit` at `now`, with its token resolved as
/// the store would (the write's zxid is `token`).
fn grant(record: &LockRecord, owner: &str, limit: u32, now: UnixMillis, token: u64) -> LockRecord {
    let lease = LeaseId::random();
    match decide_acquire(record, &[], &asking(owner, limit, 0), now, lease) {
        AcquireDecision::Grant { mut record, .. } => {
            record.resolve_token(token as i64);
            record
        }
        other => panic!("{owner}: {other:?}"),
    }
}

fn owners(record: &LockRecord) -> Vec<&str> {
    record.holders.iter().map(|h| h.owner.as_str()).collect()
}

fn full(limit: u32, owners: &[(&str, u32)]) -> LockRecord {
    let mut record = LockRecord::default();
    for (i, (owner, priority)) in owners.iter().enumerate() {
        let request = asking(owner, limit, *priority);
        let AcquireDecision::Grant {
            record: mut next, ..
        } = decide_acquire(&record, &[], &request, NOW, LeaseId::random())
        else {
            panic!("{owner}")
        };
        next.resolve_token(i as i64 + 1);
        record = next;
    }
    record
}

#[test]
fn permits_are_granted_up_to_the_limit_then_refused() {
    let one = grant(&LockRecord::default(), "a", 2, NOW, 10);
    assert_eq!(one.limit, Some(2), "the first grant sets the limit");
    let two = grant(&one, "b", 2, NOW, 11);
    assert_eq!(owners(&two), ["a", "b"], "in grant order");
    let tokens: Vec<_> = two.holders.iter().map(|h| h.fencing_token).collect();
    assert_eq!(tokens, [Some(FencingToken(10)), Some(FencingToken(11))]);
    let third = decide_acquire(&two, &[], &asking("c", 2, 0), NOW, LeaseId::random());
    assert_eq!(third, AcquireDecision::Refuse(AcquireRefusal::LockHeld));
    let mut waits = asking("c", 2, 0);
    waits.waiting_ms = Some(1000);
    assert_eq!(
        decide_acquire(&two, &[], &waits, NOW, LeaseId::random()),
        AcquireDecision::Wait
    );
}

#[test]
fn a_busy_semaphores_limit_cannot_change() {
    let one = grant(&LockRecord::default(), "a", 2, NOW, 10);
    let other = decide_acquire(&one, &[], &asking("b", 3, 0), NOW, LeaseId::random());
    assert_eq!(
        other,
        AcquireDecision::Refuse(AcquireRefusal::LimitMismatch)
    );
    // Expired and not taken over: still busy.
    let later = NOW.plus(60_000);
    let lapsed = decide_acquire(&one, &[], &asking("b", 3, 0), later, LeaseId::random());
    assert_eq!(
        lapsed,
        AcquireDecision::Refuse(AcquireRefusal::LimitMismatch)
    );
    // Waiters alone keep it busy too.
    let marked = LockRecord {
        holders: vec![],
        queued: Some(0),
        ..one.clone()
    };
    let queued = decide_acquire(&marked, &[], &asking("b", 3, 0), NOW, LeaseId::random());
    assert_eq!(
        queued,
        AcquireDecision::Refuse(AcquireRefusal::LimitMismatch)
    );
    // Free, it takes any limit.
    let freed = released(&one, &one.holders[0]);
    assert_eq!(freed.limit, None);
    assert_eq!(grant(&freed, "b", 3, NOW, 12).limit, Some(3));
}

#[test]
fn an_expired_permit_counts_until_the_margin_ends_then_is_taken_over() {
    let two = grant(
        &grant(&LockRecord::default(), "a", 2, NOW, 10),
        "b",
        2,
        NOW.plus(500),
        11,
    );
    let a_ends = NOW.plus(request("a").lease_ms);
    let in_margin = Clock {
        now: a_ends.plus(10),
        max_skew_ms: 100,
    };
    assert_eq!(live_holders(&two, in_margin.now).count(), 1);
    assert!(
        in_margin.untakeable_holder(&two).is_some(),
        "an expired permit in the margin is still held"
    );
    assert_eq!(in_margin.pending_takeover(&two), Some(a_ends.plus(100)));
    let refused = decide_acquire(&two, &[], &asking("c", 2, 0), in_margin, LeaseId::random());
    assert_eq!(refused, AcquireDecision::Refuse(AcquireRefusal::LockHeld));
    let after = Clock {
        now: a_ends.plus(100),
        max_skew_ms: 100,
    };
    let AcquireDecision::Grant { record, .. } =
        decide_acquire(&two, &[], &asking("c", 2, 0), after, LeaseId::random())
    else {
        panic!("the lapsed permit is taken over")
    };
    assert_eq!(owners(&record), ["b", "c"]);
    assert_eq!(
        record.ended_lease, two.holders[0].lease_id,
        "I11: the hold that ended"
    );
}

#[test]
fn the_victim_is_the_lowest_priority_and_the_newest_among_equals() {
    let record = full(3, &[("low-old", 1), ("high", 5), ("low-new", 1)]);
    let clock = Clock::from(NOW);
    assert_eq!(clock.untakeable_holder(&record).unwrap().owner, "low-new");
    // Strictly above the lowest preempts; equal does not.
    for (priority, wait) in [(2, true), (1, false)] {
        let decision = decide_acquire(
            &record,
            &[],
            &asking("x", 3, priority),
            NOW,
            LeaseId::random(),
        );
        assert_eq!(
            decision == AcquireDecision::Wait,
            wait,
            "priority {priority}"
        );
    }
}

#[test]
fn a_preemptor_takes_only_the_victims_permit() {
    let record = full(2, &[("a", 0), ("b", 0)]);
    let (w, mut me) = (waiter("p", 5, 1), ticket("p", 5, Some(1000), false));
    me.limit = Some(2);
    let victim = record.holders[1].clone();
    // The holder's cleanup_ms is 0: it is taken at once.
    let WaitDecision::Take {
        record: taken,
        revoked,
    } = decide_waiting(&record, std::slice::from_ref(&w), &me, &w.id, false, NOW)
    else {
        panic!("the preemptor takes a permit")
    };
    assert_eq!(revoked.as_deref(), Some(&victim));
    assert_eq!(owners(&taken), ["a", "p"]);
    assert_eq!(taken.forced, Some(crate::record::Forced::Preemption));
    assert_eq!(taken.ended_lease, victim.lease_id);
}

#[test]
fn as_many_waiters_take_as_there_are_free_permits() {
    let one = grant(&LockRecord::default(), "a", 3, NOW, 10);
    let queue = [waiter("w1", 0, 1), waiter("w2", 0, 2), waiter("w3", 0, 3)];
    let mine = |i: usize| {
        let mut t = ticket(&format!("w{}", i + 1), 0, Some(1000), false);
        t.limit = Some(3);
        t
    };
    for (i, takes) in [(0, true), (1, true), (2, false)] {
        let decision = decide_waiting(&one, &queue, &mine(i), &queue[i].id, false, NOW);
        assert_eq!(
            matches!(decision, WaitDecision::Take { revoked: None, .. }),
            takes,
            "waiter {i}: {decision:?}"
        );
    }
    // A waiter whose limit the semaphore no longer has fails.
    let mut other = mine(0);
    other.limit = Some(4);
    assert_eq!(
        decide_waiting(&one, &queue, &other, &queue[0].id, false, NOW),
        WaitDecision::Fail(WaitFailure::LimitMismatch)
    );
}

#[test]
fn a_release_ends_one_permit_and_hands_it_on() {
    let record = full(2, &[("a", 0), ("b", 0)]);
    let a = record.holders[0].lease_id.unwrap();
    let ReleaseDecision::Delete { ending } = decide_release(&record, &[], &a, NOW) else {
        panic!("nobody waits")
    };
    let after = released(&record, &ending);
    assert_eq!(owners(&after), ["b"]);
    assert_eq!((after.limit, after.ended_lease), (Some(2), Some(a)));
    assert_eq!(
        after.holders[0].fencing_token,
        record.holders[1].fencing_token
    );
    let w = waiter("c", 0, 1);
    let ReleaseDecision::HandOff { to, ending } =
        decide_release(&record, std::slice::from_ref(&w), &a, NOW)
    else {
        panic!("the waiter gets it")
    };
    let mut c = ticket("c", 0, Some(1000), false);
    c.limit = Some(2);
    let handed = handed_to(&record, &c, &to.id, Some(&ending), NOW.into(), None);
    assert_eq!(owners(&handed), ["b", "c"]);
    // Another caller's lease while a permit is live is not the owner's.
    assert_eq!(
        decide_release(&after, &[], &a, NOW),
        ReleaseDecision::NotOwner
    );
}

#[test]
fn an_admin_frees_the_permit_of_a_token() {
    let record = full(3, &[("a", 0), ("b", 0), ("c", 0)]);
    let b = record.holders[1].clone();
    let freed = decide_force_release(&record, &[], b.fencing_token);
    assert_eq!(
        freed,
        ReleaseDecision::Delete {
            ending: Box::new(b)
        }
    );
    assert_eq!(
        decide_force_release(&record, &[], Some(FencingToken(99))),
        ReleaseDecision::AlreadyFree
    );
}

#[test]
fn a_renewal_renews_its_own_permit_in_place() {
    let record = full(2, &[("a", 0), ("b", 0)]);
    let a = record.holders[0].lease_id.unwrap();
    let later = NOW.plus(400);
    let RenewDecision::Write(renewed) = decide_renew(&record, &a, &Renewal::lease(None), later)
    else {
        panic!("renewed")
    };
    assert_eq!(owners(&renewed), ["a", "b"]);
    assert_eq!(renewed.holders[0].expires, Expiry::At(later.plus(1000)));
    assert_eq!(renewed.holders[1], record.holders[1]);
}

#[test]
fn a_grant_keeps_a_requestor_other_than_the_taker_only_on_a_semaphore() {
    let record = full(2, &[("a", 0)]);
    let r = waiter("r", 5, 1);
    // (The taker outranks the holder asked, which stays the one a preemptor would take.)
    let with = LockRecord {
        requestor: Some(crate::record::Requestor {
            owner: "r".into(),
            priority: 5,
            waiting_ms: None,
            requested_at: NOW,
            waiter: Some(r.id.clone()),
            forceful: false,
            cleanup_deadline: Some(NOW.plus(100)),
        }),
        ..record
    };
    let mut t = ticket("t", 3, Some(1000), false);
    t.limit = Some(2);
    let kept = handed_to(&with, &t, "t-id", None, NOW.into(), None);
    assert!(kept.requestor.is_some(), "another taker keeps the slot");
    let taken = handed_to(&with, &t, &r.id, None, NOW.into(), None);
    assert!(
        taken.requestor.is_none(),
        "the requestor's own grant spends it"
    );
    t.limit = None;
    let lock = LockRecord {
        limit: None,
        holders: vec![],
        ..with
    };
    assert!(handed_to(&lock, &t, "t-id", None, NOW.into(), None)
        .requestor
        .is_none());
}

#[test]
fn a_busy_semaphore_keeps_its_limit_whoever_takes_a_permit() {
    let record = full(5, &[("a", 0), ("b", 0)]);
    let mut other = ticket("w", 0, Some(1000), false);
    other.limit = Some(3);
    let ending = record.holders[0].clone();
    let handed = handed_to(&record, &other, "w-id", Some(&ending), NOW.into(), None);
    assert_eq!(handed.limit, Some(5), "the holders that remain keep it");
    let alone = full(5, &[("a", 0)]);
    let ending = alone.holders[0].clone();
    let fresh = handed_to(&alone, &other, "w-id", Some(&ending), NOW.into(), None);
    assert_eq!(fresh.limit, Some(3), "the only holder's end frees it");
}

#[test]
fn a_requestor_slot_goes_when_its_victim_is_no_longer_the_one_it_would_take() {
    // B (newest of the lowest) is the victim R asked; B's lease has ended past the margin.
    let mut record = full(2, &[("a", 1), ("b", 1)]);
    let r = waiter("r", 5, 1);
    record.requestor = Some(crate::record::Requestor {
        owner: "r".into(),
        priority: 5,
        waiting_ms: None,
        requested_at: NOW,
        waiter: Some(r.id.clone()),
        forceful: true,
        cleanup_deadline: Some(NOW.plus(100)),
    });
    let later = NOW.plus(5000);
    record.holders[1].expires = Expiry::At(NOW);
    // C takes B's permit: A is now the one a preemptor would take, which nobody asked.
    let AcquireDecision::Grant { record: taken, .. } =
        decide_acquire(&record, &[], &asking("c", 2, 9), later, LeaseId::random())
    else {
        panic!("C takes the lapsed permit")
    };
    assert_eq!(owners(&taken), ["a", "c"]);
    assert!(taken.requestor.is_none(), "the slot was B's");
}

#[test]
fn a_waiter_wakes_at_the_earliest_takeover_not_the_victims() {
    let mut record = full(2, &[("a", 0), ("b", 0)]);
    record.holders[0].expires = Expiry::At(NOW.plus(10_000));
    record.holders[1].expires = Expiry::At(NOW.plus(60_000));
    record.queued = Some(0);
    let clock = Clock {
        now: NOW,
        max_skew_ms: 100,
    };
    assert_eq!(clock.next_takeover(&record), Some(NOW.plus(10_100)));
    let (w, mut me) = (waiter("w", 0, 1), ticket("w", 0, Some(120_000), false));
    me.limit = Some(2);
    let decision = decide_waiting(&record, std::slice::from_ref(&w), &me, &w.id, false, clock);
    let WaitDecision::Wait { until, .. } = decision else {
        panic!("{decision:?}")
    };
    assert_eq!(until, Some(NOW.plus(10_100)));
}

#[test]
fn a_caller_gets_a_free_permit_beyond_the_waiters_ahead() {
    let one = grant(&LockRecord::default(), "a", 3, NOW, 10);
    let queue = [waiter("w", 0, 1)];
    // Two permits free, one waiter ahead: one is left for the caller.
    let decision = decide_acquire(&one, &queue, &asking("c", 3, 0), NOW, LeaseId::random());
    assert!(
        matches!(decision, AcquireDecision::Grant { .. }),
        "{decision:?}"
    );
    let two = grant(&one, "b", 3, NOW, 11);
    let decision = decide_acquire(&two, &queue, &asking("c", 3, 0), NOW, LeaseId::random());
    assert_eq!(decision, AcquireDecision::Refuse(AcquireRefusal::LockHeld));
}

#[test]
fn a_grant_clears_a_lapsed_permit_even_with_room() {
    let one = grant(&LockRecord::default(), "a", 3, NOW, 10);
    let later = NOW.plus(request("a").lease_ms + 1);
    let next = grant(&one, "b", 3, later, 11);
    assert_eq!(
        owners(&next),
        ["b"],
        "a's lease ended: its permit goes with this write"
    );
    assert_eq!(next.ended_lease, one.holders[0].lease_id);
}

#[test]
fn a_release_never_hands_a_permit_to_a_waiter_under_another_limit() {
    let record = full(2, &[("a", 0), ("b", 0)]);
    let queue = [waiter("w", 0, 1)];
    let mut other = ticket("w", 0, Some(1000), false);
    other.limit = Some(3);
    let ending = record.holders[0].clone();
    let clock = Clock::from(NOW);
    assert!(hand_over(
        &record,
        &queue,
        &other,
        &queue[0].id,
        &ending,
        clock,
        Some(0)
    )
    .is_none());
    let freed = kept_waiting(
        &LockRecord {
            queued: Some(0),
            ..record.clone()
        },
        &ending,
    );
    assert_eq!((owners(&freed), freed.queued), (vec!["b"], Some(0)));
    other.limit = Some(2);
    let handed = hand_over(&record, &queue, &other, &queue[0].id, &ending, clock, None);
    assert_eq!(owners(&handed.unwrap()), ["b", "w"]);
}
