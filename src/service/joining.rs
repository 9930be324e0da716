//! Joining a lock's queue, and what a waiter learns from this instance instead of reading
//! ZooKeeper: the mark a caller writes on the record before it joins, the register of the
//! callers waiting here, the end of a local predecessor's call, and the record and queue
//! this instance remembers from its last hand-off.

use super::cache::LocalWaiters;
use super::events::Metrics;
use super::{LockService, Put, Read, ServiceError};
use crate::engine;
use crate::model::LockName;
use crate::store::Stored;
use crate::waiter::Waiter;

/// Removes a waiter from this instance's register when its wait ends.
pub(super) struct Registered<'a> {
    pub(super) local: &'a LocalWaiters,
    pub(super) name: &'a LockName,
    pub(super) id: &'a str,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.local.unregister(self.name, self.id);
    }
}

impl LockService {
    /// Makes sure the record says callers are queued, at this caller's priority, *before*
    /// it joins (see `engine::announce_waiter`): a release that skips reading the queue then
    /// always finds the record's version moved. `read` is the record as the caller's acquire
    /// just read it. The first round of waiting reads the record again, after joining, and
    /// announces the caller if the record changed meanwhile.
    pub(super) async fn mark_queued(
        &self,
        name: &LockName,
        priority: u32,
        mut read: Option<Stored>,
    ) -> Result<(), ServiceError> {
        let deadline = self.deadline();
        for _ in 0..super::MAX_ROUNDS {
            let current = match read.take() {
                Some(current) => current,
                None => match self.store.read(name, deadline).await? {
                    Some(current) => current,
                    None => return Ok(()),
                },
            };
            let Some(marked) = engine::announce_waiter(&current.record, priority) else {
                return Ok(());
            };
            if let Put::Landed(written, version) =
                self.put(name, Some(&current), marked, deadline).await?
            {
                self.cache.remember(name, &written, version);
                return Ok(());
            }
        }
        Err(ServiceError::StoreUnavailable(
            "the lock changed too often to decide".into(),
        ))
    }

    /// Waits until the waiter `ahead`, whose queue node has gone, has finished waiting, if it
    /// waits on this instance. Its node goes when the lock is handed to it, or when it leaves;
    /// either way its call ends at once, and when this instance handed it the lock, it has
    /// remembered the record and queue by then, so the next round needs no read.
    pub(super) async fn behind_local(&self, name: &LockName, ahead: &str) {
        if let Some(mut ending) = self.local.subscribe(name, ahead) {
            while ending.changed().await.is_ok() {}
        }
    }

    /// When this instance made the last hand-off of the lock and this waiter heads the queue
    /// it left behind, the record and queue it remembers, instead of reading them. Deciding
    /// on them is safe: every write names the remembered version, and the wait that follows
    /// watches the record from that version, so a change since wakes the waiter at once and
    /// it reads. Not for a former requestor, whose own registration the cache may predate.
    pub(super) fn remembered_turn(
        &self,
        name: &LockName,
        me: &Waiter,
        was_requestor: bool,
    ) -> Option<Read> {
        if was_requestor {
            return None;
        }
        let (record, version, rest) = self.cache.get(name)?;
        if rest.first().map(|w| &w.id) != Some(&me.id) || record.requestor.is_some() {
            return None;
        }
        Metrics::bump(&self.metrics.queue_reads_saved);
        Some(Read {
            stored: Some(Stored {
                record: record.clone(),
                version,
            }),
            record,
            queue: rest,
            cached: true,
            queue_remembered: true,
        })
    }
}
