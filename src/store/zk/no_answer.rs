//! A ZooKeeper call that got no answer ([`NoAnswer`]), and for a timeout which request it
//! was and how long it had ([`Late`]), logged where the timeout becomes an error.

use std::time::Duration;
use tokio::time::Instant;

use tracing::info;

use crate::metrics::labels::LabelValue;
use crate::metrics::zookeeper::ZkOp;

/// A call that got no answer from ZooKeeper.
pub(crate) enum NoAnswer {
    /// There is no live session: nothing was sent.
    NoSession,
    /// The deadline passed: the request may still be applied.
    TimedOut(Late),
}

/// Which request got no answer in time, and how long it had been given: a slow server and
/// a call whose earlier requests used up its store timeout look alike in the 503 alone.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Late {
    op: ZkOp,
    had: Duration,
}

impl Late {
    /// `op`, sent now with `deadline` to meet.
    pub(crate) fn sent(op: ZkOp, deadline: Instant) -> Late {
        Late {
            op,
            had: deadline.saturating_duration_since(Instant::now()),
        }
    }

    /// Logged where a timeout becomes an error (not where it is a waiter's timer).
    pub(crate) fn log(self) {
        let had_ms = u64::try_from(self.had.as_millis()).unwrap_or(u64::MAX);
        info!(
            operation = self.op.label(),
            had_ms, "no answer from ZooKeeper in time"
        );
    }
}
