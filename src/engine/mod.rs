//! The lock decision: a pure function of (current record, queue, request, now).
//!
//! Nothing here does I/O or reads a clock. The service reads the record (and, when it
//! matters, the lock's queue), asks this module what to do, and performs the one conditional
//! write the decision names. Every rule of the contract that decides *who holds a lock*
//! lives here, so it can be tested exhaustively without a store.
//!
//! Keeps (DESIGN.md, "Invariants") I1, I7 and I9 in `decide_acquire` (no grant over an untakeable
//! holder, waiters first, a retry checked against its grant), I2 (a grant stores no token, a
//! re-acquire keeps it), I3 (`is_current`), I5 (`may_preempt`, `live_requestor`) and I10
//! (`OwnGrantLanded`).

use crate::model::{FencingToken, LeaseId, Owner, Priority, RequestId, UnixMillis};
use crate::record::{Expiry, Holder, LockRecord, Requestor};
use crate::waiter::{Ticket, Waiter};

mod basis;
mod clock;
mod leaving;
mod mark;
mod permits;
mod release;
mod settle;
mod waiting;

#[cfg(test)]
mod clock_tests;
#[cfg(test)]
mod handoff_tests;
#[cfg(test)]
mod own_grant_tests;
#[cfg(test)]
mod permit_tests;
#[cfg(test)]
mod renewal_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod waiting_tests;

pub use basis::{
    grant_on_memory, may_have_waiters, queue_matters, refusal_trust, remembered_queue_holds,
    remembered_turn_holds, Basis, Trust,
};
pub use clock::{retry_at, victim, Clock};
pub use leaving::{
    after_leaving, gave_up_holding, gives_up_in_trouble, giving_up_reads_on, vanished,
    AfterLeaving, Vanished,
};
pub use mark::{announce_waiter, may_ride_behind, queued_after, queued_with};
use permits::with_permit;
pub use permits::{hand_over, handed_to, holder_from, kept_waiting};
pub(crate) use permits::{holder_with_lease, limit_mismatch, live_holder, live_holders, replaced};
pub use release::{
    collectable, decide_force_release, decide_release, decide_renew, ended_by, released,
    spent_entry, succeeding, ReleaseDecision, RenewDecision, Renewal,
};
pub use settle::{hold_over, landed};
pub use waiting::{
    admission, decide_waiting, names_requestor, orphans, over_waiters_cap, Admission, WaitDecision,
    WaitFailure,
};

/// A validated acquire request.
#[derive(Clone, Debug)]
pub struct AcquireRequest {
    pub owner: Owner,
    pub lease_ms: u64,
    pub message: String,
    pub priority: Priority,
    pub cleanup_ms: u64,
    pub waiting_ms: Option<u64>,
    pub forceful: bool,
    pub notify_url: Option<String>,
    pub request_id: Option<RequestId>,
    /// A digest of the request body, so a reused `request_id` with another body is caught.
    pub request_digest: String,
    pub lease_id: Option<LeaseId>,
    /// A semaphore's number of permits; `None` for a lock (one).
    pub limit: Option<u32>,
    /// Who calls, for the audit trail.
    pub actor: crate::audit::Actor,
}

impl AcquireRequest {
    /// The ticket this request waits with in a queue; `now` is when the call was received.
    pub fn ticket(&self, key: String, lease_id: LeaseId, now: UnixMillis) -> Ticket {
        Ticket {
            key,
            owner: self.owner.as_str().to_owned(),
            lease_ms: self.lease_ms,
            message: self.message.clone(),
            priority: self.priority.get(),
            cleanup_ms: self.cleanup_ms,
            waiting_ms: self.waiting_ms,
            forceful: self.forceful,
            notify_url: self.notify_url.clone(),
            lease_id,
            request_id: self.request_id.as_ref().map(|r| r.as_str().to_owned()),
            request_digest: self
                .request_id
                .as_ref()
                .map(|_| self.request_digest.clone()),
            wait_until: self.waiting_ms.map(|w| now.plus(w).0),
            received_at: now.0,
            limit: self.limit,
            actor: self.actor.clone(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AcquireDecision {
    /// Write `record`, which makes the caller the holder under a new lease. Its fencing
    /// token is the zxid of that write.
    Grant {
        record: LockRecord,
        lease_id: LeaseId,
    },
    /// The caller already holds the lock: write `record` (new lease length, message and
    /// priority), keeping the lease id, the fencing token and any pending requestor.
    Reacquire {
        record: LockRecord,
        lease_id: LeaseId,
    },
    /// A retry of the acquire that created the current grant: answer it again, write nothing.
    AlreadyGranted {
        lease_id: LeaseId,
    },
    /// The current grant is this very call's (one without a `request_id`): an earlier
    /// round's write of it landed after its lost answer had been read back as not landed
    /// (`service::outcome`). It is the caller's fresh grant; write nothing.
    OwnGrantLanded {
        lease_id: LeaseId,
    },
    /// Join the lock's queue and wait (to preempt the holder, or for one's turn).
    Wait,
    Refuse(AcquireRefusal),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcquireRefusal {
    /// Someone else holds a live lease, or one still in its takeover margin (see `Clock`),
    /// or waits ahead, and the caller may not wait.
    LockHeld,
    /// The `request_id` was used before with a different request body.
    RequestIdReused,
    /// The grant this `request_id` made has ended (its lease ran out, or it was released or
    /// taken over): a retry must not report it as held.
    LeaseEnded,
    /// A semaphore with holders or waiters has another limit (I18).
    LimitMismatch,
}

/// What a reader sees of a lock at a given instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockState {
    Free,
    Held,
    /// The lease ran out and nobody has taken the lock since (lazy expiry).
    Expired,
}

pub fn state(record: &LockRecord, now: UnixMillis) -> LockState {
    if record.holders.is_empty() {
        LockState::Free
    } else if live_holders(record, now).next().is_some() {
        LockState::Held
    } else {
        LockState::Expired
    }
}

/// The pending requestor, if it is still waiting in the queue. A requestor whose waiter is
/// gone (its caller left, or its instance's session ended) is void.
pub fn live_requestor<'a>(record: &'a LockRecord, queue: &[Waiter]) -> Option<&'a Requestor> {
    record.requestor.as_ref().filter(|r| {
        r.waiter
            .as_ref()
            .is_some_and(|id| queue.iter().any(|w| &w.id == id))
    })
}

/// True when a caller of `priority` may preempt the live holder `holder`: it outranks the
/// holder and any live requestor (I5).
pub(crate) fn may_preempt(priority: u32, holder: &Holder, requestor: Option<&Requestor>) -> bool {
    priority > holder.priority && requestor.is_none_or(|r| priority > r.priority)
}

pub fn decide_acquire(
    current: &LockRecord,
    queue: &[Waiter],
    request: &AcquireRequest,
    now: impl Into<Clock>,
    new_lease_id: LeaseId,
) -> AcquireDecision {
    let clock = now.into();
    let now = clock.now;
    if let Some(request_id) = &request.request_id {
        let earlier = current.holders.iter().find(|h| {
            h.request_id.as_deref() == Some(request_id.as_str())
                && h.owner == request.owner.as_str()
        });
        if let Some(holder) = earlier {
            if holder.request_digest.as_deref() != Some(request.request_digest.as_str()) {
                return AcquireDecision::Refuse(AcquireRefusal::RequestIdReused);
            }
            if holder.expires.has_passed(now) {
                return AcquireDecision::Refuse(AcquireRefusal::LeaseEnded);
            }
            if let Some(lease_id) = holder.lease_id {
                return AcquireDecision::AlreadyGranted { lease_id };
            }
        }
    }
    // A new lease is drawn at random for each call without a `request_id`, so only this call
    // can have written it: a record that holds it is this call's grant, landed late. Once that
    // lease has run out it is nobody's, and the call is decided as any other. (A call with a
    // `request_id` derives its lease from it, so its retries share it: such a grant is
    // recognised above, and answered only after a read that no follower can hold back.)
    if request.request_id.is_none()
        && holder_with_lease(current, &new_lease_id).is_some_and(|h| !h.expires.has_passed(now))
    {
        return AcquireDecision::OwnGrantLanded {
            lease_id: new_lease_id,
        };
    }
    // The hold that ended last was this call's lease (its grant landed, its answer lost, or
    // a retry of its `request_id` was granted), and it ended: a grant now would hand the same
    // lease a new token (I11).
    if current.ended_lease == Some(new_lease_id) {
        return AcquireDecision::Refuse(AcquireRefusal::LeaseEnded);
    }
    if limit_mismatch(current, queue, request.limit) {
        return AcquireDecision::Refuse(AcquireRefusal::LimitMismatch);
    }
    if let Some(holder) = request
        .lease_id
        .as_ref()
        .and_then(|lease| holder_with_lease(current, lease))
    {
        let lease_id = holder.lease_id.unwrap_or(new_lease_id);
        let renewed = Holder {
            fencing_token: holder.fencing_token,
            acquired_at: holder.acquired_at,
            request_id: holder.request_id.clone(),
            request_digest: holder.request_digest.clone(),
            ..new_holder(request, now, lease_id)
        };
        return AcquireDecision::Reacquire {
            record: LockRecord {
                holders: replaced(current, holder, renewed),
                forced: None,
                ..current.clone()
            },
            lease_id,
        };
    }
    let priority = request.priority.get();
    let may_wait = request.waiting_ms.is_some_and(|w| w > 0);
    if let Some(holder) = clock.untakeable_holder(current) {
        return if may_preempt(priority, holder, live_requestor(current, queue)) || may_wait {
            AcquireDecision::Wait
        } else {
            AcquireDecision::Refuse(AcquireRefusal::LockHeld)
        };
    }
    // A permit is free or expired: waiters come first, unless the caller outranks them, or
    // there are more permits free than waiters it does not outrank (a lock has one).
    let ahead = queue.iter().filter(|w| w.priority >= priority).count();
    match ahead >= clock.free_permits(current) {
        true if may_wait => AcquireDecision::Wait,
        true => AcquireDecision::Refuse(AcquireRefusal::LockHeld),
        false => AcquireDecision::Grant {
            record: LockRecord {
                queued: queued_after(current, queue, None, true),
                ..with_permit(
                    current,
                    new_holder(request, now, new_lease_id),
                    None,
                    None,
                    request.limit,
                    clock,
                )
            },
            lease_id: new_lease_id,
        },
    }
}

fn new_holder(request: &AcquireRequest, now: UnixMillis, lease_id: LeaseId) -> Holder {
    holder_from(&request.ticket(String::new(), lease_id, now), now)
}

/// True only while `token` is the token of a live holder (I3: no margin here).
pub fn is_current(record: &LockRecord, token: FencingToken, now: UnixMillis) -> bool {
    live_holders(record, now).any(|h| h.fencing_token == Some(token))
}

/// Milliseconds left on a lock holder's lease; `None` when free or never expiring.
pub fn remaining_ms(record: &LockRecord, now: UnixMillis) -> Option<u64> {
    match record.holder()?.expires {
        Expiry::Never => None,
        Expiry::At(at) => Some(now.millis_until(at)),
    }
}
