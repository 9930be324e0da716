//! The embedded in-memory store: the default when no ZooKeeper is configured.
//!
//! It mimics a znode's version and a global, strictly increasing write id (zxid), and keeps
//! queues with the same order as ZooKeeper's, so the service runs the same logic on it.
//! State is lost when the process exits.
//!
//! This file owns the store's calls: each is answered under one hold of the lock on the state
//! (`memory_state.rs`), so a read with its queue shows one state and a hand-off writes the
//! record and removes the waiter at once.
//!
//! Keeps I1 (every write conditional on the version read) and I2 (one global zxid counter),
//! through `memory_state.rs`; see DESIGN.md, "Invariants".

use std::ops::Bound;
use std::sync::Mutex;
use tokio::time::Instant;

use async_trait::async_trait;
use tokio::sync::broadcast;

use super::collect::Removal;
use super::{
    listed, Change, Found, Fresh, HandOff, Joined, ListPage, ListQuery, LockStore, RecordWrite,
    StoreError, Take, Version, Wake, WriteOutcome,
};
use crate::model::LockName;
use crate::record::LockRecord;
use crate::waiter::Watch;
use crate::waiter::{Ticket, Waiter};
use state::{stored, Inner};

#[path = "memory_state.rs"]
mod state;

#[derive(Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// A copy of the records and queues as they are now, which later writes leave as it is:
    /// what a server that lags behind serves (see `store::sim`). Nobody watches the copy.
    pub fn frozen_copy(&self) -> MemoryStore {
        let inner = self.lock();
        let copy = Inner {
            locks: inner.locks.clone(),
            queues: inner.queues.clone(),
            last_zxid: inner.last_zxid,
            last_seq: inner.last_seq,
            ..Inner::default()
        };
        MemoryStore {
            inner: Mutex::new(copy),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Every change is applied in full under the lock, so a poisoned lock is consistent.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl LockStore for MemoryStore {
    /// Every write here is applied when it is answered: the latest state is the state.
    /// Record and queue under one hold of the lock, so they show one state.
    async fn fetch(
        &self,
        name: &LockName,
        take: Take,
        _: Fresh,
        _: Instant,
    ) -> Result<Found, StoreError> {
        let inner = self.lock();
        Ok(Found {
            stored: (take != Take::Queue)
                .then(|| inner.locks.get(name).map(stored))
                .flatten(),
            queue: if take == Take::Record {
                Vec::new()
            } else {
                inner.waiters(name)
            },
        })
    }

    async fn write(
        &self,
        name: &LockName,
        write: RecordWrite<'_>,
        _: Instant,
    ) -> Result<WriteOutcome, StoreError> {
        let mut inner = self.lock();
        Ok(match write {
            RecordWrite::Create(record) => inner.write(name, record, None),
            RecordWrite::Update(record, version) => inner.write(name, record, Some(version)),
        })
    }

    async fn list(&self, query: &ListQuery, _: Instant) -> Result<ListPage, StoreError> {
        let inner = self.lock();
        let mut page = ListPage::default();
        let start = query
            .after
            .clone()
            .map_or(Bound::Unbounded, Bound::Excluded);
        for (name, entry) in inner.locks.range((start, Bound::Unbounded)) {
            if !listed(query, name, &entry.record) {
                continue;
            }
            if page.locks.len() == query.limit {
                page.more = true;
                break;
            }
            page.locks.push((name.clone(), stored(entry).record));
        }
        Ok(page)
    }

    async fn ready(&self, _: Instant) -> Result<(), StoreError> {
        Ok(())
    }

    async fn enqueue(
        &self,
        name: &LockName,
        ticket: &Ticket,
        _: Instant,
    ) -> Result<Waiter, StoreError> {
        Ok(self.lock().enqueue(name, ticket))
    }

    async fn ticket(
        &self,
        name: &LockName,
        waiter: &Waiter,
        _: Instant,
    ) -> Result<Option<Ticket>, StoreError> {
        let inner = self.lock();
        let queue = inner.queues.get(name);
        Ok(queue
            .and_then(|q| q.iter().find(|(w, _)| w.id == waiter.id))
            .map(|(_, t)| t.clone()))
    }

    async fn leave(
        &self,
        name: &LockName,
        waiter: &Waiter,
        _: Instant,
    ) -> Result<bool, StoreError> {
        Ok(self.lock().remove_waiter(name, waiter))
    }

    async fn hand_off(
        &self,
        name: &LockName,
        record: &LockRecord,
        version: Option<Version>,
        waiter: &Waiter,
        joining: &[Ticket],
        _: Instant,
    ) -> Result<HandOff, StoreError> {
        let mut inner = self.lock();
        if !inner.queue_has(name, waiter) {
            return Ok(HandOff::alone(WriteOutcome::Conflict));
        }
        let outcome = inner.write(name, record, version);
        if !matches!(outcome, WriteOutcome::Written { .. }) {
            return Ok(HandOff::alone(outcome));
        }
        inner.remove_waiter(name, waiter);
        let joined = joining.iter().map(|t| inner.enqueue(name, t)).collect();
        Ok(HandOff {
            outcome,
            joined: Joined::Carried(joined),
        })
    }

    async fn wait_change(
        &self,
        name: &LockName,
        watch: &Watch,
        seen: Option<Version>,
        until: Instant,
    ) -> Result<Wake, StoreError> {
        let waiters = self.lock().changes.entry(name.clone()).or_default().clone();
        // Registered before the look, so that a change made after the look (by a write,
        // which takes the lock) is not missed.
        let changed = waiters.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        let already = {
            let inner = self.lock();
            match watch {
                Watch::Record => inner.version_of(name) != seen.map(|v| v.number),
                Watch::Predecessor(id) => !inner
                    .queues
                    .get(name)
                    .is_some_and(|q| q.iter().any(|(w, _)| &w.id == id)),
            }
        };
        let woken = match watch {
            Watch::Record => Wake::Record,
            Watch::Predecessor(_) => Wake::Predecessor,
        };
        if already {
            return Ok(woken);
        }
        tokio::select! {
            biased;
            _ = changed => Ok(woken),
            _ = tokio::time::sleep_until(until) => Ok(Wake::Timer),
        }
    }

    fn changes(&self) -> broadcast::Receiver<Change> {
        self.lock().feed.0.subscribe()
    }
}

#[async_trait]
impl Removal for MemoryStore {
    async fn fence(
        &self,
        name: &LockName,
        version: Version,
        _: Instant,
    ) -> Result<WriteOutcome, StoreError> {
        Ok(self
            .lock()
            .write(name, &LockRecord::default(), Some(version)))
    }

    async fn delete(
        &self,
        name: &LockName,
        version: Version,
        _: Instant,
    ) -> Result<WriteOutcome, StoreError> {
        let mut inner = self.lock();
        if inner.version_of(name) != Some(version.number) {
            return Ok(WriteOutcome::Conflict);
        }
        inner.locks.remove(name);
        inner.changed(name);
        let zxid = inner.next_zxid();
        Ok(WriteOutcome::Written {
            zxid,
            version: Version::plain(-1),
        })
    }

    async fn remove_empty_queues(&self, _: Instant) -> Result<(), StoreError> {
        // An empty queue is dropped as its last waiter leaves.
        Ok(())
    }
}

#[cfg(test)]
#[path = "memory_tests.rs"]
mod tests;
