//! What a waiting caller does next: take the lock, ask the holder to clean up, give up, or
//! wait for a change. Re-decided after every wake-up, from a fresh read.
//!
//! Keeps (DESIGN.md, "Invariants") I1 (the head takes only a lock with no untakeable holder), I5
//! (`revoking` only at the cleanup limit and when forceful, or at once on `cleanup_ms` 0), I11
//! (`WaitFailure::LeaseEnded`: an ended lease is not granted again; how a waiting call ends
//! otherwise is `leaving`'s) and I15 (`over_waiters_cap`, `admission`).

use super::{
    announce_waiter, handed_to, holder_with_lease, limit_mismatch, live_requestor, may_preempt,
    queued_after, refusal_trust, Basis, Clock, Trust,
};
use crate::model::UnixMillis;
use crate::record::{Forced, Holder, LockRecord, Requestor};
use crate::waiter::{Ticket, Waiter, Watch};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitFailure {
    /// `waiting_ms` ran out.
    WaitTimeout,
    /// A higher requestor took this caller's requestor slot.
    Superseded,
    /// This caller's lease held the lock in the hold that ended last: its request was granted
    /// (to this call, its answer lost, or to a retry) and that grant has ended (I11).
    LeaseEnded,
    /// A semaphore came to be held under another limit than this caller's (I18).
    LimitMismatch,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WaitDecision {
    /// The lock was handed to this waiter.
    Granted,
    /// Write `record` (this waiter as holder) and leave the queue in the same write.
    /// `revoked` is a live holder that loses the lock, and must be told.
    Take {
        record: Box<LockRecord>,
        revoked: Option<Box<Holder>>,
    },
    /// Write `record`, which makes this waiter the requestor. `first` means the holder has
    /// not been asked to clean up yet in this round, and must be.
    Register {
        record: Box<LockRecord>,
        first: bool,
    },
    /// The cleanup window ran out for a non-forceful requestor: write `record` (the slot
    /// cleared; the holder keeps the lock and is told), then answer `cleanup_timeout`.
    GiveUpCleanup {
        record: Box<LockRecord>,
    },
    Fail(WaitFailure),
    /// Write `record`, which says that callers are queued, then decide again.
    Announce {
        record: Box<LockRecord>,
    },
    /// Nothing to do before `until` (if any) or a change to `watch`.
    Wait {
        until: Option<UnixMillis>,
        watch: Watch,
    },
    /// This waiter's queue entry is gone and it does not hold the lock: the entry vanished
    /// with its store session, or a hand-off gave this waiter the lock and it was taken from
    /// it since. Which one, only the store can tell (the service asks it).
    Vanished,
}

/// Whether the per-lock cap turns `me` away: room is judged by arrival, so a waiter is
/// turned away when `cap` callers joined before it (later joiners have higher sequence
/// numbers and never count). The queue thus holds at most the cap, plus callers about to
/// leave or not yet counted (I15), and its listing stays far below ZooKeeper's packet limit. An
/// SRE override is never turned away.
pub fn over_waiters_cap(queue: &[Waiter], me: &Waiter, priority: u32, cap: usize) -> bool {
    let earlier = queue.iter().filter(|w| w.seq < me.seq).count();
    earlier >= cap && priority != crate::model::Priority::OVERRIDE.get()
}

/// Whether a waiting caller not yet counted against the per-lock cap is let in, judged on a
/// queue read on `basis` (I15).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Within the cap: counted, and not judged again.
    Admitted,
    /// Not judged: a remembered queue is not the whole queue (a rider sees only the waiter
    /// ahead of it), so the caller is judged on its next read.
    Unjudged,
    /// Over the cap on the latest copy: the caller leaves with `too_many_waiters`.
    TooMany,
    /// Over the cap on a copy that may still list waiters that have left: judged again on
    /// this basis, since the refusal is given on the latest copy only (I4).
    ReadAgain(Basis),
}

/// See [`Admission`]; `over_waiters_cap` says who is over the cap.
pub fn admission(
    queue: &[Waiter],
    me: &Waiter,
    priority: u32,
    cap: usize,
    basis: Basis,
) -> Admission {
    if basis == Basis::Remembered {
        return Admission::Unjudged;
    }
    if !over_waiters_cap(queue, me, priority, cap) {
        return Admission::Admitted;
    }
    match refusal_trust(basis) {
        Trust::Act => Admission::TooMany,
        Trust::ReadAgain(again) => Admission::ReadAgain(again),
    }
}

/// Whether `record`'s requestor slot is the waiter `waiter_id`'s.
pub fn names_requestor(record: &LockRecord, waiter_id: &str) -> bool {
    record.requestor.as_ref().and_then(|r| r.waiter.as_deref()) == Some(waiter_id)
}

/// The entries of `me`'s call other than `me`: made by a join whose answer was lost, then
/// retried. The call removes them, or one would later be handed the lock (I11).
pub fn orphans<'a>(queue: &'a [Waiter], me: &'a Waiter) -> impl Iterator<Item = &'a Waiter> {
    queue.iter().filter(|w| w.key == me.key && w.id != me.id)
}

fn earliest(a: Option<UnixMillis>, b: Option<UnixMillis>) -> Option<UnixMillis> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// `me` waits as `my_id`; `was_requestor` says it held the requestor slot at some point.
pub fn decide_waiting(
    current: &LockRecord,
    queue: &[Waiter],
    me: &Ticket,
    my_id: &str,
    was_requestor: bool,
    now: impl Into<Clock>,
) -> WaitDecision {
    let clock = now.into();
    let now = clock.now;
    if holder_with_lease(current, &me.lease_id).is_some() {
        return WaitDecision::Granted;
    }
    if current.ended_lease == Some(me.lease_id) {
        // Taking the lock now would grant the ended lease again, under a new token (I11).
        return WaitDecision::Fail(WaitFailure::LeaseEnded);
    }
    let Some(position) = queue.iter().position(|w| w.id == my_id) else {
        return WaitDecision::Vanished;
    };
    let wait_until = me.wait_until();
    let waited_out = wait_until.is_some_and(|until| now >= until);
    let behind = |until| WaitDecision::Wait {
        until,
        watch: Watch::Predecessor(queue[position - 1].id.clone()),
    };

    if limit_mismatch(current, queue, me.limit) {
        return WaitDecision::Fail(WaitFailure::LimitMismatch);
    }
    let Some(holder) = clock.untakeable_holder(current) else {
        // Free, or the lease ran out: the head takes it (nothing was written at expiry); of
        // a semaphore, as many from the head as there are permits to take.
        return if position < clock.free_permits(current) {
            WaitDecision::Take {
                record: Box::new(handed_to(
                    current,
                    me,
                    my_id,
                    None,
                    clock,
                    queued_after(current, queue, Some(my_id), true),
                )),
                revoked: None,
            }
        } else if waited_out {
            WaitDecision::Fail(WaitFailure::WaitTimeout)
        } else {
            behind(wait_until)
        };
    };
    let slot = current.requestor.as_ref();
    let i_am_requestor = names_requestor(current, my_id);
    if i_am_requestor && me.priority > holder.priority {
        let deadline = slot.and_then(|r| r.cleanup_deadline).unwrap_or(now);
        let limit = earliest(wait_until, Some(deadline)).unwrap_or(deadline);
        if now >= limit {
            return if me.forceful {
                revoking(
                    current,
                    me,
                    my_id,
                    holder,
                    clock,
                    queued_after(current, queue, Some(my_id), true),
                )
            } else {
                let kept = LockRecord {
                    requestor: None,
                    queued: current.queued.max(Some(me.priority)),
                    forced: None,
                    ..current.clone()
                };
                WaitDecision::GiveUpCleanup {
                    record: Box::new(kept),
                }
            };
        }
        return WaitDecision::Wait {
            until: earliest(Some(limit), clock.next_takeover(current)),
            watch: Watch::Record,
        };
    }
    if was_requestor {
        return WaitDecision::Fail(WaitFailure::Superseded);
    }
    if may_preempt(me.priority, holder, live_requestor(current, queue)) {
        if holder.cleanup_ms == 0 {
            return revoking(
                current,
                me,
                my_id,
                holder,
                clock,
                queued_after(current, queue, Some(my_id), true),
            );
        }
        // The cleanup deadline is fixed by the first request against this holder; a higher
        // requestor that displaces a lower one inherits it. A void requestor (its waiter is
        // gone) counts as none: this round starts afresh, and the holder is asked again.
        let live = live_requestor(current, queue);
        let first = live.is_none();
        // The request began when the service received the call, unless the lock changed
        // hands after that: then it began now.
        let received = UnixMillis(me.received_at);
        let requested_at = if holder.acquired_at.is_some_and(|at| at <= received) {
            received
        } else {
            now
        };
        let deadline = live
            .and_then(|r| r.cleanup_deadline)
            .unwrap_or(requested_at.plus(holder.cleanup_ms));
        let requestor = Requestor {
            owner: me.owner.clone(),
            priority: me.priority,
            waiting_ms: me.waiting_ms,
            requested_at,
            waiter: Some(my_id.to_owned()),
            forceful: me.forceful,
            cleanup_deadline: Some(deadline),
        };
        let record = LockRecord {
            requestor: Some(requestor),
            queued: current.queued.max(Some(me.priority)),
            forced: None,
            ..current.clone()
        };
        return WaitDecision::Register {
            record: Box::new(record),
            first,
        };
    }
    if waited_out {
        return WaitDecision::Fail(WaitFailure::WaitTimeout);
    }
    if wait_until.is_none() {
        // A preemptor without waiting_ms only waits on the holder's cleanup; it can no longer
        // preempt, because a higher requestor came first.
        return WaitDecision::Fail(WaitFailure::Superseded);
    }
    if let Some(announced) = announce_waiter(current, me.priority) {
        // Make the record's version change, so the holder's release reads the queue.
        return WaitDecision::Announce {
            record: Box::new(announced),
        };
    }
    if position == 0 {
        WaitDecision::Wait {
            until: earliest(wait_until, clock.next_takeover(current)),
            watch: Watch::Record,
        }
    } else {
        behind(wait_until)
    }
}

/// Takes the lock from `holder`, a live holder that has not let go (so the record says
/// `forced`, and the holder must be told).
fn revoking(
    current: &LockRecord,
    me: &Ticket,
    my_id: &str,
    holder: &Holder,
    clock: Clock,
    queued: Option<u32>,
) -> WaitDecision {
    WaitDecision::Take {
        record: Box::new(LockRecord {
            forced: Some(Forced::Preemption),
            ..handed_to(current, me, my_id, Some(holder), clock, queued)
        }),
        revoked: Some(Box::new(holder.clone())),
    }
}
