//! A session's requests: their time, the session's expiry, the state a read is served
//! from, and the dice each write goes through.

use std::sync::{Arc, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use super::{apply, lock_of, refused, unknown, Applied, Fate, Session, SimStore, Write};
use crate::model::LockName;
use crate::store::memory::MemoryStore;
use crate::store::Reads;
use crate::store::{Fresh, LockStore, StoreError, Stored, WriteOutcome};
use crate::waiter::Waiter;

impl SimStore {
    pub(super) fn session(&self) -> MutexGuard<'_, Session> {
        lock_of(&self.me)
    }

    /// Takes a request's time, and ends the session if the dice say so.
    pub(super) async fn request(&self) {
        let (delay, expire) = {
            let mut world = self.world.lock();
            let max = world.faults.latency_max;
            let p = world.faults.expiry;
            (world.upto(max), world.chance(p))
        };
        tokio::time::sleep(delay).await;
        if expire {
            self.expire().await;
        }
    }

    /// Ends this session: its entries vanish, and a new session takes its place.
    pub(super) async fn expire(&self) {
        if self.world.lock().trace {
            let at = self.world.born.elapsed();
            eprintln!("{at:?} session {} expires", self.session().id);
        }
        let (entries, _) = {
            let mut world = self.world.lock();
            let id = world.next_session;
            world.next_session += 1;
            let mut me = self.session();
            me.id = id;
            (std::mem::take(&mut me.entries), ())
        };
        for (name, waiter) in entries {
            let _ = self
                .world
                .leader
                .leave(&name, &waiter, Instant::now())
                .await;
        }
        self.world.changed();
    }

    /// The state a read is served from: the session's own, or a newer one.
    pub(super) fn view(&self, latest: bool) -> Arc<MemoryStore> {
        let mut world = self.world.lock();
        let mut me = self.session();
        let newest = world.latest();
        let stale = world.faults.stale;
        if latest || !world.chance(stale) {
            me.view = newest;
        } else {
            let oldest = me.view.max(world.oldest_served());
            me.view = world.rng.usize(oldest..=newest);
        }
        me.view = me.view.max(world.first);
        world.states[me.view - world.first].1.clone()
    }

    /// Marks a read's versions as read on this session.
    pub(super) fn on_session(&self, stored: Option<Stored>) -> Option<Stored> {
        let session = self.session().id;
        stored.map(|mut s| {
            s.version.session = session;
            s
        })
    }

    pub(super) async fn read_view(
        &self,
        name: &LockName,
        latest: bool,
    ) -> Result<(Option<Stored>, Vec<Waiter>), StoreError> {
        if self.world.lock().trace {
            let at = self.world.born.elapsed();
            eprintln!(
                "{at:?} session {}: read {name} latest={latest}",
                self.session().id
            );
        }
        self.request().await;
        let refuse = {
            let mut world = self.world.lock();
            let p = world.faults.unavailable;
            world.chance(p)
        };
        if refuse {
            return Err(refused());
        }
        let view = self.view(latest);
        let deadline = Instant::now();
        let (stored, queue) = view.read_with_queue(name, Fresh::Any, deadline).await?;
        Ok((self.on_session(stored), queue))
    }

    /// Sends a write, and lets the dice decide what becomes of it and of its answer.
    pub(super) async fn send(&self, write: Write) -> Result<Applied, StoreError> {
        self.request().await;
        let session = self.session().id;
        let fate = {
            let mut world = self.world.lock();
            let f = world.faults;
            if world.chance(f.unavailable) {
                Fate::Refused
            } else if world.chance(f.lost_before) {
                Fate::LostBefore
            } else if world.chance(f.lost_after) {
                Fate::LostAfter
            } else if world.chance(f.late) {
                Fate::Late(world.upto(f.late_max))
            } else {
                Fate::Answered
            }
        };
        if self.world.lock().trace {
            let at = self.world.born.elapsed();
            eprintln!("{at:?} session {session}: {write:?} → {fate:?}");
        }
        let behind = self.session().late_until;
        if let Some(until) = behind.filter(|&until| until >= Instant::now()) {
            tokio::time::sleep_until(until + Duration::from_millis(1)).await;
        }
        match fate {
            Fate::Answered => Ok(apply(&self.world, &self.me, session, write).await),
            Fate::Refused => Err(refused()),
            Fate::LostBefore => Err(unknown()),
            Fate::LostAfter => {
                apply(&self.world, &self.me, session, write).await;
                Err(unknown())
            }
            Fate::Late(after) => {
                self.session().late_until = Some(Instant::now() + after);
                let world = Arc::downgrade(&self.world);
                let me = Arc::downgrade(&self.me);
                tokio::spawn(async move {
                    tokio::time::sleep(after).await;
                    if let (Some(world), Some(me)) = (world.upgrade(), me.upgrade()) {
                        apply(&world, &me, session, write).await;
                    }
                });
                Err(unknown())
            }
        }
    }

    pub(super) async fn outcome(&self, write: Write) -> Result<WriteOutcome, StoreError> {
        match self.send(write).await? {
            Applied::Outcome(outcome) => Ok(outcome),
            _ => unreachable!("a record write answers an outcome"),
        }
    }
}
