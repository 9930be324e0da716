//! Group commit of queue joins with hand-offs.
//!
//! Under contention a lock changes hands on this instance in quick succession, and the
//! caller it was taken from often asks again at once. Joined on its own, that caller's queue
//! node and the next hand-off are two writes, each with a flush of ZooKeeper's log of its
//! own, and the hand-off waits behind the join's flush. So a caller that joins a lock this
//! instance handed over within the last *window* (`--join-window-ms`, 10 ms by default)
//! waits up to a window for the next hand-off of that lock here, and its node is created in
//! that hand-off's own transaction (`LockStore::hand_off`): one write and one flush instead
//! of two (BENCHMARKS.md, "Group commit"). When the window runs out first, or the lock is
//! not changing hands here, it joins on its own; a release that frees the lock sends its
//! waiting joiners on their own at once.
//!
//! Keeps I7 (riders mark the record and queue behind the next waiter) and I9 (a call with a
//! `request_id` always joins on its own); see DESIGN.md, "Invariants" and "Group commit".
//!
//! Why every guarantee of the queue still holds:
//! - **Marked before joining.** The caller marks the record before it joins (`mark_queued`),
//!   as a caller joining on its own does, and the hand-off's record carries the riders'
//!   priorities in its mark too (`engine::queued_with`), in the write that makes their
//!   entries. A release decides on the queue it remembers only when the mark equals that
//!   queue's head's priority (`read_cached`), so every rider it does not know of has at most
//!   the head's priority and a later sequence number: it queues behind the head either way.
//! - **No entry without its write, none on a stand-in.** The store makes the entries only
//!   in the hand-off's transaction, and only when that goes out on the primary session,
//!   whose end takes waiter nodes with it (see `store::zk::session`). A hand-off that does
//!   not land makes none; its joiners then join on their own.
//! - **A lost answer is looked up, not guessed.** When the hand-off's answer is lost, or
//!   the release carrying it was dropped midway, each joiner looks for its own entry by its
//!   key before it creates one. ZooKeeper orders a session's requests only along one
//!   connection, so a listing can miss an entry whose write was sent on a connection that
//!   has since dropped and is applied after the listing: the caller then has two entries.
//!   Its waiting removes the other as an orphan in any round that reads the queue, and when
//!   it is granted through the other entry on a read. A caller handed the lock in process
//!   reads nothing, so its other entry stays; once its lease neither holds the lock nor
//!   held it in the hold just replaced (`engine::spent_entry`), it may be handed the lock
//!   under that lease: a gap of I11 (DESIGN.md, "Invariants"). `tests/suite/group_commit.rs` loses
//!   such an answer on purpose.
//! - **No orphan.** A joiner that goes away while it waits for a hand-off leaves the batch;
//!   one that goes away after a hand-off took it has its new entry deleted by that release.
//! - **Order.** Joiners carried by one hand-off keep their arrival order. A joiner may be
//!   placed up to a window later than if it had joined at once: behind a caller of
//!   another instance that joined meanwhile, or behind a caller of this instance whose own
//!   window ran out meanwhile. That is the same order a slower network would have given.
//! - **Retries keep their place.** A call with a `request_id` always joins on its own,
//!   since a retry must find the entry its first attempt made.
//! - **Priority.** Only a caller that queues behind the waiter next in line after the last
//!   hand-off (of equal or higher priority) waits for the next one; the next hand-off goes
//!   to that waiter or to one that joined ahead of it, never past the rider (a caller that
//!   had to raise the record's mark ranks above every waiter, so it joins at once). Should
//!   a hand-off still find a rider that would come before its new holder (that waiter
//!   left meanwhile), the rider is sent to join on its own at once, as it would have
//!   without the group commit.
//! - **Size.** A hand-off carries at most `MAX_RIDERS` joiners.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

use tokio::sync::oneshot;

use crate::model::LockName;
use crate::store::Joined;
use crate::waiter::{Ticket, Waiter};

/// Above this many remembered hand-offs, the stale ones are dropped.
const MAX_REMEMBERED: usize = 4096;

/// The most joiners one hand-off carries; the others wait for the next one. A ticket is at
/// most a few KB, so a hand-off stays far below ZooKeeper's 1 MB packet limit.
pub const MAX_RIDERS: usize = 32;

/// What a hand-off tells a joiner it took.
#[derive(Debug)]
pub enum Carried {
    /// Its entry, made in the hand-off's transaction.
    Joined(Waiter),
    /// No entry was made.
    Not,
    /// Whether an entry was made is not known: look it up by key.
    Unknown,
}

/// A joiner taken by a hand-off: its ticket, and where to tell it what came of it.
pub struct Rider {
    pub ticket: Ticket,
    reply: oneshot::Sender<Carried>,
}

impl Rider {
    /// Tells the joiner what came of the hand-off. Gives it back when the joiner has gone
    /// (it cannot, while a caller waits: its call runs on a task of its own that ends only
    /// with the service); whatever the hand-off made for it is then the caller's to remove.
    pub fn tell(self, carried: Carried) -> Result<(), Carried> {
        self.reply.send(carried)
    }
}

pub struct JoinBatches {
    inner: Mutex<Batches>,
    /// How long a joiner waits for the next hand-off of its lock on this instance, and how
    /// recent the last one must be for it to wait at all: only a lock that changes hands
    /// here about that often is worth the wait. The default (10 ms) is long enough for a
    /// hand-off that waits behind a slow disk's flush. Zero: nobody waits.
    window: Duration,
}

#[derive(Default)]
struct Batches {
    /// Joiners waiting for the next hand-off, by lock, in arrival order.
    waiting: HashMap<LockName, Vec<(u64, Rider)>>,
    /// When this instance last handed each lock over, and the priority of the waiter then
    /// next in line (`None`: unknown), which the next hand-off goes to or past.
    handed: HashMap<LockName, (Instant, Option<u32>)>,
    next_seat: u64,
}

impl JoinBatches {
    pub fn new(window: Duration) -> Self {
        JoinBatches {
            inner: Mutex::default(),
            window,
        }
    }

    /// How many joiners wait for a hand-off now.
    pub fn seated(&self) -> usize {
        self.inner().waiting.values().map(Vec::len).sum()
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Batches> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A seat on the next hand-off of `name`, when this instance hands it over often enough.
    pub fn offer<'a>(&'a self, name: &LockName, ticket: &Ticket) -> Option<Seat<'a>> {
        if ticket.request_id.is_some() || self.window.is_zero() {
            return None;
        }
        let mut inner = self.inner();
        let (last, next_in_line) = *inner.handed.get(name)?;
        // Only a caller that queues behind the waiter next in line: one that would come
        // before it joins at once, so that the next hand-off reads it in the queue.
        if last.elapsed() >= self.window
            || !crate::engine::may_ride_behind(ticket.priority, next_in_line)
        {
            return None;
        }
        inner.next_seat += 1;
        let seat = inner.next_seat;
        let (reply, answer) = oneshot::channel();
        let rider = Rider {
            ticket: ticket.clone(),
            reply,
        };
        inner
            .waiting
            .entry(name.clone())
            .or_default()
            .push((seat, rider));
        Some(Seat {
            window: self.window,
            batches: self,
            name: name.clone(),
            seat,
            answer,
        })
    }

    /// Takes the joiners waiting for `name`'s next hand-off, the first `MAX_RIDERS` of them:
    /// the caller is about to write it (`handing`, with the priority of the waiter next in
    /// line after it, if known), or to free the lock, and must tell each rider what came of
    /// it.
    pub fn board(&self, name: &LockName, handing: Option<Option<u32>>) -> Vec<Rider> {
        let mut inner = self.inner();
        if let Some(next_in_line) = handing {
            let now = Instant::now();
            if inner.handed.len() >= MAX_REMEMBERED {
                let window = self.window;
                inner
                    .handed
                    .retain(|_, (at, _)| now.duration_since(*at) < window);
            }
            inner.handed.insert(name.clone(), (now, next_in_line));
        }
        let Some(riders) = inner.waiting.get_mut(name) else {
            return Vec::new();
        };
        let boarding: Vec<Rider> = riders
            .drain(..riders.len().min(MAX_RIDERS))
            .map(|(_, rider)| rider)
            .collect();
        if riders.is_empty() {
            inner.waiting.remove(name);
        }
        boarding
    }

    /// Takes `seat` out of its batch; false when a hand-off has taken it already.
    fn leave(&self, name: &LockName, seat: u64) -> bool {
        let mut inner = self.inner();
        let Some(riders) = inner.waiting.get_mut(name) else {
            return false;
        };
        let before = riders.len();
        riders.retain(|(s, _)| *s != seat);
        let left = riders.len() < before;
        if riders.is_empty() {
            inner.waiting.remove(name);
        }
        left
    }
}

/// A joiner's place in the batch of the next hand-off. Dropping it leaves the batch.
pub struct Seat<'a> {
    batches: &'a JoinBatches,
    window: Duration,
    name: LockName,
    seat: u64,
    answer: oneshot::Receiver<Carried>,
}

impl Seat<'_> {
    /// Waits up to a window for a hand-off to take this joiner, then for what came of that
    /// hand-off. `Carried::Not` when none took it in time.
    pub async fn wait(mut self) -> Carried {
        match tokio::time::timeout(self.window, &mut self.answer).await {
            Ok(Ok(carried)) => return carried,
            // The release carrying it was dropped midway: its write may have landed.
            Ok(Err(_)) => return Carried::Unknown,
            Err(_) => {}
        }
        if self.batches.leave(&self.name, self.seat) {
            return Carried::Not;
        }
        (&mut self.answer).await.unwrap_or(Carried::Unknown)
    }
}

impl Drop for Seat<'_> {
    fn drop(&mut self) {
        self.batches.leave(&self.name, self.seat);
    }
}

impl super::LockService {
    /// Tells each rider of a hand-off what came of it (`carried`: what the store said of
    /// their entries). An entry made for a rider that has gone is swept away.
    pub(super) fn tell_riders(&self, name: &LockName, riders: Vec<Rider>, carried: Joined) {
        let entries: Vec<Carried> = match carried {
            Joined::Carried(entries) => entries.into_iter().map(Carried::Joined).collect(),
            Joined::NotCarried => riders.iter().map(|_| Carried::Not).collect(),
            Joined::Unknown => riders.iter().map(|_| Carried::Unknown).collect(),
        };
        for (rider, entry) in riders.into_iter().zip(entries) {
            let ticket = rider.ticket.clone();
            match rider.tell(entry) {
                Err(Carried::Joined(orphan)) => self.reconciler.sweep(name, Some(&orphan), &ticket),
                Err(Carried::Unknown) => self.reconciler.sweep(name, None, &ticket),
                _ => {}
            }
        }
    }
}

#[cfg(test)]
#[path = "group_commit_tests.rs"]
mod tests;
