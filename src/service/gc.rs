//! Deferred, two-phase deletion of free lock records, and the sweep that finds free records
//! nobody scheduled (an instance that crashed or restarted, an item dropped on errors).
//!
//! ZooKeeper restarts a znode's version when the znode is created again, so a conditional
//! write planned against a deleted record could land on its successor at the same version
//! (an ABA: two holders). A release therefore writes a *free* record, and this collector
//! removes it in two phases, each a delay apart:
//!
//! 1. **fence**: on a fresh read, if the record is still free, rewrite it as a fenced free
//!    record. On ZooKeeper a fenced record sits at an **odd** version, and no live record
//!    ever does (every lockwarden write leaves an even version: `store::zk::ops`,
//!    `Ops::set_record`).
//! 2. **delete**: a full delay after the fence, on a fresh read, delete it if it is still
//!    in the very state the fence left (same `mzxid`, the id of the write that made it).
//!
//! Why no write can meet a new record:
//! - Every item is re-read (with `sync`, so not from a lagging follower) right before its
//!   write, and the write goes out on the session of that read, within the store timeout.
//!   A collector item is only a reminder: however late it runs (a pause, a burst of items
//!   behind a slow store, instances with different delays), it acts on the present state.
//! - A write planned on a fenced record names an odd version, so it can land only on a
//!   fenced free record, never on a live record that replaced it.
//! - A write planned on a record before its fence names an even version. It is sent on the
//!   session of its read, within the request timeout, and a request can be held across a
//!   reconnect for at most 1.5 session timeouts; that whole window is shorter than the
//!   delay (`ServeArgs::check`). A pause longer than the session timeout ends the session,
//!   and the write with it. So it lands before the delete: on the old record, where the
//!   fence has moved the version (it fails) or has not yet (it reuses the lock, and the
//!   fence and delete then fail).
//! - The delete names the fenced version and is checked against the fence's `mzxid`: it only
//!   ever removes a fenced free record that nobody has touched for a full delay.
//!
//! Limits of the argument, stated so they can be checked:
//! - "Sent within the request timeout" means the write is *issued* before its deadline;
//!   a task delayed between the check and the send may issue it a little later. The delay
//!   exceeds the window by a margin for that.
//! - `sync` then read is how ZooKeeper offers an up-to-date read; across a leader change it
//!   is not strictly linearizable (ZOOKEEPER-1675). The collector needs only that the read is
//!   not older than the request timeout, which holds.
//! - Parity holds for records only lockwarden writes. A Helix client's plain `setData` may
//!   leave a live record at an odd version; such a record relies on the timing argument
//!   alone (session binding and the `mzxid` check), which still holds.
//!
//! Keeps I13 (the argument above) and, with the sweep, I12 (no free record or empty queue container
//! is left behind); see DESIGN.md, "Invariants".

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::time::Instant;

use tracing::{debug, warn};

use crate::model::LockName;
use crate::store::Reads;
use crate::store::{Fresh, ListQuery, LockStore, RecordWrite, Stored, WriteOutcome};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Fence,
    /// Delete the record if it is still in the state the fence left (its `Version::zxid`).
    Delete {
        fenced: i64,
    },
}

struct Item {
    due: Instant,
    name: LockName,
    phase: Phase,
    /// Failed tries so far (the store was away); after `MAX_TRIES` the sweep takes over.
    tries: u32,
}

/// Items in the order they fall due, and when each name's fence is due. A name has at most
/// one fence item queued: a name released again before its fence postpones it, and the
/// item, when it comes up, goes back to wait for the later time.
#[derive(Default)]
struct Pending {
    due: VecDeque<Item>,
    fence_due: HashMap<LockName, Instant>,
}

type Shared = Mutex<Pending>;

#[derive(Clone, Copy, Debug)]
pub struct GcTiming {
    pub delay: Duration,
    pub store_timeout: Duration,
    /// How often every record is looked at for free records nobody scheduled.
    pub sweep_every: Duration,
}

#[derive(Clone)]
pub struct Collector {
    pending: Arc<Shared>,
    delay: Duration,
}

const TICK: Duration = Duration::from_millis(100);
/// Past this many pending items, new ones are dropped (the sweep finds them later).
const MAX_PENDING: usize = 1_000_000;
const MAX_TRIES: u32 = 20;
const SWEEP_PAGE: usize = 500;

impl Collector {
    /// Starts the collector's tasks: one runs the phases as they fall due, one sweeps at
    /// once and then every `sweep_every`. They end when the last clone is dropped.
    pub fn start(store: Arc<dyn LockStore>, timing: GcTiming) -> Collector {
        let pending: Arc<Shared> = Arc::default();
        tokio::spawn(collect(Arc::downgrade(&pending), store.clone(), timing));
        tokio::spawn(sweep_now_and_then(Arc::downgrade(&pending), store, timing));
        Collector {
            pending,
            delay: timing.delay,
        }
    }

    /// How long after it was sent a write of this instance may still land: the collector's
    /// delay, which `ServeArgs::check` makes longer than that (the argument above). The
    /// reconciler looks for such writes as long.
    pub fn landing_window(&self) -> Duration {
        self.delay
    }

    /// Deletes `name` later, if it is free then.
    pub fn schedule(&self, name: &LockName) {
        let due = Instant::now() + self.delay;
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        push(&mut pending, due, name, Phase::Fence, 0);
    }
}

fn push(pending: &mut Pending, due: Instant, name: &LockName, phase: Phase, tries: u32) {
    if phase == Phase::Fence {
        // One fence item per name: a release of a name already scheduled only postpones
        // its fence, so the queue grows with the names released, not with the releases.
        if let Some(fence_due) = pending.fence_due.get_mut(name) {
            *fence_due = (*fence_due).max(due);
            return;
        }
    }
    if pending.due.len() >= MAX_PENDING {
        return;
    }
    if phase == Phase::Fence {
        pending.fence_due.insert(name.clone(), due);
    }
    let item = Item {
        due,
        name: name.clone(),
        phase,
        tries,
    };
    // Items are nearly always pushed in due order; keep the queue sorted when they are not.
    if pending.due.back().is_none_or(|last| last.due <= due) {
        pending.due.push_back(item);
    } else {
        let at = pending.due.partition_point(|queued| queued.due <= due);
        pending.due.insert(at, item);
    }
}

/// Takes the items due at `now`. A fence postponed since its item was queued goes back to
/// wait for its new time.
fn take_due(pending: &mut Pending, now: Instant) -> Vec<Item> {
    let count = pending.due.partition_point(|item| item.due <= now);
    let drained: Vec<Item> = pending.due.drain(..count).collect();
    let mut ready = Vec::with_capacity(drained.len());
    for item in drained {
        if item.phase != Phase::Fence {
            ready.push(item);
            continue;
        }
        match pending.fence_due.get(&item.name).copied() {
            Some(due) if due > item.due => {
                pending.fence_due.remove(&item.name);
                push(pending, due, &item.name, Phase::Fence, item.tries);
            }
            Some(_) => {
                pending.fence_due.remove(&item.name);
                ready.push(item);
            }
            None => {}
        }
    }
    ready
}

async fn collect(pending: Weak<Shared>, store: Arc<dyn LockStore>, timing: GcTiming) {
    loop {
        tokio::time::sleep(TICK).await;
        let Some(shared) = pending.upgrade() else {
            return;
        };
        let now = Instant::now();
        let ready = take_due(&mut shared.lock().unwrap_or_else(|e| e.into_inner()), now);
        for item in ready {
            let next = run(store.as_ref(), &item, timing).await;
            if let Some((due, phase, tries)) = next {
                let mut pending = shared.lock().unwrap_or_else(|e| e.into_inner());
                push(&mut pending, due, &item.name, phase, tries);
            }
        }
    }
}

/// Sweeps at once, then every `sweep_every`; after a failed sweep (the store is away, say
/// while the service starts), again after a backoff that grows to `sweep_every`.
async fn sweep_now_and_then(pending: Weak<Shared>, store: Arc<dyn LockStore>, timing: GcTiming) {
    let mut backoff = Duration::from_secs(1);
    loop {
        let Some(shared) = pending.upgrade() else {
            return;
        };
        let wait = match sweep(&shared, store.as_ref(), timing).await {
            Ok(()) => {
                backoff = Duration::from_secs(1);
                timing.sweep_every
            }
            Err(()) => {
                backoff = (backoff * 2).min(timing.sweep_every);
                backoff
            }
        };
        drop(shared);
        tokio::time::sleep(wait).await;
    }
}

/// Free records (nobody holds, asks or waits) are scheduled, page by page, and queue
/// containers that never had a waiter are removed. A page may walk many held records to
/// find its free ones, so it gets more time than a request.
async fn sweep(shared: &Shared, store: &dyn LockStore, timing: GcTiming) -> Result<(), ()> {
    let mut after = None;
    loop {
        let query = ListQuery {
            prefix: String::new(),
            after: after.clone(),
            limit: SWEEP_PAGE,
            free: true,
            within: None,
        };
        let deadline = Instant::now() + timing.store_timeout * 10;
        let page = store.list(&query, deadline).await.map_err(|error| {
            debug!(%error, "the collector's sweep could not list records");
        })?;
        let due = Instant::now() + timing.delay;
        {
            let mut pending = shared.lock().unwrap_or_else(|e| e.into_inner());
            for (name, _) in &page.locks {
                if !pending.fence_due.contains_key(name) {
                    push(&mut pending, due, name, Phase::Fence, 0);
                }
            }
        }
        match (page.more, page.locks.last()) {
            (true, Some((last, _))) => after = Some(last.clone()),
            _ => break,
        }
    }
    let deadline = Instant::now() + timing.store_timeout * 10;
    store
        .remove_empty_queues(deadline)
        .await
        .map_err(|error| debug!(%error, "the collector's sweep could not look at the queues"))
}

/// Runs one phase on a fresh read; returns the next item to queue, if any.
async fn run(
    store: &dyn LockStore,
    item: &Item,
    timing: GcTiming,
) -> Option<(Instant, Phase, u32)> {
    let retry = || {
        (item.tries < MAX_TRIES).then(|| {
            let wait = timing.store_timeout.min(Duration::from_secs(1));
            (Instant::now() + wait, item.phase, item.tries + 1)
        })
    };
    let deadline = Instant::now() + timing.store_timeout;
    let stored = match store.read(&item.name, Fresh::Latest, deadline).await {
        Ok(Some(stored)) => stored,
        Ok(None) => return None,
        Err(_) => return retry(),
    };
    if !is_collectable(&stored) {
        // Taken again since: its next release schedules it anew.
        return None;
    }
    let outcome = match item.phase {
        Phase::Fence => {
            store
                .write(&item.name, RecordWrite::Fence(stored.version), deadline)
                .await
        }
        Phase::Delete { fenced } if fenced == stored.version.zxid() => {
            store
                .write(&item.name, RecordWrite::Delete(stored.version), deadline)
                .await
        }
        // Written since the fence: by a release, or by another instance's fence. Whoever
        // wrote it has it scheduled (or the sweep finds it), so this item ends here. Were it
        // to fence again, items of three instances a little apart would each move the record
        // just before another's delete, and none would ever delete it.
        Phase::Delete { .. } => return None,
    };
    match (item.phase, outcome) {
        (Phase::Fence, Ok(WriteOutcome::Written { zxid, .. })) => Some((
            Instant::now() + timing.delay,
            Phase::Delete { fenced: zxid },
            0,
        )),
        // Locks are nested under it: it stays as their parent; a later sweep finds it.
        (Phase::Delete { .. }, Ok(WriteOutcome::NestedLocks)) => None,
        (_, Ok(WriteOutcome::Written { .. })) => None,
        // The record changed under the write (or the session did): look again.
        (_, Ok(WriteOutcome::Conflict | WriteOutcome::NestedLocks)) => {
            Some((Instant::now() + timing.delay, Phase::Fence, 0))
        }
        (_, Err(error)) => {
            warn!(lock = %item.name, %error, "the collector will try again");
            retry()
        }
    }
}

/// The engine's rule, on a znode that holds a record (not an empty container of nested
/// names, which ZooKeeper reaps itself).
fn is_collectable(stored: &Stored) -> bool {
    crate::engine::collectable(&stored.record) && stored.version.holds_record()
}

#[cfg(test)]
#[path = "gc_tests.rs"]
mod tests;
