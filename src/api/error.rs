//! The API's one error type, and the one place where errors become HTTP responses.
//!
//! Every error body has the shape `{"error": {"code", "message"}}`, plus `"lock"` when it
//! concerns a lock and `"acquired": false` on acquire (`"election"` and `"elected": false`
//! for an election, `"semaphore"` for a semaphore). A 5xx never says more than a
//! generic sentence; the cause goes to the log.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use tracing::warn;

use super::dto::LockInfo;
use super::election_dto::ElectionInfo;
use super::refusals::{election_refusal, lock_refusal, semaphore_refusal};
use super::semaphore_dto::SemaphoreInfo;
use crate::model::UnixMillis;
use crate::resource::Resource;
use crate::service::{LockSnapshot, Refusal, ServiceError};

/// Every stable error code the API returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    InvalidRequest,
    InvalidLockName,
    Unauthorized,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    PayloadTooLarge,
    UnsupportedMediaType,
    LockHeld,
    NotOwner,
    LeaderExists,
    NotLeader,
    NameConflict,
    CleanupTimeout,
    Superseded,
    WaitTimeout,
    LeaseEnded,
    SemaphoreFull,
    LimitMismatch,
    TooManyWaiters,
    RequestTimeout,
    StoreUnavailable,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 22] = [
        ErrorCode::InvalidRequest,
        ErrorCode::InvalidLockName,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::PayloadTooLarge,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::LockHeld,
        ErrorCode::NotOwner,
        ErrorCode::LeaderExists,
        ErrorCode::NotLeader,
        ErrorCode::NameConflict,
        ErrorCode::CleanupTimeout,
        ErrorCode::Superseded,
        ErrorCode::WaitTimeout,
        ErrorCode::LeaseEnded,
        ErrorCode::SemaphoreFull,
        ErrorCode::LimitMismatch,
        ErrorCode::TooManyWaiters,
        ErrorCode::RequestTimeout,
        ErrorCode::StoreUnavailable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::InvalidLockName => "invalid_lock_name",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotFound => "not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::UnsupportedMediaType => "unsupported_media_type",
            ErrorCode::LockHeld => "lock_held",
            ErrorCode::NotOwner => "not_owner",
            ErrorCode::LeaderExists => "leader_exists",
            ErrorCode::NotLeader => "not_leader",
            ErrorCode::NameConflict => "name_conflict",
            ErrorCode::CleanupTimeout => "cleanup_timeout",
            ErrorCode::Superseded => "superseded",
            ErrorCode::WaitTimeout => "wait_timeout",
            ErrorCode::LeaseEnded => "lease_ended",
            ErrorCode::SemaphoreFull => "semaphore_full",
            ErrorCode::LimitMismatch => "limit_mismatch",
            ErrorCode::TooManyWaiters => "too_many_waiters",
            ErrorCode::RequestTimeout => "request_timeout",
            ErrorCode::StoreUnavailable => "store_unavailable",
        }
    }

    pub fn status(self) -> StatusCode {
        match self {
            ErrorCode::InvalidRequest | ErrorCode::InvalidLockName => StatusCode::BAD_REQUEST,
            ErrorCode::Unauthorized => StatusCode::UNAUTHORIZED,
            ErrorCode::Forbidden => StatusCode::FORBIDDEN,
            ErrorCode::NotFound => StatusCode::NOT_FOUND,
            ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorCode::LockHeld
            | ErrorCode::NotOwner
            | ErrorCode::LeaderExists
            | ErrorCode::NotLeader
            | ErrorCode::NameConflict
            | ErrorCode::CleanupTimeout
            | ErrorCode::Superseded
            | ErrorCode::WaitTimeout
            | ErrorCode::LeaseEnded
            | ErrorCode::SemaphoreFull
            | ErrorCode::LimitMismatch => StatusCode::CONFLICT,
            ErrorCode::TooManyWaiters => StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            ErrorCode::StoreUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

#[derive(Debug)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    pub lock: Option<Box<LockInfo>>,
    pub election: Option<Box<ElectionInfo>>,
    pub semaphore: Option<Box<SemaphoreInfo>>,
    /// Set on acquire, whose refusals also say `"acquired": false`.
    pub on_acquire: bool,
    /// The `Retry-After` header, in seconds, when the answer says when to come back.
    pub retry_after_secs: Option<u64>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        // Capacity and the store come back on their own: a short pause is the best guess.
        let retry_after_secs = matches!(
            code,
            ErrorCode::StoreUnavailable | ErrorCode::TooManyWaiters
        )
        .then_some(1);
        ApiError {
            code,
            message: message.into(),
            lock: None,
            election: None,
            semaphore: None,
            on_acquire: false,
            retry_after_secs,
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }

    /// Marks a refusal of an acquire, whose 409 body also says `"acquired": false`.
    pub fn on_acquire(mut self) -> Self {
        self.on_acquire = self.code.status() == StatusCode::CONFLICT;
        self
    }
}

impl From<ServiceError> for ApiError {
    fn from(error: ServiceError) -> Self {
        ApiError::of(error, Resource::Lock)
    }
}

impl ApiError {
    /// The error of a call on a lock or an election: a refusal carries the one it concerns.
    pub fn of(error: ServiceError, resource: Resource) -> Self {
        match error {
            ServiceError::Refused { refusal, lock } => refused(refusal, &lock, resource),
            ServiceError::RequestIdReused => {
                ApiError::invalid("request_id was already used with a different request body")
            }
            ServiceError::TooManyWaiting => ApiError::new(
                ErrorCode::TooManyWaiters,
                "this instance has as many waiting calls as it takes (--max-waiting-calls); retry later",
            ),
            ServiceError::StoreUnavailable(cause) => {
                warn!(%cause, "answering 503: the lock store is unavailable");
                ApiError::new(
                    ErrorCode::StoreUnavailable,
                    "the lock store is unavailable; retry shortly",
                )
            }
        }
    }
}

fn refused(refusal: Refusal, lock: &LockSnapshot, resource: Resource) -> ApiError {
    let name = &lock.name;
    let takeover_at = lock.takeover_at.and_then(UnixMillis::rfc3339);
    let (code, message) = match resource {
        Resource::Lock => lock_refusal(refusal, name, takeover_at.as_deref()),
        Resource::Election => election_refusal(refusal, name, takeover_at.as_deref()),
        Resource::Semaphore => semaphore_refusal(refusal, name, takeover_at.as_deref()),
    };
    let mut error = ApiError::new(code, message);
    match resource {
        Resource::Lock => error.lock = Some(Box::new(LockInfo::of(lock, None))),
        Resource::Election => error.election = Some(Box::new(ElectionInfo::of(lock))),
        Resource::Semaphore => error.semaphore = Some(Box::new(SemaphoreInfo::of(lock))),
    }
    // A `lock_held` (or `leader_exists`) says when to come back only when asking again can
    // take the lock then; other refusals keep what `ApiError::new` gives their code.
    if let Refusal::LockHeld { retry_at: Some(at) } = refusal {
        let secs = lock.read_at.millis_until(at).div_ceil(1000).max(1);
        error.retry_after_secs = Some(secs);
    }
    error
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({"error": {"code": self.code.as_str(), "message": self.message}});
        if let Some(lock) = self.lock {
            body["lock"] = serde_json::to_value(lock).unwrap_or(Value::Null);
        }
        if let Some(election) = &self.election {
            body["election"] = serde_json::to_value(election).unwrap_or(Value::Null);
        }
        if let Some(semaphore) = &self.semaphore {
            body["semaphore"] = serde_json::to_value(semaphore).unwrap_or(Value::Null);
        }
        if self.on_acquire {
            let key = if self.election.is_some() {
                "elected"
            } else {
                "acquired"
            };
            body[key] = Value::Bool(false);
        }
        let mut response = (self.code.status(), Json(body)).into_response();
        // For the request metrics (see `metered`), which label an error by its code.
        response.extensions_mut().insert(self.code);
        if let Some(secs) = self.retry_after_secs {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

#[cfg(test)]
#[path = "error_tests.rs"]
mod tests;
