//! The JSON shapes of the API: LockInfo and the request bodies, with their validation.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::error::ApiError;
use super::json_int::{integer, optional_integer};
use crate::engine::{self, AcquireRequest, LockState};
use crate::model::{LeaseId, Owner, Priority, RequestId, UnixMillis};
use crate::record::Expiry;
pub use crate::record::RequestorInfo;
use crate::service::LockSnapshot;

/// Limits set on the command line.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_lease_ms: u64,
    pub max_waiting_ms: u64,
}

pub const MAX_MESSAGE_CHARS: usize = 1024;
pub const MAX_URL_BYTES: usize = 2048;
/// The longest host name DNS can carry (RFC 1035: 255 octets on the wire, 253 characters
/// written out without a final dot), and its longest label. A `notify_url` host is counted
/// in its ASCII form, after IDNA, as the URL standard converts it.
pub const MAX_HOST_CHARS: usize = 253;
pub const MAX_LABEL_CHARS: usize = 63;

pub(super) fn rfc3339(at: UnixMillis) -> Option<String> {
    at.rfc3339()
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct LockInfo {
    pub name: String,
    pub state: &'static str,
    pub owner: Option<String>,
    pub message: String,
    pub priority: u32,
    pub lease_ms: Option<u64>,
    pub acquired_at: Option<String>,
    pub expires_at: Option<String>,
    pub remaining_ms: Option<u64>,
    /// Milliseconds left of the holder's cleanup window, on the service's clock: what a
    /// dashboard counts down from, without comparing its own clock with the service's.
    pub cleanup_remaining_ms: Option<u64>,
    pub cleanup_ms: u64,
    pub waiting_ms: Option<u64>,
    pub forceful: bool,
    pub fencing_token: Option<u64>,
    pub requestor: Option<RequestorInfo>,
    pub waiters: u64,
    /// When the lock may be taken over, while its lease has ended but another instance's
    /// clock may not say so yet (the takeover margin); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub takeover_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_owner: Option<bool>,
}

impl LockInfo {
    /// Renders a snapshot; `asking_owner` is the `?owner=` of a GET.
    pub fn of(lock: &LockSnapshot, asking_owner: Option<&str>) -> LockInfo {
        let now = lock.read_at;
        let state = engine::state(&lock.record, now);
        let holder = lock.record.holder();
        let requestor = lock.record.requestor.as_ref().map(RequestorInfo::of);
        LockInfo {
            name: lock.name.to_string(),
            state: match state {
                LockState::Free => "free",
                LockState::Held => "held",
                LockState::Expired => "expired",
            },
            owner: holder.map(|h| h.owner.clone()),
            message: holder.map(|h| h.message.clone()).unwrap_or_default(),
            priority: holder.map_or(0, |h| h.priority),
            lease_ms: holder.and_then(|h| h.lease_ms),
            acquired_at: holder.and_then(|h| h.acquired_at).and_then(rfc3339),
            expires_at: holder.and_then(|h| match h.expires {
                Expiry::Never => None,
                Expiry::At(at) => rfc3339(at),
            }),
            remaining_ms: engine::remaining_ms(&lock.record, now),
            cleanup_remaining_ms: lock
                .record
                .requestor
                .as_ref()
                .and_then(|r| r.cleanup_deadline)
                .map(|deadline| now.millis_until(deadline)),
            cleanup_ms: holder.map_or(0, |h| h.cleanup_ms),
            waiting_ms: holder.and_then(|h| h.waiting_ms),
            forceful: holder.is_some_and(|h| h.forceful),
            fencing_token: holder.and_then(|h| h.fencing_token).map(|t| t.0),
            requestor,
            waiters: lock.waiters,
            takeover_at: lock.takeover_at.and_then(rfc3339),
            is_owner: asking_owner
                .map(|owner| state == LockState::Held && holder.is_some_and(|h| h.owner == owner)),
        }
    }
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AcquireBody {
    pub owner: String,
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

/// Every acquire field, in the order the contract lists them.
pub const ACQUIRE_FIELDS: [&str; 10] = [
    "owner",
    "lease_ms",
    "message",
    "priority",
    "cleanup_ms",
    "waiting_ms",
    "forceful",
    "notify_url",
    "request_id",
    "lease_id",
];

fn in_range(field: &str, value: i64, min: i64, max: u64) -> Result<u64, ApiError> {
    let max = i64::try_from(max).unwrap_or(i64::MAX);
    if (min..=max).contains(&value) {
        Ok(value as u64)
    } else {
        Err(ApiError::invalid(format!(
            "{field} must be between {min} and {max}"
        )))
    }
}

impl AcquireBody {
    pub fn validate(&self, limits: Limits) -> Result<AcquireRequest, ApiError> {
        self.check_message()?;
        self.request(limits, digest_of(self))
    }

    pub(super) fn check_message(&self) -> Result<(), ApiError> {
        if self.message.chars().count() > MAX_MESSAGE_CHARS {
            return Err(ApiError::invalid(format!(
                "message is longer than {MAX_MESSAGE_CHARS} characters"
            )));
        }
        Ok(())
    }

    /// The request this body asks for, its message checked already; `request_digest` is
    /// the digest of the body as the caller sent it (see [`digest_of`]).
    pub(super) fn request(
        &self,
        limits: Limits,
        request_digest: String,
    ) -> Result<AcquireRequest, ApiError> {
        let owner = Owner::parse(&self.owner).map_err(ApiError::invalid)?;
        let lease_ms = in_range("lease_ms", self.lease_ms, 1, limits.max_lease_ms)?;
        let priority = Priority::new(self.priority).map_err(ApiError::invalid)?;
        // A cleanup window longer than the longest lease could never be used in full.
        let cleanup_ms = in_range("cleanup_ms", self.cleanup_ms, 0, limits.max_lease_ms)?;
        let waiting_ms = self
            .waiting_ms
            .map(|w| in_range("waiting_ms", w, 0, limits.max_waiting_ms))
            .transpose()?;
        let notify_url = self.notify_url.as_deref().map(validate_url).transpose()?;
        let request_id = self
            .request_id
            .as_deref()
            .map(RequestId::parse)
            .transpose()
            .map_err(ApiError::invalid)?;
        let lease_id = self
            .lease_id
            .as_deref()
            .map(LeaseId::parse)
            .transpose()
            .map_err(ApiError::invalid)?;
        Ok(AcquireRequest {
            owner,
            lease_ms,
            message: self.message.clone(),
            priority,
            cleanup_ms,
            waiting_ms,
            forceful: self.forceful,
            limit: None,
            notify_url,
            request_id,
            request_digest,
            lease_id,
            actor: Default::default(),
        })
    }
}

/// A digest of a request body, so that a `request_id` used again with another body is
/// caught (the canonical JSON of the parsed body: key order and spacing do not count).
pub(super) fn digest_of(body: &impl Serialize) -> String {
    let canonical = serde_json::to_vec(body).unwrap_or_default();
    let digest = Sha256::digest(&canonical);
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

fn validate_url(raw: &str) -> Result<String, ApiError> {
    if raw.len() > MAX_URL_BYTES {
        return Err(ApiError::invalid(format!(
            "notify_url is longer than {MAX_URL_BYTES} bytes"
        )));
    }
    let url = url::Url::parse(raw)
        .map_err(|e| ApiError::invalid(format!("notify_url is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(ApiError::invalid(
            "notify_url must be an http or https URL with a host",
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(ApiError::invalid("notify_url may not carry credentials"));
    }
    // A name DNS cannot carry could never be resolved: refused here, in every configuration,
    // rather than after a lookup (or, without --webhook-secret, for another reason).
    if let Some(url::Host::Domain(host)) = url.host() {
        let name = host.strip_suffix('.').unwrap_or(host);
        if name.len() > MAX_HOST_CHARS || name.split('.').any(|l| l.len() > MAX_LABEL_CHARS) {
            return Err(ApiError::invalid(format!(
                "notify_url host is longer than a DNS name may be ({MAX_HOST_CHARS} characters, \
                 {MAX_LABEL_CHARS} between dots)"
            )));
        }
    }
    Ok(url.to_string())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RenewBody {
    pub lease_id: String,
    #[serde(default, deserialize_with = "optional_integer")]
    pub lease_ms: Option<i64>,
}

impl RenewBody {
    /// The lease's new length, if one is asked for: 1 to `--max-lease-ms`.
    pub fn lease_ms(&self, limits: Limits) -> Result<Option<u64>, ApiError> {
        self.lease_ms
            .map(|ms| in_range("lease_ms", ms, 1, limits.max_lease_ms))
            .transpose()
    }
}

/// The answer to an acquire that got the lock. (Typed answers are serialised straight to
/// bytes, without building a JSON tree first: they are on every lock cycle's path.)
#[derive(Debug, Serialize)]
pub struct Acquired {
    pub acquired: bool,
    pub lease_id: String,
    pub fencing_token: u64,
    pub lock: LockInfo,
}

/// The answer to a release.
#[derive(Debug, Serialize)]
pub struct Released {
    pub released: bool,
    pub lock: LockInfo,
}

/// The answer to a force release.
#[derive(Debug, Serialize)]
pub struct ForceReleased {
    pub released: bool,
    /// Nobody held the lock: the call released nothing.
    pub already_free: bool,
    pub lock: LockInfo,
}

/// The answer to a renewal.
#[derive(Debug, Serialize)]
pub struct Renewed {
    pub lock: LockInfo,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReleaseBody {
    pub lease_id: String,
}

#[derive(Debug, Deserialize)]
pub struct GetQuery {
    pub owner: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct ValidateQuery {
    pub fencing_token: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct ListParams {
    pub prefix: Option<String>,
    pub limit: Option<String>,
    pub cursor: Option<String>,
}

#[cfg(test)]
#[path = "dto_tests.rs"]
mod tests;
