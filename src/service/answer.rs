//! What the service answers: a lock as read at one instant, a grant, a refusal with the lock
//! that caused it, and the service's one error type (which the API maps to HTTP in one place,
//! `api::error`).

use crate::model::{FencingToken, LeaseId, LockName, UnixMillis};
use crate::record::LockRecord;
use crate::store::StoreError;

/// A lock as read at one instant; the API renders it as LockInfo.
#[derive(Clone, Debug)]
pub struct LockSnapshot {
    pub name: LockName,
    /// The record, with a void requestor (one whose waiter has gone) removed.
    pub record: LockRecord,
    pub read_at: UnixMillis,
    /// When the lock may be taken over, while its lease has ended but is within the
    /// takeover margin (`engine::Clock::pending_takeover`).
    pub takeover_at: Option<UnixMillis>,
    /// The takeover margin (`--max-clock-skew-ms`): a lapsed lease is taken over this long
    /// after its end.
    pub margin_ms: u64,
    pub waiters: u64,
}

#[derive(Clone, Debug)]
pub struct Granted {
    pub lease_id: LeaseId,
    pub fencing_token: FencingToken,
    pub lock: LockSnapshot,
    /// This call created the grant (rather than renewing or repeating one).
    pub fresh: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// `retry_at`: when asking again can be expected to take the lock (`engine::retry_at`).
    LockHeld {
        retry_at: Option<UnixMillis>,
    },
    NotOwner,
    /// The name is the parent of existing nested locks.
    NameConflict,
    CleanupTimeout,
    Superseded,
    WaitTimeout,
    /// The grant this call made has ended before its answer: a retry of a request_id whose
    /// lease has ended since, or a waiter handed the lock and preempted (or force released)
    /// before it heard.
    LeaseEnded,
    /// The lock's queue holds `--max-waiters-per-lock` callers already.
    TooManyWaiters,
    /// A semaphore with holders or waiters has another limit (I18).
    LimitMismatch,
}

#[derive(Clone, Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("refused: {refusal:?}")]
    Refused {
        refusal: Refusal,
        lock: Box<LockSnapshot>,
    },
    #[error("request_id was used before with a different request")]
    RequestIdReused,
    /// This instance has `--max-waiting-calls` calls waiting already.
    #[error("too many waiting calls")]
    TooManyWaiting,
    #[error("store unavailable: {0}")]
    StoreUnavailable(String),
}

impl From<StoreError> for ServiceError {
    fn from(error: StoreError) -> Self {
        ServiceError::StoreUnavailable(error.to_string())
    }
}

pub type AcquireOutcome = Result<Granted, ServiceError>;
