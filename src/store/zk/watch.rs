//! Waiting for a change in ZooKeeper: of a lock's record, or of the queue node a waiter
//! stands behind, with a watch on the primary session, which sets its watches again when it
//! reconnects (a stand-in's watches would end with it, `session.rs`).
//!
//! Keeps I8 (DESIGN.md, "Invariants"): a wait ends by its deadline, and a change of primary
//! (a session given up, expired or replaced) wakes it, since a watch on the old primary may
//! never fire.

use tokio::time::Instant;

use super::{NoAnswer, ZkStore};
use crate::metrics::zookeeper::ZkOp;
use crate::model::LockName;
use crate::store::{StoreError, Version, Wake};
use crate::waiter::Watch;

impl ZkStore {
    pub(super) async fn wait_for_change(
        &self,
        name: &LockName,
        watch: &Watch,
        seen: Option<Version>,
        until: Instant,
    ) -> Result<Wake, StoreError> {
        // Watches go on the primary session, which sets them again when it reconnects; a
        // stand-in's watches would end with it (see `session.rs`). A watch on a primary that
        // is then given up on may never fire, so a change of primary wakes the caller too.
        let Some((client, mut replaced)) = self.session.primary_and_changes(until).await else {
            return Err(self.read_failed(Err(NoAnswer::NoSession)));
        };
        let (path, woken) = match watch {
            Watch::Record => (self.path(name), Wake::Record),
            Watch::Predecessor(id) => (format!("{}/{id}", self.queue_dir(name)), Wake::Predecessor),
        };
        let watched = client.check_and_watch_stat(&path);
        let answer = tokio::select! {
            answer = self.within(ZkOp::Exists, until, watched) => answer,
            _ = replaced.changed() => return Ok(woken),
        };
        let (stat, watcher) = match answer {
            Ok(Ok(found)) => found,
            Ok(Err(e)) => return Err(self.read_failed(Ok(e))),
            Err(NoAnswer::TimedOut(_)) => return Ok(Wake::Timer),
            Err(e) => return Err(self.read_failed(Err(e))),
        };
        let moved = match watch {
            Watch::Record => stat.map(|s| s.version) != seen.map(|v| v.number),
            Watch::Predecessor(_) => stat.is_none(),
        };
        if moved {
            return Ok(woken);
        }
        tokio::select! {
            _ = watcher.changed() => Ok(woken),
            _ = replaced.changed() => Ok(woken),
            _ = tokio::time::sleep_until(until) => Ok(Wake::Timer),
        }
    }
}
