//! The embedded in-memory store: the default when no ZooKeeper is configured.
//!
//! It mimics a znode's version and a global, strictly increasing write id (zxid), and keeps
//! queues with the same order as ZooKeeper's, so the service runs the same logic on it.
//! State is lost when the process exits.
//!
//! Keeps I1 (every write conditional on the version read) and I2 (one global zxid counter); see
//! DESIGN.md, "Invariants".

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::{Arc, Mutex};
use tokio::time::Instant;

use async_trait::async_trait;
use tokio::sync::{broadcast, Notify};

use super::{
    listed, Change, Fresh, HandOff, Joined, ListPage, ListQuery, LockStore, RecordWrite,
    StoreError, Stored, Version, Wake, WriteOutcome, FEED_CAPACITY,
};
use crate::model::LockName;
use crate::record::LockRecord;
use crate::waiter::Watch;
use crate::waiter::{sort_queue, Ticket, Waiter};

#[derive(Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    locks: BTreeMap<LockName, Entry>,
    queues: HashMap<LockName, Vec<(Waiter, Ticket)>>,
    /// Notified whenever a lock's record or queue changes. (`Notify` wakes its waiters in
    /// the order they came, so a simulation on this store replays exactly.)
    changes: HashMap<LockName, Arc<Notify>>,
    last_zxid: i64,
    last_seq: u64,
    feed: Feed,
}

struct Feed(broadcast::Sender<Change>);

impl Default for Feed {
    fn default() -> Self {
        Feed(broadcast::channel(FEED_CAPACITY).0)
    }
}

#[derive(Clone)]
struct Entry {
    record: LockRecord,
    version: i32,
    mzxid: i64,
}

impl Inner {
    fn next_zxid(&mut self) -> i64 {
        self.last_zxid += 1;
        self.last_zxid
    }

    fn changed(&mut self, name: &LockName) {
        if self.feed.0.receiver_count() > 0 {
            let _ = self.feed.0.send(Change::Lock(name.clone()));
        }
        if let Some(waiters) = self.changes.get(name) {
            if Arc::strong_count(waiters) == 1 {
                self.changes.remove(name);
            } else {
                waiters.notify_waiters();
            }
        }
    }

    /// True when a lock nested under `name` exists; as on ZooKeeper, `name` cannot then
    /// hold a record itself. Nested names sort right after their parent.
    fn has_nested(&self, name: &LockName) -> bool {
        let depth = name.parts().count();
        self.locks
            .range((Bound::Excluded(name.clone()), Bound::Unbounded))
            .next()
            .is_some_and(|(next, _)| {
                next.parts().count() > depth && next.parts().take(depth).eq(name.parts())
            })
    }

    fn version_of(&self, name: &LockName) -> Option<i32> {
        self.locks.get(name).map(|e| e.version)
    }

    /// Replaces (or, with `version` `None`, creates) a record if it is at `version`.
    fn write(
        &mut self,
        name: &LockName,
        record: &LockRecord,
        version: Option<Version>,
    ) -> WriteOutcome {
        if self.version_of(name) != version.map(|v| v.number) {
            return WriteOutcome::Conflict;
        }
        if version.is_none() && self.has_nested(name) {
            return WriteOutcome::NestedLocks;
        }
        let zxid = self.next_zxid();
        let next_version = version.map_or(0, |v| v.number + 1);
        self.locks.insert(
            name.clone(),
            Entry {
                record: record.clone(),
                version: next_version,
                mzxid: zxid,
            },
        );
        self.changed(name);
        WriteOutcome::Written {
            zxid,
            version: Version::plain(next_version),
        }
    }

    /// Joins `name`'s queue; a ticket whose key is queued already finds that entry.
    fn enqueue(&mut self, name: &LockName, ticket: &Ticket) -> Waiter {
        if let Some((existing, _)) = self
            .queues
            .get(name)
            .and_then(|q| q.iter().find(|(w, _)| w.key == ticket.key))
        {
            return existing.clone();
        }
        self.last_seq += 1;
        let id = format!(
            "{}{:010}",
            Waiter::id_prefix(ticket.priority, &ticket.key),
            self.last_seq
        );
        let waiter = Waiter::parse(&id).expect("a waiter id we just formatted parses");
        let queue = self.queues.entry(name.clone()).or_default();
        queue.push((waiter.clone(), ticket.clone()));
        let mut waiters: Vec<Waiter> = queue.iter().map(|(w, _)| w.clone()).collect();
        sort_queue(&mut waiters);
        queue.sort_by_key(|(w, _)| waiters.iter().position(|x| x.id == w.id));
        self.changed(name);
        waiter
    }

    /// The lock's queue, in service order.
    fn waiters(&self, name: &LockName) -> Vec<Waiter> {
        self.queues
            .get(name)
            .map(|q| q.iter().map(|(w, _)| w.clone()).collect())
            .unwrap_or_default()
    }

    fn queue_has(&self, name: &LockName, waiter: &Waiter) -> bool {
        self.queues
            .get(name)
            .is_some_and(|q| q.iter().any(|(w, _)| w.id == waiter.id))
    }

    fn remove_waiter(&mut self, name: &LockName, waiter: &Waiter) -> bool {
        let Some(queue) = self.queues.get_mut(name) else {
            return false;
        };
        let before = queue.len();
        queue.retain(|(w, _)| w.id != waiter.id);
        let removed = queue.len() != before;
        if queue.is_empty() {
            self.queues.remove(name);
        }
        if removed {
            self.changed(name);
        }
        removed
    }
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

fn stored(entry: &Entry) -> Stored {
    let mut record = entry.record.clone();
    record.resolve_token(entry.mzxid);
    Stored {
        record,
        version: Version {
            mzxid: entry.mzxid,
            ..Version::plain(entry.version)
        },
    }
}

#[async_trait]
impl LockStore for MemoryStore {
    /// Every write here is applied when it is answered: the latest state is the state.
    async fn read(
        &self,
        name: &LockName,
        _: Fresh,
        _: Instant,
    ) -> Result<Option<Stored>, StoreError> {
        Ok(self.lock().locks.get(name).map(stored))
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
            RecordWrite::Fence(version) => inner.write(name, &LockRecord::default(), Some(version)),
            RecordWrite::Delete(version) => {
                if inner.version_of(name) != Some(version.number) {
                    return Ok(WriteOutcome::Conflict);
                }
                inner.locks.remove(name);
                inner.changed(name);
                let zxid = inner.next_zxid();
                WriteOutcome::Written {
                    zxid,
                    version: Version::plain(-1),
                }
            }
        })
    }

    async fn remove_empty_queues(&self, _: Instant) -> Result<(), StoreError> {
        // An empty queue is dropped as its last waiter leaves.
        Ok(())
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

    async fn queue(&self, name: &LockName, _: Instant) -> Result<Vec<Waiter>, StoreError> {
        Ok(self.lock().waiters(name))
    }

    /// Both under one hold of the lock, so they show one state.
    async fn read_with_queue(
        &self,
        name: &LockName,
        _: Fresh,
        _: Instant,
    ) -> Result<(Option<Stored>, Vec<Waiter>), StoreError> {
        let inner = self.lock();
        Ok((inner.locks.get(name).map(stored), inner.waiters(name)))
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

#[cfg(test)]
#[path = "memory_tests.rs"]
mod tests;
