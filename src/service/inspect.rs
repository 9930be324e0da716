//! The calls that only read: a lock's status, whether a fencing token is current, the
//! listing, and readiness.
//!
//! Keeps (DESIGN.md, "Invariants") I3 (`validate` after a `sync`) and I4 (`get` with an
//! owner reads the latest copy).

use futures::{StreamExt, TryStreamExt};
use tokio::time::Instant;

use super::{snapshot, LockService, LockSnapshot, ServiceError};
use crate::engine;
use crate::model::{FencingToken, LockName};
use crate::store::Reads;
use crate::store::{Fresh, ListQuery};
use crate::waiter::Waiter;

/// The most queue reads one listing has in flight at once (see `LockService::list`): enough
/// to overlap their round trips, few enough that a page of a thousand queued locks does not
/// put a thousand requests at once ahead of every other call on the session.
const QUEUE_READS_AT_ONCE: usize = 32;

impl LockService {
    /// The lock, as the server this instance's session is on has it, or, if `latest`, as
    /// the leader has it (a read after a `sync`): a caller asking whether it owns the lock
    /// is answered as a renew would be (see `reading`).
    pub async fn get(&self, name: &LockName, latest: bool) -> Result<LockSnapshot, ServiceError> {
        Ok(self.look(name, self.deadline(), latest).await?.0)
    }

    /// The lock as it is now, and its queue: what `get` and the queue view show.
    pub(super) async fn look(
        &self,
        name: &LockName,
        deadline: Instant,
        latest: bool,
    ) -> Result<(LockSnapshot, Vec<Waiter>), ServiceError> {
        let now = self.wall.now();
        let (stored, queue) = if latest {
            self.store
                .read_with_queue(name, Fresh::Latest, deadline)
                .await?
        } else {
            let stored = self.store.read(name, Fresh::Any, deadline).await?;
            // A lock with a record may have waiters, shown too; one read of its queue.
            let queue = match &stored {
                Some(_) => self.store.queue(name, deadline).await?,
                None => Vec::new(),
            };
            (stored, queue)
        };
        let record = stored.map(|s| s.record).unwrap_or_default();
        Ok((snapshot(name, &record, &queue, self.clock(now)), queue))
    }

    pub async fn validate(
        &self,
        name: &LockName,
        token: FencingToken,
    ) -> Result<bool, ServiceError> {
        // Not from a lagging follower: after a newer grant was acknowledged to anyone, this
        // must not call an older token current.
        let current = if self.planted.stale_validate {
            self.store.read(name, Fresh::Any, self.deadline()).await?
        } else {
            self.store
                .read(name, Fresh::Latest, self.deadline())
                .await?
        };
        let record = current.map(|s| s.record).unwrap_or_default();
        Ok(engine::is_current(&record, token, self.wall.now()))
    }

    /// Held or expired locks, in name order, each with its waiters and live requestor as
    /// `get` shows them; the bool says whether more may follow. A lock's queue is read only
    /// where its record says callers may wait (`engine::may_have_waiters`), up to
    /// `QUEUE_READS_AT_ONCE` at a time: a listing of locks nobody waits for costs the one read
    /// it always did.
    pub async fn list(&self, query: &ListQuery) -> Result<(Vec<LockSnapshot>, bool), ServiceError> {
        let deadline = self.deadline();
        let page = self.store.list(query, deadline).await?;
        let reads: Vec<_> = page
            .locks
            .iter()
            .map(|(name, record)| async move {
                if engine::may_have_waiters(record) {
                    self.store.queue(name, deadline).await
                } else {
                    Ok(Vec::new())
                }
            })
            .collect();
        let queues: Vec<Vec<Waiter>> = futures::stream::iter(reads)
            .buffered(QUEUE_READS_AT_ONCE)
            .try_collect()
            .await?;
        let now = self.wall.now();
        let locks = page
            .locks
            .iter()
            .zip(&queues)
            .map(|((name, record), queue)| snapshot(name, record, queue, self.clock(now)))
            .collect();
        Ok((locks, page.more))
    }

    pub async fn ready(&self) -> Result<(), ServiceError> {
        Ok(self.store.ready(self.deadline()).await?)
    }
}
