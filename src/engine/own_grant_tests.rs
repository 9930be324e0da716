//! A call that meets its own grant: an earlier round's write, whose answer was lost and whose
//! read-back came before it landed, is found holding the lock by a later round of the same
//! call (`AcquireDecision::OwnGrantLanded`). Without the rule that call would be refused (or
//! queued behind itself) while its own lease holds the lock.

use super::tests::{request, NOW};
use super::*;
use crate::record::Requestor;

/// The record a call's first round wrote (`lease` its new lease), as read back later.
fn written_by(req: &AcquireRequest, lease: LeaseId) -> LockRecord {
    match decide_acquire(&LockRecord::default(), &[], req, NOW, lease) {
        AcquireDecision::Grant { mut record, .. } => {
            record.resolve_token(77);
            record
        }
        other => panic!("expected a grant, got {other:?}"),
    }
}

fn waiter(key: &str, priority: u32) -> Waiter {
    Waiter::parse(&format!("{}0000000001", Waiter::id_prefix(priority, key))).unwrap()
}

#[test]
fn a_later_round_that_finds_its_own_lease_is_granted() {
    let lease = LeaseId::random();
    let req = request("a");
    let record = written_by(&req, lease);
    assert_eq!(
        decide_acquire(&record, &[], &req, NOW.plus(1), lease),
        AcquireDecision::OwnGrantLanded { lease_id: lease }
    );
}

#[test]
fn its_own_lease_is_recognised_whatever_else_the_call_or_the_record_says() {
    let lease = LeaseId::random();
    let plain = request("a");
    let mut waits = request("a");
    waits.waiting_ms = Some(5_000);
    let mut high = request("a");
    high.priority = Priority::new(9).unwrap();
    for req in [plain, waits, high] {
        let mut record = written_by(&req, lease);
        // Writes after the grant that kept its holder: a mark of waiters and a requestor.
        record.queued = Some(1);
        let queue = [waiter("b", 50)];
        record.requestor = Some(Requestor {
            owner: "b".into(),
            priority: 50,
            waiting_ms: Some(5_000),
            requested_at: NOW,
            waiter: Some(queue[0].id.clone()),
            forceful: false,
            cleanup_deadline: Some(NOW.plus(100)),
        });
        assert_eq!(
            decide_acquire(&record, &queue, &req, NOW.plus(10), lease),
            AcquireDecision::OwnGrantLanded { lease_id: lease },
            "{req:?}"
        );
    }
}

#[test]
fn another_call_is_not_mistaken_for_the_holder() {
    let lease = LeaseId::random();
    let req = request("a");
    let record = written_by(&req, lease);
    assert_eq!(
        decide_acquire(&record, &[], &req, NOW.plus(1), LeaseId::random()),
        AcquireDecision::Refuse(AcquireRefusal::LockHeld)
    );
}

#[test]
fn its_own_lease_once_run_out_is_decided_as_any_expired_lease() {
    let lease = LeaseId::random();
    let req = request("a");
    let record = written_by(&req, lease);
    let decision = decide_acquire(&record, &[], &req, NOW.plus(req.lease_ms), lease);
    assert!(
        matches!(decision, AcquireDecision::Grant { lease_id, .. } if lease_id == lease),
        "{decision:?}"
    );
}

#[test]
fn a_renewal_is_decided_on_the_lease_it_names() {
    let held = LeaseId::random();
    let mut req = request("a");
    let record = written_by(&req, held);
    req.lease_id = Some(held);
    let decision = decide_acquire(&record, &[], &req, NOW.plus(1), LeaseId::random());
    assert!(
        matches!(decision, AcquireDecision::Reacquire { lease_id, .. } if lease_id == held),
        "{decision:?}"
    );
}

/// A call with a `request_id` derives its lease from it, so a retry (on any instance) comes
/// with the lease of the first call: it is answered as a retry, after a read that no lagging
/// follower can hold back, never as a grant of its own.
#[test]
fn a_retry_with_a_request_id_is_answered_as_a_retry() {
    let lease = LeaseId::random();
    let mut req = request("a");
    req.request_id = Some(RequestId::parse("r1").unwrap());
    let record = written_by(&req, lease);
    assert_eq!(
        decide_acquire(&record, &[], &req, NOW.plus(1), lease),
        AcquireDecision::AlreadyGranted { lease_id: lease }
    );
}
