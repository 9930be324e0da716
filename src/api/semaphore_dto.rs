//! The JSON shapes of a semaphore: the Semaphore (its permits' holders out of its limit,
//! and its queue) and the acquire body with its `limit`.
//!
//! A semaphore is a lock record with up to `limit` holders (I18), so its shapes are read off
//! the lock's snapshot. A holder's `lease_id` is never shown.

use serde::{Deserialize, Serialize};

use super::dto::{digest_of, rfc3339, AcquireBody, Limits};
use super::error::ApiError;
use super::json_int::{integer, optional_integer};
use crate::engine::{self, AcquireRequest};
use crate::record::{Expiry, Holder, RequestorInfo};
use crate::service::LockSnapshot;

/// The most permits a semaphore may have: its record stays far below ZooKeeper's 1 MB.
pub const MAX_LIMIT: i64 = 128;

/// One permit's holder, as a reader sees it.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PermitInfo {
    pub owner: String,
    pub priority: u32,
    pub fencing_token: Option<u64>,
    pub message: String,
    pub acquired_at: Option<String>,
    pub expires_at: Option<String>,
    pub remaining_ms: Option<u64>,
    /// Milliseconds left of this holder's cleanup window, while a requestor asks it.
    pub cleanup_remaining_ms: Option<u64>,
    /// When the permit may be taken over, while its lease has ended within the margin.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub takeover_at: Option<String>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SemaphoreInfo {
    pub name: String,
    /// `None` while the semaphore has no holder and no waiter.
    pub limit: Option<u32>,
    /// The live permits.
    pub held: u64,
    /// Every holder, live or expired and not yet taken over, in grant order.
    pub holders: Vec<PermitInfo>,
    pub requestor: Option<RequestorInfo>,
    pub waiters: u64,
}

impl PermitInfo {
    /// `h`, a holder of `semaphore`, as a reader sees it.
    pub fn of(h: &Holder, semaphore: &LockSnapshot) -> PermitInfo {
        let now = semaphore.read_at;
        let record = &semaphore.record;
        // The holder a pending requestor asks to give way.
        let asked =
            record.requestor.is_some() && engine::victim(record).is_some_and(|v| v.same_grant(h));
        let deadline = record.requestor.as_ref().and_then(|r| r.cleanup_deadline);
        let expires = match h.expires {
            Expiry::Never => None,
            Expiry::At(at) => Some(at),
        };
        let ended = expires.is_some_and(|at| now >= at);
        PermitInfo {
            owner: h.owner.clone(),
            priority: h.priority,
            fencing_token: h.fencing_token.map(|t| t.0),
            message: h.message.clone(),
            acquired_at: h.acquired_at.and_then(rfc3339),
            expires_at: expires.and_then(rfc3339),
            remaining_ms: expires.map(|at| now.millis_until(at)),
            cleanup_remaining_ms: deadline.filter(|_| asked).map(|d| now.millis_until(d)),
            // As a lock shows it: while the takeover is pending (every permit taken).
            takeover_at: expires
                .filter(|_| ended && semaphore.takeover_at.is_some())
                .map(|at| at.plus(semaphore.margin_ms))
                .and_then(rfc3339),
        }
    }
}

impl SemaphoreInfo {
    pub fn of(semaphore: &LockSnapshot) -> SemaphoreInfo {
        let now = semaphore.read_at;
        let record = &semaphore.record;
        let permit = |h: &Holder| PermitInfo::of(h, semaphore);
        let busy = !record.holders.is_empty() || semaphore.waiters > 0;
        SemaphoreInfo {
            name: semaphore.name.to_string(),
            limit: record.limit.filter(|_| busy),
            held: engine::live_holders(record, now).count() as u64,
            holders: record.holders.iter().map(permit).collect(),
            requestor: record.requestor.as_ref().map(RequestorInfo::of),
            waiters: semaphore.waiters,
        }
    }
}

/// A semaphore acquire: a lock acquire's fields, and the semaphore's `limit`.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SemaphoreAcquireBody {
    pub owner: String,
    #[serde(deserialize_with = "integer")]
    pub limit: i64,
    #[serde(deserialize_with = "integer")]
    pub lease_ms: i64,
    #[serde(default)]
    pub message: String,
    #[serde(default, deserialize_with = "integer")]
    pub priority: i64,
    #[serde(default, deserialize_with = "integer")]
    pub cleanup_ms: i64,
    #[serde(default, deserialize_with = "optional_integer")]
    pub waiting_ms: Option<i64>,
    #[serde(default)]
    pub forceful: bool,
    #[serde(default)]
    pub notify_url: Option<String>,
    #[serde(default)]
    pub request_id: Option<String>,
    #[serde(default)]
    pub lease_id: Option<String>,
}

impl SemaphoreAcquireBody {
    /// The lock acquire this is, for `limit` permits. The request digest is this body's, so
    /// a `request_id` sent again with another limit is caught.
    pub fn validate(&self, limits: Limits) -> Result<AcquireRequest, ApiError> {
        if !(1..=MAX_LIMIT).contains(&self.limit) {
            return Err(ApiError::invalid(format!(
                "limit must be between 1 and {MAX_LIMIT}"
            )));
        }
        let body = AcquireBody {
            owner: self.owner.clone(),
            lease_ms: self.lease_ms,
            message: self.message.clone(),
            priority: self.priority,
            cleanup_ms: self.cleanup_ms,
            waiting_ms: self.waiting_ms,
            forceful: self.forceful,
            notify_url: self.notify_url.clone(),
            request_id: self.request_id.clone(),
            lease_id: self.lease_id.clone(),
        };
        body.check_message()?;
        Ok(AcquireRequest {
            limit: Some(self.limit as u32),
            ..body.request(limits, digest_of(self))?
        })
    }
}

/// The answer to an acquire that got a permit.
#[derive(Debug, Serialize)]
pub struct AcquiredPermit {
    pub acquired: bool,
    pub lease_id: String,
    pub fencing_token: u64,
    pub semaphore: SemaphoreInfo,
}
