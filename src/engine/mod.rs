//! The lock decision: a pure function of (current record, request, now).
//!
//! Nothing here does I/O or reads a clock. The service layer reads the record, asks this
//! module what to do, and performs the one conditional write the decision names. Every rule
//! of the contract that decides *who holds a lock* lives here, so it can be tested
//! exhaustively without a store.

use crate::model::{FencingToken, LeaseId, Owner, Priority, RequestId, UnixMillis};
use crate::record::{Expiry, Holder, LockRecord};

#[cfg(test)]
mod tests;

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
    Refuse(AcquireRefusal),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcquireRefusal {
    /// Someone else holds a live lease, and the caller may not take it.
    LockHeld,
    /// The `request_id` was used before with a different request body.
    RequestIdReused,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RenewDecision {
    Write(Box<LockRecord>),
    NotOwner,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReleaseDecision {
    /// Remove the record: nobody needs it any more.
    Delete,
    /// Nothing to do: the lock is free, or its lease ran out.
    AlreadyFree,
    /// Another caller holds a live lease.
    NotOwner,
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
    match &record.holder {
        None => LockState::Free,
        Some(h) if h.expires.has_passed(now) => LockState::Expired,
        Some(_) => LockState::Held,
    }
}

/// The holder, if its lease is still live at `now`.
fn live_holder(record: &LockRecord, now: UnixMillis) -> Option<&Holder> {
    record
        .holder
        .as_ref()
        .filter(|h| !h.expires.has_passed(now))
}

/// The holder, live or lazily expired, if `lease_id` is its lease.
fn holder_with_lease<'a>(record: &'a LockRecord, lease_id: &LeaseId) -> Option<&'a Holder> {
    record
        .holder
        .as_ref()
        .filter(|h| h.lease_id.as_ref() == Some(lease_id))
}

pub fn decide_acquire(
    current: &LockRecord,
    request: &AcquireRequest,
    now: UnixMillis,
    new_lease_id: LeaseId,
) -> AcquireDecision {
    if let (Some(holder), Some(request_id)) = (&current.holder, &request.request_id) {
        if holder.request_id.as_deref() == Some(request_id.as_str())
            && holder.owner == request.owner.as_str()
        {
            if holder.request_digest.as_deref() != Some(request.request_digest.as_str()) {
                return AcquireDecision::Refuse(AcquireRefusal::RequestIdReused);
            }
            if let Some(lease_id) = holder.lease_id {
                return AcquireDecision::AlreadyGranted { lease_id };
            }
        }
    }
    if let Some(holder) = request
        .lease_id
        .as_ref()
        .and_then(|lease| holder_with_lease(current, lease))
    {
        let renewed = Holder {
            fencing_token: holder.fencing_token,
            acquired_at: holder.acquired_at,
            lease_id: holder.lease_id,
            request_id: holder.request_id.clone(),
            request_digest: holder.request_digest.clone(),
            ..new_holder(request, now, holder.lease_id.unwrap_or(new_lease_id))
        };
        return AcquireDecision::Reacquire {
            record: LockRecord {
                holder: Some(renewed),
                requestor: current.requestor.clone(),
            },
            lease_id: holder.lease_id.unwrap_or(new_lease_id),
        };
    }
    if live_holder(current, now).is_some() {
        return AcquireDecision::Refuse(AcquireRefusal::LockHeld);
    }
    AcquireDecision::Grant {
        record: LockRecord::held_by(new_holder(request, now, new_lease_id)),
        lease_id: new_lease_id,
    }
}

fn new_holder(request: &AcquireRequest, now: UnixMillis, lease_id: LeaseId) -> Holder {
    Holder {
        owner: request.owner.as_str().to_owned(),
        message: request.message.clone(),
        expires: Expiry::At(now.plus(request.lease_ms)),
        priority: request.priority.get(),
        waiting_ms: request.waiting_ms,
        cleanup_ms: request.cleanup_ms,
        forceful: request.forceful,
        lease_id: Some(lease_id),
        lease_ms: Some(request.lease_ms),
        acquired_at: Some(now),
        fencing_token: None,
        notify_url: request.notify_url.clone(),
        request_id: request.request_id.as_ref().map(|r| r.as_str().to_owned()),
        request_digest: request
            .request_id
            .as_ref()
            .map(|_| request.request_digest.clone()),
    }
}

/// Renew extends the lease from `now`; `lease_ms` (if given) becomes the lease's length.
/// A lease that ran out but that nobody has taken can still be renewed.
pub fn decide_renew(
    current: &LockRecord,
    lease_id: &LeaseId,
    lease_ms: Option<u64>,
    now: UnixMillis,
) -> RenewDecision {
    let Some(holder) = holder_with_lease(current, lease_id) else {
        return RenewDecision::NotOwner;
    };
    let length = lease_ms.or(holder.lease_ms).unwrap_or(0);
    let renewed = Holder {
        expires: Expiry::At(now.plus(length)),
        lease_ms: Some(length),
        ..holder.clone()
    };
    RenewDecision::Write(Box::new(LockRecord {
        holder: Some(renewed),
        requestor: current.requestor.clone(),
    }))
}

pub fn decide_release(
    current: &LockRecord,
    lease_id: &LeaseId,
    now: UnixMillis,
) -> ReleaseDecision {
    if holder_with_lease(current, lease_id).is_some() {
        return ReleaseDecision::Delete;
    }
    match state(current, now) {
        LockState::Held => ReleaseDecision::NotOwner,
        LockState::Free | LockState::Expired => ReleaseDecision::AlreadyFree,
    }
}

/// An admin's force release removes whatever holds the lock.
pub fn decide_force_release(current: &LockRecord) -> ReleaseDecision {
    if current.is_free() {
        ReleaseDecision::AlreadyFree
    } else {
        ReleaseDecision::Delete
    }
}

/// True only while `token` is the token of the live holder.
pub fn is_current(record: &LockRecord, token: FencingToken, now: UnixMillis) -> bool {
    live_holder(record, now).is_some_and(|h| h.fencing_token == Some(token))
}

/// Milliseconds left on the holder's lease; `None` when free or never expiring.
pub fn remaining_ms(record: &LockRecord, now: UnixMillis) -> Option<u64> {
    match record.holder.as_ref()?.expires {
        Expiry::Never => None,
        Expiry::At(at) => Some(u64::try_from(at.0.saturating_sub(now.0)).unwrap_or(0)),
    }
}
