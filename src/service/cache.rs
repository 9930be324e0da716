//! What one instance remembers to skip reads on its hot path, never to decide alone:
//!
//! - the records it wrote last, with their versions: a release or renew can write
//!   conditionally on that version straight away. A stale entry costs one failed write and a
//!   read, nothing more, because every write names the version it expects. While callers of
//!   this instance wait for a lock, a new caller willing to wait decides on it that it waits
//!   too (`acquire`); it decides again on a fresh read once it has joined, so a stale entry
//!   costs it a queue entry and a hand-off where a grant would have done.
//! - after a hand-off, the rest of the queue as read for it: the next release hands the lock
//!   to the head of that rest without reading the queue again, when the record says nobody
//!   who could come before it has joined since (see `engine::announce_waiter`). A waiter in
//!   it that has left makes the hand-off's write fail, and the release reads instead.
//! - the callers waiting on this instance: a release here hands the lock over with the ticket
//!   it already knows, and tells the waiter in-process instead of through a watch and reads.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::model::{LockName, UnixMillis};
use crate::record::LockRecord;
use crate::store::Version;
use crate::waiter::{Ticket, Waiter};

/// Past this many entries, the cache starts again from empty.
const MAX_ENTRIES: usize = 200_000;

/// A record this instance wrote, its version, when, and the queue behind it if known.
struct Entry {
    record: LockRecord,
    version: Version,
    at: Instant,
    rest: Vec<Waiter>,
}

pub struct RecordCache {
    entries: Mutex<HashMap<LockName, Entry>>,
    /// Entries older than this are ignored, so a cached version is never older than the
    /// collector allows for (see `gc`).
    max_age: Duration,
}

impl RecordCache {
    pub fn new(max_age: Duration) -> Self {
        RecordCache {
            entries: Mutex::default(),
            max_age,
        }
    }

    pub fn remember(&self, name: &LockName, record: &LockRecord, version: Version) {
        self.remember_with_rest(name, record, version, Vec::new());
    }

    /// Remembers a hand-off's record with the waiters it left queued behind the new holder.
    pub fn remember_with_rest(
        &self,
        name: &LockName,
        record: &LockRecord,
        version: Version,
        rest: Vec<Waiter>,
    ) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        let entry = Entry {
            record: record.clone(),
            version,
            at: Instant::now(),
            rest,
        };
        entries.insert(name.clone(), entry);
    }

    /// The record, its version and the queue behind it as remembered (empty if unknown).
    pub fn get(&self, name: &LockName) -> Option<(LockRecord, Version, Vec<Waiter>)> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let entry = entries.get(name)?;
        (entry.at.elapsed() < self.max_age)
            .then(|| (entry.record.clone(), entry.version, entry.rest.clone()))
    }

    /// How many remembered records have a holder whose lease has not run out at `now`:
    /// the locks held as far as this instance knows. (A scrape walks every entry, under the
    /// lock, once: at most `MAX_ENTRIES`.)
    pub fn held(&self, now: UnixMillis) -> usize {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .values()
            .filter(|entry| crate::engine::live_holder(&entry.record, now).is_some())
            .count()
    }

    pub fn forget(&self, name: &LockName) {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
    }
}

/// What a release on this instance tells a local waiter.
#[derive(Clone, Debug, Default)]
pub enum Notice {
    #[default]
    Idle,
    /// A write that hands the lock to the waiter is in flight: a change to the record seen
    /// meanwhile is most likely that write, and the waiter need not read to find out.
    Pending,
    /// This record, already written, hands the waiter the lock.
    Handed(Box<LockRecord>),
}

type HandedSender = watch::Sender<Notice>;

/// Callers waiting on this instance, by lock and waiter id (ids are unique only per lock),
/// and how many wait on each lock.
#[derive(Default)]
pub struct LocalWaiters {
    inner: Mutex<Local>,
}

#[derive(Default)]
struct Local {
    waiters: HashMap<(LockName, String), (Ticket, HandedSender)>,
    per_lock: HashMap<LockName, usize>,
}

impl LocalWaiters {
    fn inner(&self) -> std::sync::MutexGuard<'_, Local> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a waiter until the returned guard goes (however its wait ends, even if
    /// its future is dropped: a waiter behind it may be waiting for that). The receiver sees
    /// what releases on this instance tell it.
    pub fn register<'a>(
        &'a self,
        name: &'a LockName,
        id: &'a str,
        ticket: &Ticket,
    ) -> (watch::Receiver<Notice>, Registered<'a>) {
        let (sender, receiver) = watch::channel(Notice::Idle);
        let key = (name.clone(), id.to_owned());
        let earlier = self.inner().waiters.insert(key, (ticket.clone(), sender));
        // Ids are unique per lock, and one call waits once on one instance.
        debug_assert!(earlier.is_none(), "waiter {id} registered twice");
        let registered = Registered {
            local: self,
            name,
            id,
        };
        (receiver, registered)
    }

    /// Counts a call that is joining or waiting in `name`'s queue here, from before it
    /// marks the record until the guard goes (see `any`).
    pub fn joining<'a>(&'a self, name: &'a LockName) -> Joining<'a> {
        *self.inner().per_lock.entry(name.clone()).or_default() += 1;
        Joining { local: self, name }
    }

    /// A receiver that ends (`changed()` fails) once the waiter `id` on this instance has
    /// finished waiting; `None` if no such waiter waits here.
    pub fn subscribe(&self, name: &LockName, id: &str) -> Option<watch::Receiver<Notice>> {
        let inner = self.inner();
        let (_, sender) = inner.waiters.get(&(name.clone(), id.to_owned()))?;
        Some(sender.subscribe())
    }

    /// Whether any call is joining or waiting in `name`'s queue on this instance.
    pub fn any(&self, name: &LockName) -> bool {
        self.inner().per_lock.contains_key(name)
    }

    pub fn ticket(&self, name: &LockName, id: &str) -> Option<Ticket> {
        self.inner()
            .waiters
            .get(&(name.clone(), id.to_owned()))
            .map(|(t, _)| t.clone())
    }

    /// Tells a local waiter that `record` (already written) hands it the lock.
    pub fn handed(&self, name: &LockName, id: &str, record: &LockRecord) {
        self.tell(name, id, |_| Some(Notice::Handed(Box::new(record.clone()))));
    }

    /// Tells a local waiter that a write handing it the lock is in flight, until the guard
    /// goes: then, unless it was handed the lock meanwhile, that the write did not land.
    pub fn pending<'a>(&'a self, name: &'a LockName, id: &'a str) -> PendingHandOff<'a> {
        self.tell(name, id, |_| Some(Notice::Pending));
        PendingHandOff {
            local: self,
            name,
            id,
        }
    }

    fn tell(&self, name: &LockName, id: &str, change: impl FnOnce(&Notice) -> Option<Notice>) {
        if let Some((_, sender)) = self.inner().waiters.get(&(name.clone(), id.to_owned())) {
            sender.send_if_modified(|notice| match change(notice) {
                Some(next) => {
                    *notice = next;
                    true
                }
                None => false,
            });
        }
    }
}

/// See `LocalWaiters::register`.
pub struct Registered<'a> {
    local: &'a LocalWaiters,
    name: &'a LockName,
    id: &'a str,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        let key = (self.name.clone(), self.id.to_owned());
        self.local.inner().waiters.remove(&key);
    }
}

/// See `LocalWaiters::joining`.
pub struct Joining<'a> {
    local: &'a LocalWaiters,
    name: &'a LockName,
}

impl Drop for Joining<'_> {
    fn drop(&mut self) {
        let mut inner = self.local.inner();
        if let Some(count) = inner.per_lock.get_mut(self.name) {
            *count -= 1;
            if *count == 0 {
                inner.per_lock.remove(self.name);
            }
        }
    }
}

/// See `LocalWaiters::pending`.
pub struct PendingHandOff<'a> {
    local: &'a LocalWaiters,
    name: &'a LockName,
    id: &'a str,
}

impl Drop for PendingHandOff<'_> {
    fn drop(&mut self) {
        self.local.tell(self.name, self.id, |notice| {
            matches!(notice, Notice::Pending).then_some(Notice::Idle)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Expiry, Holder};

    #[test]
    fn only_remembered_records_with_a_running_lease_count_as_held() {
        let cache = RecordCache::new(Duration::from_secs(1));
        let held_until = |at| {
            LockRecord::held_by(Holder {
                expires: Expiry::At(UnixMillis(at)),
                ..Holder::minimal("o")
            })
        };
        let name = |n: &str| LockName::parse(n).unwrap();
        cache.remember(&name("running"), &held_until(2_000), Version::plain(2));
        cache.remember(&name("ran-out"), &held_until(1_000), Version::plain(2));
        cache.remember(&name("free"), &LockRecord::default(), Version::plain(2));
        assert_eq!(cache.held(UnixMillis(1_500)), 1);
        assert_eq!(
            cache.held(UnixMillis(2_000)),
            0,
            "a lease ends at its expiry"
        );
    }
}
