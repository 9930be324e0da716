//! Deferred, two-phase deletion of released lock records.
//!
//! ZooKeeper restarts a znode's version when the znode is created again, so a conditional
//! write planned against a deleted record could land on its successor at the same version
//! (an ABA: two holders). A release therefore writes a *free* record, and this collector
//! removes it in two phases, each after the delay:
//!
//! 1. **fence**: rewrite the free record, if still at the version freed. Every write planned
//!    on an earlier read now fails its version check.
//! 2. **delete**: a full delay later, delete it, if still at the fenced version.
//!
//! The delay is longer than the longest a write can take to land after the read it was
//! planned on (the request timeout, a request queued across a reconnect, and the age of a
//! cached version; see `ServeArgs::check`). So a write planned before the fence lands before
//! the delete and fails, and a write planned after it lands before the delete too: it either
//! fails or reuses the lock, and then the delete fails. No write can meet a new record.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::model::LockName;
use crate::record::LockRecord;
use crate::store::{LockStore, Version, WriteOutcome};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Fence,
    Delete,
}

/// Records waiting for a phase, in the order they fall due, and the latest version freed
/// for each name (an older entry for a name freed again is skipped).
#[derive(Default)]
struct Pending {
    due: VecDeque<(Instant, LockName, i32, Phase)>,
    latest: HashMap<LockName, i32>,
}

type Shared = Mutex<Pending>;

pub struct Collector {
    pending: Arc<Shared>,
    delay: Duration,
}

const TICK: Duration = Duration::from_millis(100);
/// Past this many pending deletions, new ones are dropped (the records then stay).
const MAX_PENDING: usize = 1_000_000;

impl Collector {
    /// Starts the collector's task; it ends when the collector is dropped.
    pub fn start(store: Arc<dyn LockStore>, delay: Duration, store_timeout: Duration) -> Collector {
        let pending: Arc<Shared> = Arc::default();
        tokio::spawn(collect(
            Arc::downgrade(&pending),
            store,
            delay,
            store_timeout,
        ));
        Collector { pending, delay }
    }

    /// Deletes `name` later, if it is still free at `version` then.
    pub fn schedule(&self, name: &LockName, version: i32) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if pending.due.len() < MAX_PENDING {
            pending.due.push_back((
                Instant::now() + self.delay,
                name.clone(),
                version,
                Phase::Fence,
            ));
            pending.latest.insert(name.clone(), version);
        }
    }
}

async fn collect(
    pending: Weak<Shared>,
    store: Arc<dyn LockStore>,
    delay: Duration,
    store_timeout: Duration,
) {
    loop {
        tokio::time::sleep(TICK).await;
        let Some(shared) = pending.upgrade() else {
            return;
        };
        let now = Instant::now();
        let ready: Vec<(LockName, i32, Phase)> = {
            let mut pending = shared.lock().unwrap_or_else(|e| e.into_inner());
            let count = pending.due.iter().take_while(|(at, ..)| *at <= now).count();
            let drained: Vec<_> = pending.due.drain(..count).collect();
            let mut ready = Vec::new();
            for (_, name, version, phase) in drained {
                if phase == Phase::Fence {
                    if pending.latest.get(&name) != Some(&version) {
                        continue;
                    }
                    pending.latest.remove(&name);
                }
                ready.push((name, version, phase));
            }
            ready
        };
        for (name, version, phase) in ready {
            let deadline = Instant::now() + store_timeout;
            let next = match phase {
                Phase::Fence => match store
                    .update(
                        &name,
                        &LockRecord::default(),
                        Version::plain(version),
                        deadline,
                    )
                    .await
                {
                    Ok(WriteOutcome::Written { version, .. }) => Some(version),
                    // Reused since (its version moved on), or the store is away: it stays.
                    _ => None,
                },
                Phase::Delete => match store.delete(&name, Version::plain(version), deadline).await
                {
                    // Locks are nested under it: try again later (still fenced).
                    Ok(WriteOutcome::NestedLocks) => Some(version),
                    // Deleted, or reused since, or the store is away (then it stays: garbage,
                    // never a wrong lock).
                    _ => None,
                },
            };
            if let Some(version) = next {
                let mut pending = shared.lock().unwrap_or_else(|e| e.into_inner());
                pending
                    .due
                    .push_back((Instant::now() + delay, name, version, Phase::Delete));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;

    const DELAY: Duration = Duration::from_millis(300);

    async fn version_of(store: &MemoryStore, name: &LockName) -> Option<i32> {
        let deadline = Instant::now() + Duration::from_secs(1);
        store
            .read(name, deadline)
            .await
            .unwrap()
            .map(|s| s.version.number)
    }

    async fn free_record(store: &Arc<MemoryStore>, name: &LockName) -> i32 {
        let deadline = Instant::now() + Duration::from_secs(1);
        match store
            .create(name, &LockRecord::default(), deadline)
            .await
            .unwrap()
        {
            WriteOutcome::Written { version, .. } => version,
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_free_record_is_fenced_then_deleted_a_delay_apart() {
        let store = Arc::new(MemoryStore::new());
        let name = LockName::parse("gc/a").unwrap();
        let freed = free_record(&store, &name).await;
        let collector = Collector::start(store.clone(), DELAY, Duration::from_millis(100));
        collector.schedule(&name, freed);
        tokio::time::sleep(DELAY + TICK * 3).await;
        assert_eq!(
            version_of(&store, &name).await,
            Some(freed + 1),
            "fenced: rewritten, not deleted"
        );
        tokio::time::sleep(DELAY + TICK * 3).await;
        assert_eq!(
            version_of(&store, &name).await,
            None,
            "deleted a delay after the fence"
        );
    }

    #[tokio::test]
    async fn a_record_reused_before_either_phase_stays() {
        let store = Arc::new(MemoryStore::new());
        let (early, late) = (
            LockName::parse("gc/early").unwrap(),
            LockName::parse("gc/late").unwrap(),
        );
        let collector = Collector::start(store.clone(), DELAY, Duration::from_millis(100));
        for name in [&early, &late] {
            let freed = free_record(&store, name).await;
            collector.schedule(name, freed);
        }
        let deadline = Instant::now() + Duration::from_secs(1);
        // Reused before the fence.
        store
            .update(&early, &LockRecord::default(), Version::plain(0), deadline)
            .await
            .unwrap();
        tokio::time::sleep(DELAY + TICK * 3).await;
        // Reused after the fence, before the delete.
        let fenced = version_of(&store, &late).await.unwrap();
        store
            .update(
                &late,
                &LockRecord::default(),
                Version::plain(fenced),
                deadline,
            )
            .await
            .unwrap();
        tokio::time::sleep(DELAY + TICK * 3).await;
        assert!(version_of(&store, &early).await.is_some());
        assert!(version_of(&store, &late).await.is_some());
    }
}
