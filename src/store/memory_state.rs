//! The in-memory store's state: the records, each with a znode-like version and the zxid of
//! its last write, the queues in ZooKeeper's order, and who is told of a change (waiting
//! calls and the change feed). Every change is applied in full by one method, under the
//! store's lock (`memory.rs`).
//!
//! Keeps I1 (a record is written only at the version read) and I2 (one global, strictly
//! increasing zxid counter); see DESIGN.md, "Invariants".

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::Arc;

use tokio::sync::{broadcast, Notify};

use crate::model::LockName;
use crate::record::LockRecord;
use crate::store::{Change, Stored, Version, WriteOutcome, FEED_CAPACITY};
use crate::waiter::{sort_queue, Ticket, Waiter};

#[derive(Default)]
pub(super) struct Inner {
    pub(super) locks: BTreeMap<LockName, Entry>,
    pub(super) queues: HashMap<LockName, Vec<(Waiter, Ticket)>>,
    /// Notified whenever a lock's record or queue changes. (`Notify` wakes its waiters in
    /// the order they came, so a simulation on this store replays exactly.)
    pub(super) changes: HashMap<LockName, Arc<Notify>>,
    pub(super) last_zxid: i64,
    pub(super) last_seq: u64,
    pub(super) feed: Feed,
}

pub(super) struct Feed(pub(super) broadcast::Sender<Change>);

impl Default for Feed {
    fn default() -> Self {
        Feed(broadcast::channel(FEED_CAPACITY).0)
    }
}

#[derive(Clone)]
pub(super) struct Entry {
    pub(super) record: LockRecord,
    pub(super) version: i32,
    pub(super) mzxid: i64,
}

impl Inner {
    pub(super) fn next_zxid(&mut self) -> i64 {
        self.last_zxid += 1;
        self.last_zxid
    }

    pub(super) fn changed(&mut self, name: &LockName) {
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

    pub(super) fn version_of(&self, name: &LockName) -> Option<i32> {
        self.locks.get(name).map(|e| e.version)
    }

    /// Replaces (or, with `version` `None`, creates) a record if it is at `version`.
    pub(super) fn write(
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
    pub(super) fn enqueue(&mut self, name: &LockName, ticket: &Ticket) -> Waiter {
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
    pub(super) fn waiters(&self, name: &LockName) -> Vec<Waiter> {
        self.queues
            .get(name)
            .map(|q| q.iter().map(|(w, _)| w.clone()).collect())
            .unwrap_or_default()
    }

    pub(super) fn queue_has(&self, name: &LockName, waiter: &Waiter) -> bool {
        self.queues
            .get(name)
            .is_some_and(|q| q.iter().any(|(w, _)| w.id == waiter.id))
    }

    pub(super) fn remove_waiter(&mut self, name: &LockName, waiter: &Waiter) -> bool {
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

pub(super) fn stored(entry: &Entry) -> Stored {
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
