//! The collector of free lock records: it schedules each freed record's removal, and sweeps
//! for free records nobody scheduled (an instance that crashed or restarted, an item dropped
//! on errors) and for queue containers nobody waits in.
//!
//! A record goes in two steps a delay apart, each a [`Collect`] step of the store: the
//! fence, then, a full `delay` after it, the delete if the record is still in the state the
//! fence left. What each step reads and writes, and why no write can then meet a new record,
//! is `store::collect`'s. This module owns when: one fence item per name, the delays, the
//! retries while the store is away, and the sweep.
//!
//! Keeps I13 with `store::collect` (the delay between the steps, a fresh step however late an
//! item runs) and, with the sweep, I12 (no free record or empty queue container is left
//! behind); see DESIGN.md, "Invariants".

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::time::Instant;

use tracing::{debug, warn};

use crate::engine::collectable;
use crate::model::LockName;
use crate::store::{Collect, Collected, FenceMark, ListQuery, LockStore};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Fence,
    /// Delete the record if it is still in the state the fence left.
    Delete(FenceMark),
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
    let cleared = store
        .collect(Collect::EmptyQueues, collectable, deadline)
        .await;
    cleared.map(drop).map_err(|error| {
        debug!(%error, "the collector's sweep could not look at the queues");
    })
}

/// Runs one step on the store; returns the next item to queue, if any.
async fn run(
    store: &dyn LockStore,
    item: &Item,
    timing: GcTiming,
) -> Option<(Instant, Phase, u32)> {
    let step = match item.phase {
        Phase::Fence => Collect::Fence(&item.name),
        Phase::Delete(mark) => Collect::Delete(&item.name, mark),
    };
    let deadline = Instant::now() + timing.store_timeout;
    let done = store.collect(step, collectable, deadline).await;
    // A full delay from the step's answer.
    let later = Instant::now() + timing.delay;
    match done {
        Ok(Collected::Fenced(mark)) => Some((later, Phase::Delete(mark), 0)),
        Ok(Collected::Done) => None,
        Ok(Collected::Again) => Some((later, Phase::Fence, 0)),
        Err(error) => {
            warn!(lock = %item.name, %error, "the collector will try again");
            (item.tries < MAX_TRIES).then(|| {
                let wait = timing.store_timeout.min(Duration::from_secs(1));
                (Instant::now() + wait, item.phase, item.tries + 1)
            })
        }
    }
}

#[cfg(test)]
#[path = "gc_tests.rs"]
mod tests;
