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

use crate::engine::victim;
use crate::model::{FencingToken, UnixMillis};
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

/// An event a change makes, and the token of the grant it is about (see
/// [`StreamEvent::token`](super::StreamEvent)).
pub type Told = (EventType, Option<FencingToken>);

/// The events that the change from `before` to `after` makes, in order; `several` says
/// that more than one write came between them.
///
/// The holders are compared grant by grant (a semaphore's record has several): a grant in
/// both may be renewed or asked to clean up, and the grants that ended and began make the
/// lock's events. One write ends at most one grant and makes at most one, so a change that
/// ended or began several is several writes: each end is `released` (when live) and each
/// new grant `acquired`.
pub fn classify(
    before: &LockRecord,
    after: &LockRecord,
    now: UnixMillis,
    several: bool,
) -> Vec<Told> {
    use EventType::*;
    let live = |h: &Holder| !h.expires.has_passed(now);
    let kept = |r: &LockRecord, h: &Holder| r.holders.iter().any(|x| x.same_grant(h));
    let mut events = Vec::new();
    for new in &after.holders {
        let Some(old) = before.holders.iter().find(|h| h.same_grant(new)) else {
            continue;
        };
        if old.expires != new.expires || old.lease_ms != new.lease_ms || old.message != new.message
        {
            events.push((Renewed, new.fencing_token));
        }
    }
    // The holder a requestor asks, while it holds before and after.
    let held_on = |h: &&Holder| kept(before, h) && kept(after, h);
    match (
        &before.requestor,
        &after.requestor,
        victim(before).filter(held_on),
        victim(after).filter(held_on),
    ) {
        (None, Some(_), _, Some(h)) => events.push((CleanupRequested, h.fencing_token)),
        (Some(_), None, Some(h), _) => events.push((CleanupCancelled, h.fencing_token)),
        (Some(a), Some(b), _, Some(h)) if a.waiter != b.waiter || a.owner != b.owner => {
            events.push((CleanupRequested, h.fencing_token))
        }
        _ => {}
    }
    let gone: Vec<&Holder> = before.holders.iter().filter(|h| !kept(after, h)).collect();
    let came: Vec<&Holder> = after.holders.iter().filter(|h| !kept(before, h)).collect();
    let token = |h: &Holder| h.fencing_token;
    match (gone.as_slice(), came.as_slice()) {
        ([], []) => {}
        ([old], []) => match after.forced {
            Some(Forced::Admin) => events.push((ForceReleased, token(old))),
            _ if live(old) => events.push((Released, token(old))),
            _ => {}
        },
        ([old], [new]) => match after.forced {
            Some(Forced::Preemption) => events.push((Revoked, token(old))),
            Some(Forced::Admin) => {
                events.extend([(ForceReleased, token(old)), (HandedOff, token(new))])
            }
            None if live(old) && several => {
                events.extend([(Released, token(old)), (Acquired, token(new))])
            }
            None if live(old) => events.push((HandedOff, token(new))),
            None => events.push((Acquired, token(new))),
        },
        (gone, came) => {
            events.extend(
                gone.iter()
                    .filter(|h| live(h))
                    .map(|h| (Released, token(h))),
            );
            events.extend(came.iter().map(|h| (Acquired, token(h))));
        }
    }
    events
}

#[cfg(test)]
#[path = "classify_tests.rs"]
mod tests;
