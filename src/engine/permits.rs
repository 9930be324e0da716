//! A record's holders: which are live, which holds a lease, and where a grant puts its
//! holder. A lock has at most one holder; a semaphore at most its `limit` (I18), in grant
//! order.
//!
//! Keeps I18 (DESIGN.md, "Invariants"): `with_permit` puts a holder only in place of the hold
//! its write ends, or of a takeable one when every permit is taken, and `limit_mismatch`
//! keeps a busy semaphore's limit.

use super::{released, succeeding, Clock};
use crate::model::{LeaseId, UnixMillis};
use crate::record::{Expiry, Holder, LockRecord};
use crate::waiter::{Ticket, Waiter};

/// The holders whose leases are still live at `now`.
pub(crate) fn live_holders(
    record: &LockRecord,
    now: UnixMillis,
) -> impl Iterator<Item = &Holder> + '_ {
    record
        .holders
        .iter()
        .filter(move |h| !h.expires.has_passed(now))
}

/// A lock's holder, if its lease is still live at `now` (a semaphore's first live one).
pub(crate) fn live_holder(record: &LockRecord, now: UnixMillis) -> Option<&Holder> {
    live_holders(record, now).next()
}

/// The holder, live or lazily expired, if `lease_id` is its lease.
pub(crate) fn holder_with_lease<'a>(
    record: &'a LockRecord,
    lease_id: &LeaseId,
) -> Option<&'a Holder> {
    record
        .holders
        .iter()
        .find(|h| h.lease_id.as_ref() == Some(lease_id))
}

/// Whether a caller that asks for `limit` permits may not use `record`: it has holders or
/// waiters under another limit (I18). A lock asks for none and has none.
pub(crate) fn limit_mismatch(record: &LockRecord, queue: &[Waiter], limit: Option<u32>) -> bool {
    let busy = !record.holders.is_empty() || record.queued.is_some() || !queue.is_empty();
    busy && record.limit.is_some() && record.limit != limit
}

/// `current` with `holder` granted a permit. The holder goes last (grant order), in place of
/// `ending` (a hold this write ends), or of a takeable holder (whose lease ended past the
/// margin: so a semaphore's lapsed permits are cleared as a lock's lapsed holder is). The
/// limit stays the record's while other holders remain, and is otherwise `limit` (the
/// caller's: a lock's `None`). A lock's grant so replaces its holder and clears the
/// requestor slot; a semaphore's keeps a requestor other than `taker` while the holder it
/// asked (the victim) is still the one it would take: the slot's deadline was that
/// holder's.
pub(crate) fn with_permit(
    current: &LockRecord,
    holder: Holder,
    ending: Option<&Holder>,
    taker: Option<&str>,
    limit: Option<u32>,
    clock: Clock,
) -> LockRecord {
    let ending = ending.or_else(|| clock.takeable_holder(current));
    let mut holders: Vec<Holder> = current
        .holders
        .iter()
        .filter(|h| ending.is_none_or(|e| !h.same_grant(e)))
        .cloned()
        .collect();
    let limit = match holders.is_empty() {
        true => limit,
        false => current.limit,
    };
    holders.push(holder);
    let mut next = succeeding(
        current,
        LockRecord {
            holders,
            limit,
            requestor: None,
            queued: None,
            forced: None,
            ended_lease: None,
        },
    );
    let same_victim = match (super::victim(current), super::victim(&next)) {
        (Some(was), Some(is)) => was.same_grant(is),
        _ => false,
    };
    next.requestor = current.requestor.clone().filter(|r| {
        limit.is_some() && same_victim && (taker.is_none() || r.waiter.as_deref() != taker)
    });
    next
}

/// `current`'s holders with `was` (one of them) replaced by `now`, in its place.
pub(crate) fn replaced(current: &LockRecord, was: &Holder, now: Holder) -> Vec<Holder> {
    let mut now = Some(now);
    current
        .holders
        .iter()
        .map(|h| match h.same_grant(was) {
            true => now.take().unwrap_or_else(|| h.clone()),
            false => h.clone(),
        })
        .collect()
}

/// The holder a ticket becomes when it is granted at `now`.
pub fn holder_from(ticket: &Ticket, now: UnixMillis) -> Holder {
    Holder {
        owner: ticket.owner.clone(),
        message: ticket.message.clone(),
        expires: Expiry::At(now.plus(ticket.lease_ms)),
        priority: ticket.priority,
        waiting_ms: ticket.waiting_ms,
        cleanup_ms: ticket.cleanup_ms,
        forceful: ticket.forceful,
        lease_id: Some(ticket.lease_id),
        lease_ms: Some(ticket.lease_ms),
        acquired_at: Some(now),
        fencing_token: None,
        notify_url: ticket.notify_url.clone(),
        request_id: ticket.request_id.clone(),
        request_digest: ticket.request_digest.clone(),
    }
}

/// The record that hands the lock (a permit), whose record is `current`, to `ticket`'s waiter
/// `taker`, in place of `ending` (see `with_permit`); `queued` is what it says of the queue
/// (see `queued_after`).
pub fn handed_to(
    current: &LockRecord,
    ticket: &Ticket,
    taker: &str,
    ending: Option<&Holder>,
    clock: Clock,
    queued: Option<u32>,
) -> LockRecord {
    LockRecord {
        queued,
        ..with_permit(
            current,
            holder_from(ticket, clock.now),
            ending,
            Some(taker),
            ticket.limit,
            clock,
        )
    }
}

/// The record a release writes to hand `ending`'s permit to `ticket`'s waiter `taker`
/// (`queued`: what it says of the queue). `None` when the waiter asked for another limit
/// than the semaphore's: it is never handed a permit (I18); the release writes
/// [`kept_waiting`] instead, and the waiter, woken by the write, decides for itself.
pub fn hand_over(
    current: &LockRecord,
    queue: &[Waiter],
    ticket: &Ticket,
    taker: &str,
    ending: &Holder,
    clock: Clock,
    queued: Option<u32>,
) -> Option<LockRecord> {
    if limit_mismatch(current, queue, ticket.limit) {
        return None;
    }
    Some(handed_to(
        current,
        ticket,
        taker,
        Some(ending),
        clock,
        queued,
    ))
}

/// `ending`'s permit freed while callers still wait: the queue mark stays.
pub fn kept_waiting(current: &LockRecord, ending: &Holder) -> LockRecord {
    LockRecord {
        queued: current.queued,
        ..released(current, ending)
    }
}
