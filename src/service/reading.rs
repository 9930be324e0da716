//! Reading a lock for a decision: the record, and its queue when the decision can depend
//! on it, read from the store or taken from what this instance remembers (`cache`). What is
//! remembered is trusted only as far as `Read`'s flags say.

use std::time::Instant;

use super::{LockService, ServiceError};
use crate::engine;
use crate::model::{LockName, UnixMillis};
use crate::record::LockRecord;
use crate::store::{Stored, Version};
use crate::waiter::Waiter;

/// A record, and the queue when it was worth reading.
pub(super) struct Read {
    pub stored: Option<Stored>,
    pub record: LockRecord,
    pub queue: Vec<Waiter>,
    /// Taken from this instance's cache, not read: trust it only for a conditional write,
    /// or for a decision to wait that is made again on a read once the caller has joined.
    pub cached: bool,
    /// The queue is the one remembered from this instance's last hand-off, not read: callers
    /// may have joined behind it since.
    pub queue_remembered: bool,
}

impl Read {
    /// The record this instance wrote last and the queue it left behind it, not read.
    pub(super) fn remembered(record: LockRecord, version: Version, rest: Vec<Waiter>) -> Self {
        Read {
            stored: Some(Stored {
                record: record.clone(),
                version,
            }),
            record,
            queue: rest,
            cached: true,
            queue_remembered: true,
        }
    }
}

impl LockService {
    /// Reads the record, and the queue too when it can matter: when the record exists and is
    /// not simply held (a free or expired lock goes to waiters first), or names a requestor.
    /// With `always_queue`, both in one store request (`LockStore::read_with_queue`).
    pub(super) async fn read(
        &self,
        name: &LockName,
        deadline: Instant,
        now: UnixMillis,
        always_queue: bool,
    ) -> Result<Read, ServiceError> {
        let (stored, queue) = if always_queue {
            let (stored, queue) = self.store.read_with_queue(name, deadline).await?;
            (stored, Some(queue))
        } else {
            (self.store.read(name, deadline).await?, None)
        };
        let record = stored
            .as_ref()
            .map(|s| s.record.clone())
            .unwrap_or_default();
        let worth_it = stored.is_some()
            && (engine::live_holder(&record, now).is_none() || record.requestor.is_some());
        let queue = match queue {
            Some(queue) => queue,
            None if worth_it => self.store.queue(name, deadline).await?,
            None => Vec::new(),
        };
        Ok(Read {
            stored,
            record,
            queue,
            cached: false,
            queue_remembered: false,
        })
    }

    /// The record this instance wrote last, if it has it, else a fresh read. The queue is
    /// read only when the record says callers may wait, and not even then when this instance
    /// remembers the queue behind the record and nobody who could come first has joined
    /// since: the record would name a higher priority than the remembered head's.
    pub(super) async fn read_cached(
        &self,
        name: &LockName,
        deadline: Instant,
        now: UnixMillis,
        use_cache: bool,
    ) -> Result<Read, ServiceError> {
        let Some((record, version, rest)) = self.cache.get(name).filter(|_| use_cache) else {
            return self.read(name, deadline, now, true).await;
        };
        let remembered = record.requestor.is_none()
            && rest
                .first()
                .is_some_and(|head| record.queued == Some(head.priority));
        let queue = if remembered {
            self.metrics.queue_reads_saved.inc();
            rest
        } else if record.queued.is_some() || record.requestor.is_some() {
            self.store.queue(name, deadline).await?
        } else {
            Vec::new()
        };
        let stored = Some(Stored {
            record: record.clone(),
            version,
        });
        Ok(Read {
            stored,
            record,
            queue,
            cached: true,
            queue_remembered: remembered,
        })
    }
}
