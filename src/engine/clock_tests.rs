//! Rule-by-rule tests of the takeover margin: when a lock whose lease has ended may be taken
//! over, and when a refused caller is told to come back.

use super::tests::{granted, request, NOW};
use super::waiting_tests::waiter;
use super::*;

const SKEW: u64 = 2000;

fn clock(now: UnixMillis, max_skew_ms: u64) -> Clock {
    Clock { now, max_skew_ms }
}

/// A lock granted at `NOW` for 1000 ms, and the lease's end.
fn ended_at() -> (LockRecord, UnixMillis) {
    (granted("a", NOW).0, NOW.plus(1000))
}

#[test]
fn a_lease_in_its_margin_names_when_the_lock_may_be_taken_over() {
    let (record, expiry) = ended_at();
    let takeover = expiry.plus(SKEW);
    for live in [NOW, expiry.minus(1)] {
        assert_eq!(
            clock(live, SKEW).pending_takeover(&record),
            None,
            "{live:?}"
        );
    }
    for within in [expiry, expiry.plus(1), takeover.minus(1)] {
        assert_eq!(
            clock(within, SKEW).pending_takeover(&record),
            Some(takeover),
            "{within:?}"
        );
    }
    for past in [takeover, takeover.plus(60_000)] {
        assert_eq!(
            clock(past, SKEW).pending_takeover(&record),
            None,
            "{past:?}"
        );
    }
}

#[test]
fn there_is_no_margin_without_skew_a_holder_or_an_end() {
    let (record, expiry) = ended_at();
    assert_eq!(clock(expiry, 0).pending_takeover(&record), None);
    assert_eq!(
        clock(expiry, SKEW).pending_takeover(&LockRecord::default()),
        None
    );
    let mut forever = record;
    forever.holder_mut().unwrap().expires = Expiry::Never;
    assert_eq!(clock(expiry, SKEW).pending_takeover(&forever), None);
}

#[test]
fn the_margin_is_exactly_where_an_expired_lock_is_refused_and_its_end_is_a_grant() {
    let (record, expiry) = ended_at();
    let other = request("b");
    let mut at = NOW;
    while at <= expiry.plus(SKEW + 100) {
        let now = clock(at, SKEW);
        let decision = decide_acquire(&record, &[], &other, now, LeaseId::random());
        let in_margin = state(&record, at) == LockState::Expired
            && decision == AcquireDecision::Refuse(AcquireRefusal::LockHeld);
        assert_eq!(now.pending_takeover(&record).is_some(), in_margin, "{at:?}");
        if let Some(takeover) = now.pending_takeover(&record) {
            assert!(matches!(
                decide_acquire(
                    &record,
                    &[],
                    &other,
                    clock(takeover, SKEW),
                    LeaseId::random()
                ),
                AcquireDecision::Grant { .. }
            ));
        }
        at = at.plus(50);
    }
}

#[test]
fn a_refused_caller_is_told_to_come_back_only_when_nobody_is_queued() {
    let (record, expiry) = ended_at();
    let in_margin = clock(expiry.plus(500), SKEW);
    assert_eq!(retry_at(&record, &[], in_margin), Some(expiry.plus(SKEW)));
    // The head of the queue takes the lock when the margin ends.
    assert_eq!(retry_at(&record, &[waiter("w", 0, 1)], in_margin), None);
    // A live lease may be renewed at any time: no time can be named.
    assert_eq!(retry_at(&record, &[], clock(NOW, SKEW)), None);
}
