//! `classify`'s rules: a lock's grants and their ends, changes to one grant, and a semaphore's
//! permits, each told by its token.

mod locks {
    use super::super::EventType::*;
    use super::super::*;
    use crate::model::{FencingToken, LeaseId};
    use crate::record::{Expiry, Requestor};

    const NOW: UnixMillis = UnixMillis(1_000_000);

    fn kinds(
        before: &LockRecord,
        after: &LockRecord,
        now: UnixMillis,
        several: bool,
    ) -> Vec<EventType> {
        classify(before, after, now, several)
            .into_iter()
            .map(|(kind, _)| kind)
            .collect()
    }

    fn holder(owner: &str, expires: i64) -> Holder {
        Holder {
            owner: owner.into(),
            message: String::new(),
            expires: Expiry::At(UnixMillis(expires)),
            priority: 0,
            waiting_ms: None,
            cleanup_ms: 0,
            forceful: false,
            lease_id: Some(LeaseId::random()),
            lease_ms: Some(1000),
            acquired_at: Some(UnixMillis(0)),
            fencing_token: Some(FencingToken(7)),
            notify_url: None,
            request_id: None,
            request_digest: None,
        }
    }

    fn requestor(owner: &str) -> Requestor {
        Requestor {
            owner: owner.into(),
            priority: 9,
            waiting_ms: None,
            requested_at: NOW,
            waiter: Some(format!("w-{owner}")),
            forceful: false,
            cleanup_deadline: Some(UnixMillis(NOW.0 + 500)),
        }
    }

    fn with(holder: Option<Holder>) -> LockRecord {
        LockRecord {
            holders: holder.into_iter().collect(),
            ..LockRecord::default()
        }
    }

    #[test]
    fn a_new_message_on_the_same_grant_is_a_renewal() {
        let before = holder("a", NOW.0 + 10);
        let after = Holder {
            message: "proclaimed".into(),
            ..before.clone()
        };
        assert_eq!(
            kinds(&with(Some(before.clone())), &with(Some(after)), NOW, false),
            vec![Renewed]
        );
        assert_eq!(
            kinds(&with(Some(before.clone())), &with(Some(before)), NOW, false),
            vec![]
        );
    }

    #[test]
    fn grants_and_their_ends() {
        let free = LockRecord::default();
        let live = holder("a", NOW.0 + 10);
        let ran_out = holder("a", NOW.0 - 1);
        assert_eq!(kinds(&free, &free, NOW, false), vec![]);
        assert_eq!(
            kinds(&free, &with(Some(live.clone())), NOW, false),
            vec![Acquired]
        );
        assert_eq!(
            kinds(&with(Some(live.clone())), &free, NOW, false),
            vec![Released]
        );
        assert_eq!(
            kinds(&with(Some(ran_out.clone())), &free, NOW, false),
            vec![]
        );
        let forced_free = LockRecord {
            forced: Some(Forced::Admin),
            ..LockRecord::default()
        };
        assert_eq!(
            kinds(&with(Some(live.clone())), &forced_free, NOW, false),
            vec![ForceReleased]
        );
        let next = holder("b", NOW.0 + 10);
        assert_eq!(
            kinds(
                &with(Some(live.clone())),
                &with(Some(next.clone())),
                NOW,
                false
            ),
            vec![HandedOff]
        );
        assert_eq!(
            kinds(
                &with(Some(live.clone())),
                &with(Some(next.clone())),
                NOW,
                true
            ),
            vec![Released, Acquired],
            "read after a release and an acquire"
        );
        assert_eq!(
            kinds(&with(Some(ran_out)), &with(Some(next.clone())), NOW, false),
            vec![Acquired]
        );
        let taken = |forced| LockRecord {
            forced: Some(forced),
            ..with(Some(next.clone()))
        };
        assert_eq!(
            kinds(
                &with(Some(live.clone())),
                &taken(Forced::Preemption),
                NOW,
                false
            ),
            vec![Revoked]
        );
        assert_eq!(
            kinds(&with(Some(live)), &taken(Forced::Admin), NOW, false),
            vec![ForceReleased, HandedOff]
        );
    }

    #[test]
    fn changes_to_one_grant() {
        let live = holder("a", NOW.0 + 10);
        let before = with(Some(live.clone()));
        let renewed = with(Some(Holder {
            expires: Expiry::At(UnixMillis(NOW.0 + 1000)),
            ..live.clone()
        }));
        assert_eq!(kinds(&before, &renewed, NOW, false), vec![Renewed]);
        let asked = LockRecord {
            requestor: Some(requestor("sre")),
            ..before.clone()
        };
        assert_eq!(kinds(&before, &asked, NOW, false), vec![CleanupRequested]);
        assert_eq!(kinds(&asked, &before, NOW, false), vec![CleanupCancelled]);
        let higher = LockRecord {
            requestor: Some(requestor("other")),
            ..before.clone()
        };
        assert_eq!(kinds(&asked, &higher, NOW, false), vec![CleanupRequested]);
        let queued = LockRecord {
            queued: Some(3),
            ..before.clone()
        };
        assert_eq!(
            kinds(&before, &queued, NOW, false),
            vec![],
            "queue marks are not events"
        );
        let renewed_and_asked = LockRecord {
            requestor: Some(requestor("sre")),
            ..renewed
        };
        assert_eq!(
            kinds(&before, &renewed_and_asked, NOW, false),
            vec![Renewed, CleanupRequested]
        );
    }

    #[test]
    fn helix_grants_are_told_apart_by_owner_and_token() {
        let helix = |owner: &str, token| Holder {
            lease_id: None,
            fencing_token: Some(FencingToken(token)),
            ..holder(owner, NOW.0 + 10)
        };
        let before = with(Some(helix("u1", 5)));
        assert_eq!(
            kinds(&before, &with(Some(helix("u1", 5))), NOW, false),
            vec![]
        );
        assert_eq!(
            kinds(&before, &with(Some(helix("u2", 9))), NOW, false),
            vec![HandedOff]
        );
    }
}

mod permits {
    use super::super::EventType::*;
    use super::super::*;
    use crate::model::{FencingToken, LeaseId};
    use crate::record::{Expiry, Requestor};

    const NOW: UnixMillis = UnixMillis(1_000_000);

    fn permit(token: u64, expires: i64) -> Holder {
        Holder {
            lease_id: Some(LeaseId::random()),
            fencing_token: Some(FencingToken(token)),
            expires: Expiry::At(UnixMillis(expires)),
            ..Holder::minimal("p")
        }
    }

    fn semaphore(holders: &[&Holder]) -> LockRecord {
        LockRecord {
            holders: holders.iter().map(|h| (*h).clone()).collect(),
            limit: Some(3),
            ..LockRecord::default()
        }
    }

    fn told(kind: EventType, token: u64) -> Told {
        (kind, Some(FencingToken(token)))
    }

    #[test]
    fn each_permit_is_told_by_its_token() {
        let (a, b) = (permit(5, NOW.0 + 10), permit(6, NOW.0 + 10));
        let c = permit(9, NOW.0 + 10);
        let one = semaphore(&[&a]);
        let two = semaphore(&[&a, &b]);
        assert_eq!(classify(&one, &two, NOW, false), [told(Acquired, 6)]);
        assert_eq!(classify(&two, &one, NOW, false), [told(Released, 6)]);
        let handed = semaphore(&[&a, &c]);
        assert_eq!(classify(&two, &handed, NOW, false), [told(HandedOff, 9)]);
        let renewed = Holder {
            expires: Expiry::At(UnixMillis(NOW.0 + 500)),
            ..a.clone()
        };
        assert_eq!(
            classify(&two, &semaphore(&[&renewed, &b]), NOW, false),
            [told(Renewed, 5)]
        );
        let forced = LockRecord {
            forced: Some(Forced::Admin),
            ..one.clone()
        };
        assert_eq!(
            classify(&two, &forced, NOW, false),
            [told(ForceReleased, 6)]
        );
        let preempted = LockRecord {
            forced: Some(Forced::Preemption),
            ..handed.clone()
        };
        assert_eq!(classify(&two, &preempted, NOW, false), [told(Revoked, 6)]);
    }

    #[test]
    fn several_ends_and_grants_read_together_are_each_told() {
        let (a, b, c) = (
            permit(5, NOW.0 + 10),
            permit(6, NOW.0 - 1),
            permit(7, NOW.0 + 10),
        );
        let (d, e) = (permit(8, NOW.0 + 10), permit(9, NOW.0 + 10));
        let before = semaphore(&[&a, &b, &c]);
        let after = semaphore(&[&c, &d, &e]);
        assert_eq!(
            classify(&before, &after, NOW, true),
            [told(Released, 5), told(Acquired, 8), told(Acquired, 9)],
            "the lapsed permit 6 was told when it ran out"
        );
    }

    #[test]
    fn a_cleanup_request_names_the_permit_it_asks() {
        let (high, low) = (
            Holder {
                priority: 5,
                ..permit(5, NOW.0 + 10)
            },
            permit(6, NOW.0 + 10),
        );
        let full = semaphore(&[&high, &low]);
        let asked = LockRecord {
            requestor: Some(Requestor {
                owner: "sre".into(),
                priority: 9,
                waiting_ms: None,
                requested_at: NOW,
                waiter: Some("w".into()),
                forceful: false,
                cleanup_deadline: None,
            }),
            ..full.clone()
        };
        assert_eq!(
            classify(&full, &asked, NOW, false),
            [told(CleanupRequested, 6)]
        );
        assert_eq!(
            classify(&asked, &full, NOW, false),
            [told(CleanupCancelled, 6)]
        );
    }
}
