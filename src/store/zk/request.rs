//! One ZooKeeper request's bounds and failures: every request is sent with a deadline and
//! timed (`within`), and a failure becomes the store's error, counted by kind. A failed read
//! is `Unavailable`; a failed write is `OutcomeUnknown` unless nothing was sent, since it may
//! still land. A timeout makes the session supervisor probe the session (`report_stall`), a
//! session-level error makes it look at the session (`report_trouble`).
//!
//! Keeps I8 (every request has a deadline) and I10 (a write without an answer is reported as
//! unknown, never guessed); see DESIGN.md, "Invariants".

use std::future::Future;
use tokio::time::Instant;

use zookeeper_client as zk;

use super::{Late, NoAnswer, ZkStore};
use crate::metrics::zookeeper::{StoreErrorKind, ZkOp};
use crate::store::StoreError;

impl ZkStore {
    /// Sends request `op` and waits for its answer until `deadline`, timing it.
    pub(super) async fn within<T, E>(
        &self,
        op: ZkOp,
        deadline: Instant,
        call: impl Future<Output = Result<T, E>>,
    ) -> Result<Result<T, E>, NoAnswer> {
        let late = Late::sent(op, deadline);
        tokio::time::timeout_at(deadline, self.metrics.time(op, call))
            .await
            .map_err(|_| NoAnswer::TimedOut(late))
    }

    /// Maps a failed read. Session-level errors make the supervisor look at the session.
    pub(super) fn read_failed(&self, failure: Result<zk::Error, NoAnswer>) -> StoreError {
        self.failed(failure, StoreError::Unavailable)
    }

    /// Maps a failed write: unless nothing was sent, its outcome is unknown.
    pub(super) fn write_failed(&self, failure: Result<zk::Error, NoAnswer>) -> StoreError {
        self.failed(failure, StoreError::OutcomeUnknown)
    }

    /// Counts and logs a failure, and maps it with `sent` unless nothing was sent.
    fn failed(
        &self,
        failure: Result<zk::Error, NoAnswer>,
        sent: fn(String) -> StoreError,
    ) -> StoreError {
        self.metrics.error(error_kind(&failure));
        match failure {
            Err(NoAnswer::NoSession) => StoreError::Unavailable("no ZooKeeper session".into()),
            Err(NoAnswer::TimedOut(late)) => {
                late.log();
                self.session.report_stall();
                sent("ZooKeeper did not answer in time".into())
            }
            Ok(error) => {
                self.note(&error);
                sent(error.to_string())
            }
        }
    }

    fn note(&self, error: &zk::Error) {
        if matches!(
            error,
            zk::Error::SessionExpired
                | zk::Error::ClientClosed
                | zk::Error::AuthFailed
                | zk::Error::SessionMoved
        ) {
            self.session.report_trouble();
        }
    }
}

/// How `/metrics` counts a failed call.
fn error_kind(failure: &Result<zk::Error, NoAnswer>) -> StoreErrorKind {
    match failure {
        Err(NoAnswer::NoSession) => StoreErrorKind::NoSession,
        Err(NoAnswer::TimedOut(_)) | Ok(zk::Error::Timeout) => StoreErrorKind::Timeout,
        Ok(zk::Error::ConnectionLoss) => StoreErrorKind::ConnectionLoss,
        Ok(zk::Error::SessionExpired | zk::Error::SessionMoved | zk::Error::ClientClosed) => {
            StoreErrorKind::SessionLost
        }
        Ok(zk::Error::AuthFailed | zk::Error::NoAuth) => StoreErrorKind::Auth,
        Ok(zk::Error::Throttled) => StoreErrorKind::Throttled,
        Ok(_) => StoreErrorKind::Other,
    }
}
