//! What can go wrong in a call, sorted by what the caller should do about it: retry later
//! (`Unavailable`, `Unreachable`), give up on this lock for now (`NotAcquired`), or fix the
//! request (`Refused`) or the client's configuration (`Tls`, `InvalidArgument`).

use crate::types::LockInfo;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The lock was not granted (409): `code` is `lock_held`, `wait_timeout`,
    /// `cleanup_timeout`, `superseded`, `name_conflict` or `lease_ended`.
    #[error("not acquired: {code}: {message}")]
    NotAcquired {
        code: String,
        message: String,
        /// The lock as the service saw it (its holder, say).
        lock: Option<Box<LockInfo>>,
    },
    /// The service answered, but refused the request for good (bad input, no or a wrong
    /// token, not the lease's owner, …). Retrying the same request will not help.
    #[error("refused by the service ({status}): {code}: {message}")]
    Refused {
        status: u16,
        code: String,
        message: String,
    },
    /// The service kept answering 503 or 429 until the retry budget ran out.
    #[error("the service is unavailable ({status}): {code}: {message}")]
    Unavailable {
        status: u16,
        code: String,
        message: String,
    },
    /// No answer (connection refused or reset, timeout) until the retry budget ran out.
    #[error("the service cannot be reached: {0}")]
    Unreachable(String),
    /// TLS with the service failed: its certificate is not trusted (a private CA needs
    /// [`Client::ca_file`](crate::Client::ca_file)) or not for its name, or it does not
    /// speak TLS. Not retried, since trying again will not help.
    #[error("no trusted TLS connection to the service: {0}")]
    Tls(String),
    /// The caller passed something the client cannot send (a zero lease, say).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The service answered something this client does not understand.
    #[error("unexpected answer from the service: {0}")]
    Protocol(String),
}

impl Error {
    /// Whether trying again later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Unavailable { .. } | Error::Unreachable(_))
    }

    /// The service's error code, when it gave one.
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::NotAcquired { code, .. }
            | Error::Refused { code, .. }
            | Error::Unavailable { code, .. } => Some(code),
            _ => None,
        }
    }

    /// The HTTP status, when the service answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::NotAcquired { .. } => Some(409),
            Error::Refused { status, .. } | Error::Unavailable { status, .. } => Some(*status),
            _ => None,
        }
    }
}
