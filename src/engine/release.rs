//! Renew, release and force release: what the holder (or an admin) may do to a lock.
//!
//! Keeps I2 (a renewal keeps its lease's token), I7 (`successor`: the requestor, else the
//! queue's head) and I11 (`succeeding` remembers the lease of the hold a write ends, and
//! `spent_entry` never grants a lease that holds the lock or held it just before); see
//! DESIGN.md, "Invariants".

use super::{holder_with_lease, live_requestor, replaced, state, LockState};
use crate::model::FencingToken;
use crate::model::{LeaseId, UnixMillis};
use crate::record::{Expiry, Holder, LockRecord};
use crate::waiter::{Ticket, Waiter};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RenewDecision {
    Write(Box<LockRecord>),
    NotOwner,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReleaseDecision {
    /// End `ending`'s hold with nobody to pass it to: write `released(record, ending)` (for
    /// a lock, a free record, which the collector removes).
    Delete { ending: Box<Holder> },
    /// Pass `ending`'s lock (or permit) to this waiter in the same write that ends its lease.
    HandOff { to: Waiter, ending: Box<Holder> },
    /// Nothing to do: the lock is free, or its lease ran out.
    AlreadyFree,
    /// Another caller holds a live lease.
    NotOwner,
}

/// What a renewal asks for besides a lease that runs from now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Renewal {
    /// The lease's new length; `None` keeps the one it has.
    pub lease_ms: Option<u64>,
    /// The holder's new message (an election's proclaimed value); `None` keeps it.
    pub message: Option<String>,
    /// An election's rule (I17): a lease past its end on this instance's clock is not
    /// renewed, even while nobody has taken it over, so a `no_leader` once told stays true.
    pub strict: bool,
}

impl Renewal {
    /// A lock's renewal: a new length, or the same one.
    pub fn lease(lease_ms: Option<u64>) -> Renewal {
        Renewal {
            lease_ms,
            ..Renewal::default()
        }
    }
}

/// Renew extends the lease from `now`; `renewal.lease_ms` (if given) becomes the lease's
/// length. A lease that ran out but that nobody has taken can still be renewed, unless the
/// renewal is `strict`. A pending requestor stays (unlike Helix, where a renewal silently
/// wipes it).
pub fn decide_renew(
    current: &LockRecord,
    lease_id: &LeaseId,
    renewal: &Renewal,
    now: UnixMillis,
) -> RenewDecision {
    let Some(holder) = holder_with_lease(current, lease_id) else {
        return RenewDecision::NotOwner;
    };
    if renewal.strict && holder.expires.has_passed(now) {
        return RenewDecision::NotOwner;
    }
    let length = renewal.lease_ms.or(holder.lease_ms).unwrap_or(0);
    let mut renewed = Holder {
        expires: Expiry::At(now.plus(length)),
        lease_ms: Some(length),
        ..holder.clone()
    };
    if let Some(message) = &renewal.message {
        renewed.message = message.clone();
    }
    RenewDecision::Write(Box::new(LockRecord {
        holders: replaced(current, holder, renewed),
        forced: None,
        ..current.clone()
    }))
}

/// Whether the queue entry a hand-off chose, whose ticket is `ticket`, is spent: its lease
/// holds the lock in `record`, or held it in the hold the current one replaced
/// (`LockRecord::ended_lease`), so its request was granted already (through another entry
/// of the same `request_id`, whose late join this one is, or by an inline retry). Handing
/// it the lock would grant the lease a second time, under a new token: the entry is
/// removed instead, and the next one decided on (I11).
pub fn spent_entry(record: &LockRecord, ticket: &Ticket) -> bool {
    holder_with_lease(record, &ticket.lease_id).is_some()
        || record.ended_lease == Some(ticket.lease_id)
}

/// `next`, to be written over `current`, with the lease of the latest hold that ended
/// (`LockRecord::ended_lease`, which [`spent_entry`] reads): `current`'s holder's lease when
/// `next` ends that hold (a hand-off, a takeover, a release or a force release), else the
/// one `current` remembers (a grant of a free lock). Every record that may change the holder
/// is built through here; one that keeps the holder (a renewal, a re-acquire, a mark, the
/// requestor slot) copies the rest of `current`, this field with it (I11).
pub fn succeeding(current: &LockRecord, next: LockRecord) -> LockRecord {
    let ended = ended_by(current, &next);
    LockRecord {
        ended_lease: match ended {
            Some(was) => was.lease_id.or(current.ended_lease),
            None => current.ended_lease,
        },
        ..next
    }
}

/// The hold of `before` that `after` ends, if any (a write ends at most one).
pub fn ended_by<'a>(before: &'a LockRecord, after: &LockRecord) -> Option<&'a Holder> {
    before
        .holders
        .iter()
        .rfind(|was| !after.holders.iter().any(|h| was.same_grant(h)))
}

/// The record once `ending`'s hold ends with nobody to pass it to: for a lock, a free
/// record; for a semaphore, its other holders under its limit (free when none is left).
pub fn released(current: &LockRecord, ending: &Holder) -> LockRecord {
    let holders: Vec<Holder> = current
        .holders
        .iter()
        .filter(|h| !h.same_grant(ending))
        .cloned()
        .collect();
    let next = match holders.is_empty() {
        true => LockRecord::default(),
        false => LockRecord {
            holders,
            limit: current.limit,
            ..LockRecord::default()
        },
    };
    succeeding(current, next)
}

/// Who gets the lock when its holder lets go: the live requestor, else the queue's head (I7).
fn successor(current: &LockRecord, queue: &[Waiter]) -> Option<Waiter> {
    let requestor = live_requestor(current, queue).and_then(|r| r.waiter.as_ref());
    requestor
        .and_then(|id| queue.iter().find(|w| &w.id == id))
        .or_else(|| queue.first())
        .cloned()
}

fn let_go(current: &LockRecord, queue: &[Waiter], ending: &Holder) -> ReleaseDecision {
    let ending = Box::new(ending.clone());
    match successor(current, queue) {
        Some(to) => ReleaseDecision::HandOff { to, ending },
        None => ReleaseDecision::Delete { ending },
    }
}

pub fn decide_release(
    current: &LockRecord,
    queue: &[Waiter],
    lease_id: &LeaseId,
    now: UnixMillis,
) -> ReleaseDecision {
    if let Some(holder) = holder_with_lease(current, lease_id) {
        return let_go(current, queue, holder);
    }
    match state(current, now) {
        LockState::Held => ReleaseDecision::NotOwner,
        LockState::Free | LockState::Expired => ReleaseDecision::AlreadyFree,
    }
}

/// An admin's force release removes whatever holds the lock (a semaphore's first permit, or
/// the one whose token is `token`); waiters get it as on release.
pub fn decide_force_release(
    current: &LockRecord,
    queue: &[Waiter],
    token: Option<FencingToken>,
) -> ReleaseDecision {
    let ending = match token {
        None => current.holders.first(),
        Some(token) => current
            .holders
            .iter()
            .find(|h| h.fencing_token == Some(token)),
    };
    match ending {
        Some(holder) => let_go(current, queue, holder),
        None => ReleaseDecision::AlreadyFree,
    }
}

/// Whether a record may be collected (deleted by the collector, I12): free, with no queue
/// mark that says a caller may be about to wait for it.
pub fn collectable(record: &LockRecord) -> bool {
    record.is_free() && record.queued.is_none()
}
