//! What a change to a lock means, as event-stream types: a pure function of the lock's
//! record before and after the change, and the time. Unit-tested here.
//!
//! The stream sees records, not requests, so each type is read off what the records say:
//! - the same grant (same lease) before and after: `renewed` when its expiry, length or
//!   message changed (an election's `proclaimed` is a renewal with a new value),
//!   `cleanup_requested` / `cleanup_cancelled` when a requestor came or went;
//! - a grant that ended: `released` when its lease was still live, `force_released` when
//!   the record says an admin forced it (`LW_FORCED`); an expired lease that is cleared says
//!   nothing new (`expired` was sent when it ran out);
//! - a new grant: `acquired` on a free or expired lock, `handed_off` when a live holder
//!   passed it on, `revoked` when a preemptor took it (the record says so), and
//!   `force_released` then `handed_off` when an admin's force release passed it to a waiter.
//!
//! A reader may see several writes at once (it reads after being told of the first). A
//! hand-off is one write, so when the record moved on by more than one write between two
//! reads (`several`), a new holder after a live one reads as `released` then `acquired`.
//!
//! Keeps I14 (DESIGN.md, "Invariants"): writes that land between two reads merge into what they
//! mean.

use crate::model::UnixMillis;
use crate::record::{Forced, Holder, LockRecord};

/// The type of an event on a lock's stream (SSE `event:`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Snapshot,
    Acquired,
    Renewed,
    Released,
    Expired,
    HandedOff,
    CleanupRequested,
    CleanupCancelled,
    Revoked,
    ForceReleased,
    Queue,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Snapshot => "snapshot",
            EventType::Acquired => "acquired",
            EventType::Renewed => "renewed",
            EventType::Released => "released",
            EventType::Expired => "expired",
            EventType::HandedOff => "handed_off",
            EventType::CleanupRequested => "cleanup_requested",
            EventType::CleanupCancelled => "cleanup_cancelled",
            EventType::Revoked => "revoked",
            EventType::ForceReleased => "force_released",
            EventType::Queue => "queue",
        }
    }
}

/// The events that the change from `before` to `after` makes, in order; `several` says
/// that more than one write came between them.
pub fn classify(
    before: &LockRecord,
    after: &LockRecord,
    now: UnixMillis,
    several: bool,
) -> Vec<EventType> {
    use EventType::*;
    let live = |h: &Holder| !h.expires.has_passed(now);
    match (before.holder(), after.holder()) {
        (None, None) => vec![],
        (Some(old), None) => match after.forced {
            Some(Forced::Admin) => vec![ForceReleased],
            _ if live(old) => vec![Released],
            _ => vec![],
        },
        (None, Some(_)) => vec![Acquired],
        (Some(old), Some(new)) if old.same_grant(new) => {
            let mut events = Vec::new();
            if old.expires != new.expires
                || old.lease_ms != new.lease_ms
                || old.message != new.message
            {
                events.push(Renewed);
            }
            match (&before.requestor, &after.requestor) {
                (None, Some(_)) => events.push(CleanupRequested),
                (Some(_), None) => events.push(CleanupCancelled),
                (Some(a), Some(b)) if a.waiter != b.waiter || a.owner != b.owner => {
                    events.push(CleanupRequested)
                }
                _ => {}
            }
            events
        }
        (Some(old), Some(_)) => match after.forced {
            Some(Forced::Preemption) => vec![Revoked],
            Some(Forced::Admin) => vec![ForceReleased, HandedOff],
            None if live(old) && several => vec![Released, Acquired],
            None if live(old) => vec![HandedOff],
            None => vec![Acquired],
        },
    }
}

#[cfg(test)]
mod tests {
    use super::EventType::*;
    use super::*;
    use crate::model::{FencingToken, LeaseId};
    use crate::record::{Expiry, Requestor};

    const NOW: UnixMillis = UnixMillis(1_000_000);

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
            classify(&with(Some(before.clone())), &with(Some(after)), NOW, false),
            vec![Renewed]
        );
        assert_eq!(
            classify(&with(Some(before.clone())), &with(Some(before)), NOW, false),
            vec![]
        );
    }

    #[test]
    fn grants_and_their_ends() {
        let free = LockRecord::default();
        let live = holder("a", NOW.0 + 10);
        let ran_out = holder("a", NOW.0 - 1);
        assert_eq!(classify(&free, &free, NOW, false), vec![]);
        assert_eq!(
            classify(&free, &with(Some(live.clone())), NOW, false),
            vec![Acquired]
        );
        assert_eq!(
            classify(&with(Some(live.clone())), &free, NOW, false),
            vec![Released]
        );
        assert_eq!(
            classify(&with(Some(ran_out.clone())), &free, NOW, false),
            vec![]
        );
        let forced_free = LockRecord {
            forced: Some(Forced::Admin),
            ..LockRecord::default()
        };
        assert_eq!(
            classify(&with(Some(live.clone())), &forced_free, NOW, false),
            vec![ForceReleased]
        );
        let next = holder("b", NOW.0 + 10);
        assert_eq!(
            classify(
                &with(Some(live.clone())),
                &with(Some(next.clone())),
                NOW,
                false
            ),
            vec![HandedOff]
        );
        assert_eq!(
            classify(
                &with(Some(live.clone())),
                &with(Some(next.clone())),
                NOW,
                true
            ),
            vec![Released, Acquired],
            "read after a release and an acquire"
        );
        assert_eq!(
            classify(&with(Some(ran_out)), &with(Some(next.clone())), NOW, false),
            vec![Acquired]
        );
        let taken = |forced| LockRecord {
            forced: Some(forced),
            ..with(Some(next.clone()))
        };
        assert_eq!(
            classify(
                &with(Some(live.clone())),
                &taken(Forced::Preemption),
                NOW,
                false
            ),
            vec![Revoked]
        );
        assert_eq!(
            classify(&with(Some(live)), &taken(Forced::Admin), NOW, false),
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
        assert_eq!(classify(&before, &renewed, NOW, false), vec![Renewed]);
        let asked = LockRecord {
            requestor: Some(requestor("sre")),
            ..before.clone()
        };
        assert_eq!(
            classify(&before, &asked, NOW, false),
            vec![CleanupRequested]
        );
        assert_eq!(
            classify(&asked, &before, NOW, false),
            vec![CleanupCancelled]
        );
        let higher = LockRecord {
            requestor: Some(requestor("other")),
            ..before.clone()
        };
        assert_eq!(
            classify(&asked, &higher, NOW, false),
            vec![CleanupRequested]
        );
        let queued = LockRecord {
            queued: Some(3),
            ..before.clone()
        };
        assert_eq!(
            classify(&before, &queued, NOW, false),
            vec![],
            "queue marks are not events"
        );
        let renewed_and_asked = LockRecord {
            requestor: Some(requestor("sre")),
            ..renewed
        };
        assert_eq!(
            classify(&before, &renewed_and_asked, NOW, false),
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
            classify(&before, &with(Some(helix("u1", 5))), NOW, false),
            vec![]
        );
        assert_eq!(
            classify(&before, &with(Some(helix("u2", 9))), NOW, false),
            vec![HandedOff]
        );
    }
}
