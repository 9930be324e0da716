//! The API's one error type, and the one place where errors become HTTP responses.
//!
//! Every error body has the shape `{"error": {"code", "message"}}`, plus `"lock"` when it
//! concerns a lock and `"acquired": false` on acquire. A 5xx never says more than a
//! generic sentence; the cause goes to the log.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use tracing::warn;

use super::dto::LockInfo;
use crate::service::{Refusal, ServiceError};

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
    NameConflict,
    CleanupTimeout,
    Superseded,
    WaitTimeout,
    LeaseEnded,
    TooManyWaiters,
    RequestTimeout,
    StoreUnavailable,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 18] = [
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
        ErrorCode::NameConflict,
        ErrorCode::CleanupTimeout,
        ErrorCode::Superseded,
        ErrorCode::WaitTimeout,
        ErrorCode::LeaseEnded,
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
            ErrorCode::NameConflict => "name_conflict",
            ErrorCode::CleanupTimeout => "cleanup_timeout",
            ErrorCode::Superseded => "superseded",
            ErrorCode::WaitTimeout => "wait_timeout",
            ErrorCode::LeaseEnded => "lease_ended",
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
            | ErrorCode::NameConflict
            | ErrorCode::CleanupTimeout
            | ErrorCode::Superseded
            | ErrorCode::WaitTimeout
            | ErrorCode::LeaseEnded => StatusCode::CONFLICT,
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
    /// Set on acquire, whose refusals also say `"acquired": false`.
    pub on_acquire: bool,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            code,
            message: message.into(),
            lock: None,
            on_acquire: false,
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
        match error {
            ServiceError::Refused { refusal, lock } => {
                let info = LockInfo::of(&lock, None);
                let name = &lock.name;
                let (code, message) = match refusal {
                    Refusal::LockHeld => (ErrorCode::LockHeld, format!("lock '{name}' is held by another caller")),
                    Refusal::NotOwner => (ErrorCode::NotOwner, format!("that lease does not hold lock '{name}'")),
                    Refusal::NameConflict => (
                        ErrorCode::NameConflict,
                        format!("locks nested under '{name}' exist; a lock cannot be taken on their parent name"),
                    ),
                    Refusal::CleanupTimeout => (
                        ErrorCode::CleanupTimeout,
                        format!("the holder of '{name}' did not release it within the wait; it keeps the lock"),
                    ),
                    Refusal::Superseded => (
                        ErrorCode::Superseded,
                        format!("a higher-priority request for '{name}' took this request's place"),
                    ),
                    Refusal::WaitTimeout => (ErrorCode::WaitTimeout, format!("waiting_ms ran out before '{name}' was free")),
                    Refusal::LeaseEnded => (
                        ErrorCode::LeaseEnded,
                        format!("the lease granted to this request on '{name}' has ended (it ran out, or was released or taken over); acquire again, with a new request_id if you send one"),
                    ),
                    Refusal::TooManyWaiters => (
                        ErrorCode::TooManyWaiters,
                        format!("the queue of '{name}' is full (--max-waiters-per-lock); retry later"),
                    ),
                };
                ApiError {
                    lock: Some(Box::new(info)),
                    ..ApiError::new(code, message)
                }
            }
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

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({"error": {"code": self.code.as_str(), "message": self.message}});
        if let Some(lock) = self.lock {
            body["lock"] = serde_json::to_value(lock).unwrap_or(Value::Null);
        }
        if self.on_acquire {
            body["acquired"] = Value::Bool(false);
        }
        let mut response = (self.code.status(), Json(body)).into_response();
        // For the request metrics (see `metered`), which label an error by its code.
        response.extensions_mut().insert(self.code);
        if matches!(
            self.code,
            ErrorCode::StoreUnavailable | ErrorCode::TooManyWaiters
        ) {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}
