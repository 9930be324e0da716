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
use crate::model::LockName;
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
        match error {
            ServiceError::Refused { refusal, lock } => {
                let info = LockInfo::of(&lock, None);
                let name = &lock.name;
                let (code, message) = match refusal {
                    Refusal::LockHeld { retry_at } => (ErrorCode::LockHeld, lock_held_message(name, &info, retry_at.is_some())),
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
                let mut error = ApiError {
                    lock: Some(Box::new(info)),
                    ..ApiError::new(code, message)
                };
                // A `lock_held` says when to come back only when asking again can take the
                // lock then; other refusals keep what `ApiError::new` gives their code.
                if let Refusal::LockHeld { retry_at: Some(at) } = refusal {
                    let secs = lock.read_at.millis_until(at).div_ceil(1000).max(1);
                    error.retry_after_secs = Some(secs);
                }
                error
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

/// The message of a `lock_held` refusal. Within the takeover margin the lock shows
/// `expired`, so "held" would contradict it: the message says when it may be taken over,
/// and by whom when that is not the caller who asks again (`open`: `engine::retry_at`).
fn lock_held_message(name: &LockName, lock: &LockInfo, open: bool) -> String {
    let Some(at) = &lock.takeover_at else {
        return format!("lock '{name}' is held by another caller");
    };
    let why = "once the lease has ended on every instance's clock (--max-clock-skew-ms)";
    if open {
        format!("the lease on lock '{name}' has ended; the lock may be taken over at {at}, {why}")
    } else {
        format!("the lease on lock '{name}' has ended; at {at}, {why}, the first caller queued for it takes it")
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
        if let Some(secs) = self.retry_after_secs {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::UnixMillis;
    use crate::record::LockRecord;
    use crate::service::LockSnapshot;

    const READ_AT: UnixMillis = UnixMillis(1_700_000_000_000);

    /// A `lock_held` refusal of a lock read at `READ_AT`, with the engine's answers.
    fn lock_held(takeover_in_ms: Option<u64>, open: bool, waiters: u64) -> Response {
        let takeover_at = takeover_in_ms.map(|ms| READ_AT.plus(ms));
        let lock = LockSnapshot {
            name: LockName::parse("a/b").unwrap(),
            record: LockRecord::default(),
            read_at: READ_AT,
            takeover_at,
            waiters,
        };
        let refusal = Refusal::LockHeld {
            retry_at: takeover_at.filter(|_| open),
        };
        let refused = ServiceError::Refused {
            refusal,
            lock: Box::new(lock),
        };
        ApiError::from(refused).on_acquire().into_response()
    }

    fn retry_after(response: &Response) -> Option<&str> {
        let value = response.headers().get(header::RETRY_AFTER)?;
        Some(value.to_str().unwrap())
    }

    async fn message(response: Response) -> String {
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["error"]["code"], "lock_held");
        body["error"]["message"].as_str().unwrap().to_owned()
    }

    #[test]
    fn retry_after_is_the_seconds_until_takeover_rounded_up_and_at_least_one() {
        for (ms, secs) in [(0, "1"), (1, "1"), (1000, "1"), (1001, "2"), (4500, "5")] {
            assert_eq!(
                retry_after(&lock_held(Some(ms), true, 0)),
                Some(secs),
                "{ms}"
            );
        }
        assert_eq!(retry_after(&lock_held(Some(1500), false, 1)), None);
        assert_eq!(retry_after(&lock_held(None, false, 0)), None);
        let unavailable = ApiError::from(ServiceError::StoreUnavailable("x".into()));
        assert_eq!(retry_after(&unavailable.into_response()), Some("1"));
        let full = ServiceError::Refused {
            refusal: Refusal::TooManyWaiters,
            lock: Box::new(LockSnapshot {
                name: LockName::parse("a").unwrap(),
                record: LockRecord::default(),
                read_at: READ_AT,
                takeover_at: None,
                waiters: 3,
            }),
        };
        let full = ApiError::from(full).on_acquire().into_response();
        assert_eq!(
            retry_after(&full),
            Some("1"),
            "a full queue keeps its Retry-After"
        );
    }

    #[tokio::test]
    async fn a_refusal_in_the_margin_says_the_lease_ended_and_when_it_may_be_taken() {
        let at = READ_AT.plus(1500).rfc3339().unwrap();
        let open = message(lock_held(Some(1500), true, 0)).await;
        assert!(open.contains("has ended") && open.contains(&at), "{open}");
        let queued = message(lock_held(Some(1500), false, 1)).await;
        assert!(
            queued.contains(&at) && queued.contains("queued"),
            "{queued}"
        );
        let held = message(lock_held(None, false, 0)).await;
        assert!(held.contains("held by another caller"), "{held}");
    }
}
