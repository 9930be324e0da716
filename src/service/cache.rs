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
//! - whether the holder of a record it wrote is likely to release here: it got its grant
//!   here, or last renewed here. Then a waiter here at the head of the queue waits for this
//!   instance's word a little before it watches the record in ZooKeeper (see
//!   `joining::await_release_here`). A wrong guess costs that waiter the grace in latency,
//!   never a missed change: the watch, once armed, compares the version the waiter decided
//!   on. Once a guess for a lock proves wrong (`grace_missed`), there is no grace for it here
//!   for `GRACELESS_FOR`: clients whose calls reach several instances pay once per lock and
//!   period, not once per hand-off.
//!
//! The callers waiting on this instance, which it also knows without reading, are in `local`.
//!
//! Keeps I13 (DESIGN.md, "Invariants"): entries expire (`max_age`) before a cached version could
//! outlive the collector's delay.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

use crate::model::{LockName, UnixMillis};
use crate::record::LockRecord;
use crate::store::Version;
use crate::waiter::Waiter;

/// Past this many entries, the cache starts again from empty.
const MAX_ENTRIES: usize = 200_000;

/// How long a lock gets no grace on this instance after a release elsewhere was missed in one.
const GRACELESS_FOR: Duration = Duration::from_secs(30);

/// A record this instance wrote, its version, when, the queue behind it if known, and
/// whether its holder is likely to release here.
struct Entry {
    record: LockRecord,
    version: Version,
    at: Instant,
    rest: Vec<Waiter>,
    holder_here: bool,
}

pub struct RecordCache {
    entries: Mutex<HashMap<LockName, Entry>>,
    /// Entries older than this are ignored, so a cached version is never older than the
    /// collector allows for (see `store::collect`; I13).
    max_age: Duration,
    /// Locks whose head waits for no release here, until when (see `grace_missed`).
    graceless: Mutex<HashMap<LockName, Instant>>,
    /// Whether `get` and `last_written_held` may suggest anything, and whether the queue
    /// behind a record is kept (`serve --hints-off`).
    hints: super::Hints,
}

impl RecordCache {
    pub fn new(max_age: Duration, hints: super::Hints) -> Self {
        RecordCache {
            entries: Mutex::default(),
            max_age,
            graceless: Mutex::default(),
            hints,
        }
    }

    /// Remembers a record this instance wrote. Its holder is likely to release here when the
    /// entry it replaces holds the same grant (the same lease) and said so.
    pub fn remember(&self, name: &LockName, record: &LockRecord, version: Version) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let lease = |r: &LockRecord| r.holder().and_then(|h| h.lease_id);
        let holder_here = entries.get(name).is_some_and(|before| {
            before.holder_here && lease(record).is_some() && lease(&before.record) == lease(record)
        });
        insert(&mut entries, name, record, version, Vec::new(), holder_here);
    }

    /// Remembers a record whose write granted the lock to a caller of this instance.
    pub fn remember_grant(&self, name: &LockName, record: &LockRecord, version: Version) {
        self.remember_with_rest(name, record, version, Vec::new(), true);
    }

    /// Remembers a record with the waiters queued behind its holder (after a hand-off, or
    /// a renewal), and whether that holder is likely to release here.
    pub fn remember_with_rest(
        &self,
        name: &LockName,
        record: &LockRecord,
        version: Version,
        rest: Vec<Waiter>,
        holder_here: bool,
    ) {
        let rest = if self.hints.remembered_queue {
            rest
        } else {
            Vec::new()
        };
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        insert(&mut entries, name, record, version, rest, holder_here);
    }

    /// Whether the record at `version` is one this instance wrote, not long ago, for a
    /// holder likely to release here, and the lock's head may wait for that release.
    pub fn holder_here(&self, name: &LockName, version: Version) -> bool {
        let likely = {
            let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            entries.get(name).is_some_and(|entry| {
                entry.holder_here
                    && entry.version.number() == version.number()
                    && entry.at.elapsed() < self.max_age
            })
        };
        if !likely {
            return false;
        }
        let mut graceless = self.graceless.lock().unwrap_or_else(|e| e.into_inner());
        match graceless.get(name) {
            Some(until) if Instant::now() < *until => false,
            Some(_) => {
                graceless.remove(name);
                true
            }
            None => true,
        }
    }

    /// A head here waited for a release here in vain: another instance handed it the lock
    /// meanwhile. The lock's heads watch at once here for `GRACELESS_FOR`.
    pub fn grace_missed(&self, name: &LockName) {
        let mut graceless = self.graceless.lock().unwrap_or_else(|e| e.into_inner());
        if graceless.len() >= MAX_ENTRIES {
            graceless.clear();
        }
        graceless.insert(name.clone(), Instant::now() + GRACELESS_FOR);
    }

    /// The record, its version and the queue behind it as remembered (empty if unknown).
    pub fn get(&self, name: &LockName) -> Option<(LockRecord, Version, Vec<Waiter>)> {
        if !self.hints.record_cache {
            return None;
        }
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let entry = entries.get(name)?;
        (entry.at.elapsed() < self.max_age)
            .then(|| (entry.record.clone(), entry.version, entry.rest.clone()))
    }

    /// Whether the record this instance wrote last for `name`, however long ago, has a
    /// holder whose lease has not run out at `now`. A hint for which read a call starts
    /// with, never a basis for a write or an answer: unlike `get`, it ignores `max_age`.
    pub fn last_written_held(&self, name: &LockName, now: UnixMillis) -> bool {
        if !self.hints.record_cache {
            return false;
        }
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(name)
            .is_some_and(|entry| crate::engine::live_holder(&entry.record, now).is_some())
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

fn insert(
    entries: &mut HashMap<LockName, Entry>,
    name: &LockName,
    record: &LockRecord,
    version: Version,
    rest: Vec<Waiter>,
    holder_here: bool,
) {
    if entries.len() >= MAX_ENTRIES {
        entries.clear();
    }
    let entry = Entry {
        record: record.clone(),
        version,
        at: Instant::now(),
        rest,
        holder_here,
    };
    entries.insert(name.clone(), entry);
}

#[cfg(test)]
mod tests {
    use super::super::Hints;
    use super::*;
    use crate::model::LeaseId;
    use crate::record::{Expiry, Holder};

    #[test]
    fn a_holder_counts_as_granted_here_only_for_the_grant_this_instance_wrote() {
        let cache = RecordCache::new(Duration::from_secs(60), Hints::ALL_ON);
        let name = LockName::parse("l").unwrap();
        let held = |lease: u8| {
            LockRecord::held_by(Holder {
                lease_id: Some(LeaseId::from_random_bytes([lease; 16])),
                ..Holder::minimal("o")
            })
        };
        cache.remember_grant(&name, &held(1), Version::plain(2));
        assert!(cache.holder_here(&name, Version::plain(2)));
        assert!(
            !cache.holder_here(&name, Version::plain(4)),
            "another version: written elsewhere since"
        );
        // A write here that keeps the grant (a queue mark) keeps it; one that names
        // another holder, or frees the lock, does not.
        cache.remember(&name, &held(1), Version::plain(4));
        assert!(cache.holder_here(&name, Version::plain(4)));
        cache.remember(&name, &held(2), Version::plain(6));
        assert!(!cache.holder_here(&name, Version::plain(6)));
        cache.remember_grant(&name, &held(3), Version::plain(8));
        cache.remember(&name, &LockRecord::default(), Version::plain(10));
        assert!(!cache.holder_here(&name, Version::plain(10)));
        // A hand-off says whether its new holder waits here.
        cache.remember_with_rest(&name, &held(4), Version::plain(12), Vec::new(), false);
        assert!(!cache.holder_here(&name, Version::plain(12)));
        cache.remember(&name, &held(4), Version::plain(14));
        assert!(!cache.holder_here(&name, Version::plain(14)));
        cache.remember_with_rest(&name, &held(5), Version::plain(16), Vec::new(), true);
        assert!(cache.holder_here(&name, Version::plain(16)));
        assert!(!cache.holder_here(&LockName::parse("other").unwrap(), Version::plain(16)));
    }

    #[test]
    fn a_missed_grace_turns_the_grace_off_for_that_lock_only() {
        let cache = RecordCache::new(Duration::from_secs(60), Hints::ALL_ON);
        let (one, two) = (
            LockName::parse("one").unwrap(),
            LockName::parse("two").unwrap(),
        );
        let held = LockRecord::held_by(Holder::minimal("o"));
        cache.remember_grant(&one, &held, Version::plain(2));
        cache.remember_grant(&two, &held, Version::plain(2));
        cache.grace_missed(&one);
        assert!(!cache.holder_here(&one, Version::plain(2)));
        cache.remember_grant(&one, &held, Version::plain(4));
        assert!(
            !cache.holder_here(&one, Version::plain(4)),
            "off for a while, whatever is written"
        );
        assert!(cache.holder_here(&two, Version::plain(2)));
    }

    #[test]
    fn an_old_entry_says_nothing_of_its_holder() {
        let cache = RecordCache::new(Duration::ZERO, Hints::ALL_ON);
        let name = LockName::parse("l").unwrap();
        cache.remember_grant(
            &name,
            &LockRecord::held_by(Holder::minimal("o")),
            Version::plain(2),
        );
        assert!(!cache.holder_here(&name, Version::plain(2)));
    }

    #[test]
    fn only_remembered_records_with_a_running_lease_count_as_held() {
        let cache = RecordCache::new(Duration::from_secs(1), Hints::ALL_ON);
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

    #[test]
    fn a_hint_turned_off_suggests_nothing() {
        let name = LockName::parse("l").unwrap();
        let held = LockRecord::held_by(Holder::minimal("o"));
        let rest = vec![Waiter::parse(&format!("{}7", Waiter::id_prefix(1, "w"))).unwrap()];
        let no_record = Hints {
            record_cache: false,
            ..Hints::ALL_ON
        };
        let cache = RecordCache::new(Duration::from_secs(60), no_record);
        cache.remember_with_rest(&name, &held, Version::plain(2), rest.clone(), true);
        assert!(cache.get(&name).is_none());
        assert!(!cache.last_written_held(&name, UnixMillis(0)));
        assert_eq!(cache.held(UnixMillis(0)), 1, "the gauge still counts it");
        let no_queue = Hints {
            remembered_queue: false,
            ..Hints::ALL_ON
        };
        let cache = RecordCache::new(Duration::from_secs(60), no_queue);
        cache.remember_with_rest(&name, &held, Version::plain(2), rest, true);
        let (_, version, remembered) = cache.get(&name).unwrap();
        assert_eq!((version, remembered.len()), (Version::plain(2), 0));
    }
}
