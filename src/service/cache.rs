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
//!
//! The callers waiting on this instance, which it also knows without reading, are in `local`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::model::{LockName, UnixMillis};
use crate::record::LockRecord;
use crate::store::Version;
use crate::waiter::Waiter;

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
