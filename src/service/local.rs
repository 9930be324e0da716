//! The callers waiting on this instance, by lock: a release here hands the lock over with
//! the ticket it already knows and tells the waiter in process instead of through a watch
//! and reads; a waiter behind one of them waits for its call to end in process; and a
//! caller a hand-off carried in finds the one just ahead of it here (`nearest_ahead`).
//!
//! Keeps I15 (DESIGN.md, "Invariants"): at most a few uncounted riders per lock here (`uncounted`).

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use tokio::sync::watch;

use crate::model::LockName;
use crate::record::LockRecord;
use crate::waiter::{Ticket, Waiter};

/// What a release on this instance tells a local waiter.
#[derive(Clone, Debug, Default)]
pub enum Notice {
    #[default]
    Idle,
    /// A write that hands the lock to the waiter is in flight: a change to the record seen
    /// meanwhile is most likely that write, and the waiter need not read to find out.
    Pending,
    /// This record, already written, hands the waiter the lock, with the callers queued
    /// behind the waiter as the release knew them.
    Handed(Box<(LockRecord, Vec<Waiter>)>),
}

type HandedSender = watch::Sender<Notice>;

/// Callers waiting on this instance, by lock and waiter id (ids are unique only per lock),
/// and how many wait on each lock.
pub struct LocalWaiters {
    inner: Mutex<Local>,
    /// Whether releases here tell waiters here in process, and waiters here wait for one
    /// another's calls (the in-process hint; `serve --hints-off in-process`). Off, every
    /// waiter learns of a hand-off through its watch, as it does of one made elsewhere.
    in_process: bool,
}

#[derive(Default)]
struct Local {
    waiters: HashMap<(LockName, String), (Ticket, HandedSender)>,
    /// The registered waiters of each lock in service order.
    in_order: HashMap<LockName, BTreeMap<ServiceOrder, Waiter>>,
    per_lock: HashMap<LockName, usize>,
    /// Per lock, the waiters here that have not yet been counted against the lock's cap
    /// (see `LocalWaiters::uncounted`).
    uncounted: HashMap<LockName, usize>,
}

/// A waiter's place in service order: higher priority first, then earlier arrival.
type ServiceOrder = (Reverse<u32>, u64);

fn service_order(waiter: &Waiter) -> ServiceOrder {
    (Reverse(waiter.priority), waiter.seq)
}

impl LocalWaiters {
    pub fn new(in_process: bool) -> Self {
        LocalWaiters {
            inner: Mutex::default(),
            in_process,
        }
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Local> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a waiter until the returned guard goes (however its wait ends, even if
    /// its future is dropped: a waiter behind it may be waiting for that). The receiver sees
    /// what releases on this instance tell it.
    pub fn register<'a>(
        &'a self,
        name: &'a LockName,
        me: &'a Waiter,
        ticket: &Ticket,
    ) -> (watch::Receiver<Notice>, Registered<'a>) {
        let (sender, receiver) = watch::channel(Notice::Idle);
        let key = (name.clone(), me.id.clone());
        let mut inner = self.inner();
        let earlier = inner.waiters.insert(key, (ticket.clone(), sender));
        // Ids are unique per lock, and one call waits once on one instance.
        debug_assert!(earlier.is_none(), "waiter {} registered twice", me.id);
        inner
            .in_order
            .entry(name.clone())
            .or_default()
            .insert(service_order(me), me.clone());
        drop(inner);
        let registered = Registered {
            local: self,
            name,
            me,
        };
        (receiver, registered)
    }

    /// The waiter registered here that comes just before `me` in `name`'s queue, if any.
    /// Waiters of other instances may stand between the two.
    pub fn nearest_ahead(&self, name: &LockName, me: &Waiter) -> Option<Waiter> {
        if !self.in_process {
            return None;
        }
        let inner = self.inner();
        let (_, ahead) = inner
            .in_order
            .get(name)?
            .range(..service_order(me))
            .next_back()?;
        Some(ahead.clone())
    }

    /// Counts a waiter of `name` here as not yet counted against the lock's cap, while
    /// fewer than `limit` are; `None` when `limit` are already. The count drops when the
    /// guard goes: once the waiter has been counted on a read of the queue, or its call ends.
    pub fn uncounted<'a>(&'a self, name: &'a LockName, limit: usize) -> Option<Uncounted<'a>> {
        let mut inner = self.inner();
        if inner.uncounted.get(name).copied().unwrap_or(0) >= limit {
            return None;
        }
        *inner.uncounted.entry(name.clone()).or_default() += 1;
        Some(Uncounted { local: self, name })
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
        if !self.in_process {
            return None;
        }
        let inner = self.inner();
        let (_, sender) = inner.waiters.get(&(name.clone(), id.to_owned()))?;
        Some(sender.subscribe())
    }

    /// Whether any call is joining or waiting in `name`'s queue on this instance.
    pub fn any(&self, name: &LockName) -> bool {
        self.inner().per_lock.contains_key(name)
    }

    /// The ticket of the waiter `id` here, for a hand-off to it without reading it (and
    /// whether a hand-off to it must be told here: off the hint, it watches).
    pub fn ticket(&self, name: &LockName, id: &str) -> Option<Ticket> {
        if !self.in_process {
            return None;
        }
        self.inner()
            .waiters
            .get(&(name.clone(), id.to_owned()))
            .map(|(t, _)| t.clone())
    }

    /// Tells a local waiter that `record` (already written) hands it the lock, with `rest`
    /// queued behind it.
    pub fn handed(&self, name: &LockName, id: &str, record: &LockRecord, rest: &[Waiter]) {
        let handed = Box::new((record.clone(), rest.to_vec()));
        self.tell(name, id, |_| Some(Notice::Handed(handed)));
    }

    /// Tells a local waiter that a write handing it the lock is in flight, until the guard
    /// goes: then, unless it was handed the lock meanwhile, that the write did not land. A
    /// waiter already told it was handed the lock stays told: another release here (a retry,
    /// a force release) may plan a write on a copy older than that hand-off.
    pub fn pending<'a>(&'a self, name: &'a LockName, id: &'a str) -> PendingHandOff<'a> {
        self.tell(name, id, |notice| {
            (!matches!(notice, Notice::Handed(_))).then_some(Notice::Pending)
        });
        PendingHandOff {
            local: self,
            name,
            id,
        }
    }

    fn tell(&self, name: &LockName, id: &str, change: impl FnOnce(&Notice) -> Option<Notice>) {
        if !self.in_process {
            return;
        }
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
    me: &'a Waiter,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        let key = (self.name.clone(), self.me.id.clone());
        let mut inner = self.local.inner();
        inner.waiters.remove(&key);
        if let Some(order) = inner.in_order.get_mut(self.name) {
            order.remove(&service_order(self.me));
            if order.is_empty() {
                inner.in_order.remove(self.name);
            }
        }
    }
}

/// See `LocalWaiters::uncounted`.
pub struct Uncounted<'a> {
    local: &'a LocalWaiters,
    name: &'a LockName,
}

impl Drop for Uncounted<'_> {
    fn drop(&mut self) {
        count_down(&mut self.local.inner().uncounted, self.name);
    }
}

/// See `LocalWaiters::joining`.
pub struct Joining<'a> {
    local: &'a LocalWaiters,
    name: &'a LockName,
}

impl Drop for Joining<'_> {
    fn drop(&mut self) {
        count_down(&mut self.local.inner().per_lock, self.name);
    }
}

/// Counts one less for `name`, and forgets it at none.
fn count_down(counts: &mut HashMap<LockName, usize>, name: &LockName) {
    if let Some(count) = counts.get_mut(name) {
        *count -= 1;
        if *count == 0 {
            counts.remove(name);
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
#[path = "local_tests.rs"]
mod tests;
