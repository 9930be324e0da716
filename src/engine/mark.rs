//! The queue mark (`LockRecord::queued`): what a record says of the callers waiting in its
//! queue, so that no release hands the lock past a caller on what it knew before the caller
//! came.
//!
//! Keeps I7 (DESIGN.md, "Invariants"): a caller marks the record before it joins
//! (`announce_waiter`), so no release barges past it.

use crate::record::LockRecord;
use crate::waiter::Waiter;

/// What a record that replaces `current` says of the queue once `taken` (if any) leaves it.
/// `complete` says that `queue` was read for this write; otherwise it is what the writer
/// remembers, and callers may have joined since, unseen, so the record must still say that
/// someone waits. The priority is a high-water mark: it falls only when the queue is empty.
pub fn queued_after(
    current: &LockRecord,
    queue: &[Waiter],
    taken: Option<&str>,
    complete: bool,
) -> Option<u32> {
    let highest = queue
        .iter()
        .filter(|w| Some(w.id.as_str()) != taken)
        .map(|w| w.priority)
        .max();
    if complete && highest.is_none() {
        return None;
    }
    current.queued.max(highest)
}

/// The record a caller must write before it joins the queue, if any: when the record does
/// not say that callers wait, or names a lower priority than the caller's. Then no release
/// can hand the lock past the caller on what it knew before the caller came (I7). A free lock
/// needs none: nobody releases it, and the head of the queue takes it.
pub fn announce_waiter(current: &LockRecord, priority: u32) -> Option<LockRecord> {
    if current.holders.is_empty() || current.queued.is_some_and(|p| p >= priority) {
        return None;
    }
    Some(LockRecord {
        queued: current.queued.max(Some(priority)),
        forced: None,
        ..current.clone()
    })
}

/// The `queued` mark of a hand-off's record whose transaction also queues callers at
/// `priorities`: as if each of them had marked the record before it joined.
pub fn queued_with(queued: Option<u32>, priorities: impl IntoIterator<Item = u32>) -> Option<u32> {
    queued.max(priorities.into_iter().max())
}

/// Whether a caller of `priority` joining the queue may ride on a hand-off (group commit)
/// to a waiter of priority `ahead` (`None`: the lock is freed, or who is next is unknown):
/// only behind it, since a caller that would come before the waiter handed the lock must be
/// in the queue before the hand-off is decided (I7).
pub fn may_ride_behind(priority: u32, ahead: Option<u32>) -> bool {
    ahead.is_some_and(|ahead| priority <= ahead)
}
