//! A hand-off whose release ended before it knew whether the write landed: the call's caller
//! left (the handler was dropped mid-write), or the call ended in an error or ran out of
//! rounds after a lost answer was read back as "not landed" (`release::let_go`'s `ending`).
//!
//! Such a write may still land, for as long as a write of this instance can (the collector's
//! delay, see `gc`). A waiter on this instance that it hands the lock to may then be parked
//! on a watch of the session the write was lost on, whose event comes only when that session
//! is back, or never: it would hear of its grant at the end of its session or of its wait,
//! seconds later, with its lease holding the lock meanwhile. So the release's guard, dropped
//! while a hand-off of its to a waiter here is unsettled, leaves a task behind that looks at
//! the latest copy now and then (on whichever session serves) and tells the waiter once its
//! lease holds the lock, as a landed hand-off's answer does.
//!
//! The task only tells: a waiter is told of a grant only when a read after a `sync` shows
//! its lease holding the lock, the test a landed write's answer passes too. It stops when no
//! waiter it could tell is registered here any more (each ended its call), when it told one,
//! or when the window in which the release's writes could land has passed (it does not
//! notice the lock going to someone else: it reads on, about once a second, until one of
//! those).
//!
//! The guard is armed for every hand-off whose outcome is unknown, wherever its waiter
//! waits: whether that waiter waits here is asked when the guard goes, since one whose join
//! was still being answered when the release decided may have registered since.
//!
//! Keeps I10 (DESIGN.md, "Invariants") for a release that ended before it knew.

use std::time::Duration;
use tokio::time::Instant;

use super::local::LocalWaiters;
use super::LockService;
use crate::engine;
use crate::model::LockName;
use crate::record::LockRecord;
use crate::store::Fresh;
use crate::waiter::Waiter;

/// The waiters a release's hand-offs went to, and whether one of those writes is unsettled.
/// Dropped while `armed`, it leaves the task of the module doc behind (it costs nothing
/// before that: a release makes one).
pub(super) struct UnsettledHandOff<'a> {
    service: &'a LockService,
    name: &'a LockName,
    pub(super) tried: Vec<Waiter>,
    pub(super) armed: bool,
}

impl<'a> UnsettledHandOff<'a> {
    pub(super) fn new(service: &'a LockService, name: &'a LockName) -> Self {
        UnsettledHandOff {
            service,
            name,
            tried: Vec::new(),
            armed: false,
        }
    }

    pub(super) fn tried(&mut self, to: &Waiter) {
        if !self.tried.iter().any(|w| w.id == to.id) {
            self.tried.push(to.clone());
        }
    }
}

impl Drop for UnsettledHandOff<'_> {
    fn drop(&mut self) {
        let service = self.service;
        let here = |w: &Waiter| service.local.ticket(self.name, &w.id).is_some();
        if !self.armed || !self.tried.iter().any(here) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let store = service.store.clone();
        let local = service.local.clone();
        let name = self.name.clone();
        let tried = std::mem::take(&mut self.tried);
        // How long after it was sent a write may still land.
        let until = Instant::now() + service.landing_window;
        let timeout = service.store_timeout;
        runtime.spawn(async move {
            let mut pause = Duration::from_millis(50);
            while Instant::now() < until {
                if !tried.iter().any(|w| local.ticket(&name, &w.id).is_some()) {
                    return;
                }
                let deadline = Instant::now() + timeout;
                if let Ok((Some(stored), queue)) =
                    store.read_with_queue(&name, Fresh::Latest, deadline).await
                {
                    if tell_handed(&local, &name, &stored.record, &queue, &tried) {
                        return;
                    }
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
        });
    }
}

/// Tells the waiter among `tried` whose lease holds the lock in `record` (read after a
/// `sync`) that it was handed the lock, with the rest of `queue` behind it. Whether one was.
pub(super) fn tell_handed(
    local: &LocalWaiters,
    name: &LockName,
    record: &LockRecord,
    queue: &[Waiter],
    tried: &[Waiter],
) -> bool {
    for to in tried {
        let Some(ticket) = local.ticket(name, &to.id) else {
            continue;
        };
        if engine::holder_with_lease(record, &ticket.lease_id).is_some() {
            let rest: Vec<Waiter> = queue.iter().filter(|w| w.id != to.id).cloned().collect();
            local.handed(name, &to.id, record, &rest);
            return true;
        }
    }
    false
}
