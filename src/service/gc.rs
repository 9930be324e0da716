//! Deferred deletion of released lock records.
//!
//! ZooKeeper restarts a znode's version at 0 when the znode is created again, so a
//! conditional write planned against a deleted record could land on its successor (an ABA).
//! A release therefore writes a *free* record, and the instance deletes it only after the
//! garbage-collection delay, conditionally on the version it wrote. The delay is longer than
//! any read-to-write round (each is bounded by the request timeout) and than the age of any
//! cached version, so no pending decision can span a deletion. A record that is reused in
//! the meantime has moved on to another version, and stays.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::model::LockName;
use crate::store::{LockStore, Version, WriteOutcome};

/// Records waiting to be deleted, in the order they fall due, and the latest version
/// scheduled for each name (an older entry for a name that was freed again is skipped).
#[derive(Default)]
struct Pending {
    due: VecDeque<(Instant, LockName, i32)>,
    latest: HashMap<LockName, i32>,
}

type Due = Mutex<Pending>;

pub struct Collector {
    due: Arc<Due>,
    delay: Duration,
}

const TICK: Duration = Duration::from_millis(100);
/// Past this many pending deletions, new ones are dropped (the records then stay).
const MAX_PENDING: usize = 1_000_000;

impl Collector {
    /// Starts the collector's task; it ends when the collector is dropped.
    pub fn start(store: Arc<dyn LockStore>, delay: Duration, store_timeout: Duration) -> Collector {
        let due: Arc<Due> = Arc::default();
        tokio::spawn(collect(Arc::downgrade(&due), store, delay, store_timeout));
        Collector { due, delay }
    }

    /// Deletes `name` after the delay, if it is still at `version` then.
    pub fn schedule(&self, name: &LockName, version: i32) {
        let mut pending = self.due.lock().unwrap_or_else(|e| e.into_inner());
        if pending.due.len() < MAX_PENDING {
            pending
                .due
                .push_back((Instant::now() + self.delay, name.clone(), version));
            pending.latest.insert(name.clone(), version);
        }
    }
}

async fn collect(
    due: Weak<Due>,
    store: Arc<dyn LockStore>,
    delay: Duration,
    store_timeout: Duration,
) {
    loop {
        tokio::time::sleep(TICK).await;
        let Some(queue) = due.upgrade() else { return };
        let now = Instant::now();
        let ready: Vec<(Instant, LockName, i32)> = {
            let mut pending = queue.lock().unwrap_or_else(|e| e.into_inner());
            let count = pending.due.iter().take_while(|(at, ..)| *at <= now).count();
            let drained: Vec<_> = pending.due.drain(..count).collect();
            drained
                .into_iter()
                .filter(|(_, name, version)| {
                    let latest = pending.latest.get(name) == Some(version);
                    if latest {
                        pending.latest.remove(name);
                    }
                    latest
                })
                .collect()
        };
        for (_, name, version) in ready {
            let deleted = store
                .delete(
                    &name,
                    Version::plain(version),
                    Instant::now() + store_timeout,
                )
                .await;
            // Locks are nested under it: try again later. Otherwise it was deleted, or reused
            // since (its version moved on), or the store is away (then it stays: garbage, but
            // never a wrong lock).
            if let Ok(WriteOutcome::NestedLocks) = deleted {
                let mut pending = queue.lock().unwrap_or_else(|e| e.into_inner());
                pending.latest.insert(name.clone(), version);
                pending.due.push_back((now + delay, name, version));
            }
        }
    }
}
