//! The election's renewal rules (I17): a strict renewal ends with the lease, on the
//! instance's clock and at the instant itself; a proclaim replaces the value and keeps the
//! term.

use super::tests::{granted, NOW};
use super::*;

fn strict(message: Option<&str>) -> Renewal {
    Renewal {
        lease_ms: None,
        message: message.map(str::to_owned),
        strict: true,
    }
}

#[test]
fn a_strict_renewal_is_refused_from_the_lease_end_on() {
    // `granted` leases for 1000 ms from NOW.
    let (record, lease) = granted("leader", NOW);
    let RenewDecision::Write(renewed) = decide_renew(&record, &lease, &strict(None), NOW.plus(999))
    else {
        panic!("a live lease is renewed")
    };
    assert_eq!(
        renewed.holder().unwrap().expires,
        Expiry::At(NOW.plus(1999))
    );
    for at in [NOW.plus(1000), NOW.plus(1001), NOW.plus(60_000)] {
        assert_eq!(
            decide_renew(&record, &lease, &strict(None), at),
            RenewDecision::NotOwner,
            "at {at:?}"
        );
        assert!(
            matches!(
                decide_renew(&record, &lease, &Renewal::lease(None), at),
                RenewDecision::Write(_)
            ),
            "a lock's renewal is lazy"
        );
    }
}

#[test]
fn a_proclaim_replaces_the_value_and_keeps_the_term() {
    let (record, lease) = granted("leader", NOW);
    let RenewDecision::Write(proclaimed) =
        decide_renew(&record, &lease, &strict(Some("10.0.0.2:80")), NOW.plus(10))
    else {
        panic!("the leader may proclaim")
    };
    let holder = proclaimed.holder().unwrap();
    assert_eq!(holder.message, "10.0.0.2:80");
    assert_eq!(holder.fencing_token, Some(FencingToken(77)));
    assert_eq!(holder.lease_id, Some(lease));
    let RenewDecision::Write(kept) = decide_renew(&proclaimed, &lease, &strict(None), NOW.plus(20))
    else {
        panic!()
    };
    assert_eq!(
        kept.holder().cloned().unwrap().message,
        "10.0.0.2:80",
        "a renewal keeps it"
    );
    assert_eq!(
        decide_renew(&record, &LeaseId::random(), &strict(Some("x")), NOW),
        RenewDecision::NotOwner,
        "only the leader proclaims"
    );
}
