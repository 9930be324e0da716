//! Joining a lock's queue (alone, or in a hand-off's transaction: see `group_commit`), and
//! what a waiter learns from this instance instead of reading ZooKeeper: the mark a caller
//! writes on the record before it joins, the end of a local predecessor's call, the record
//! and queue this instance remembers from its last hand-off, for a caller a hand-off
//! carried in, the waiter registered here just ahead of it, and, for the head of the queue
//! behind a holder likely to release here, that release (`await_release_here`).
//!
//! Keeps I7 (`mark_queued` before joining) and I10 (a carried caller whose hand-off's answer was
//! lost looks its entry up by key); see DESIGN.md, "Invariants".

use tokio::time::Instant;

use super::group_commit::{Carried, MAX_RIDERS};
use super::local::{Notice, Uncounted};
use super::{LockService, Put, Read, ServiceError, WaitBasis};
use crate::engine;
use crate::metrics::JoinedBy;
use crate::model::LockName;
use crate::store::Reads;
use crate::store::{Fresh, Stored, Version, Wake};
use crate::waiter::Watch;
use crate::waiter::{Ticket, Waiter};

/// How a head's wait for a release on its own instance ended (`await_release_here`).
pub(super) enum Grace {
    /// It did not wait: the holder is not likely to release here, or the grace is off.
    None,
    /// No word came within the grace; the head watches the record now.
    RanOut,
    /// The wait's deadline (the holder's expiry, say) came first.
    Timer,
}

impl LockService {
    /// Makes sure the record says callers are queued, at this caller's priority, *before*
    /// it joins (see `engine::announce_waiter`): a release that skips reading the queue then
    /// always finds the record's version moved. `read` is the record as the caller's acquire
    /// just read it. The first round of waiting reads the record again, after joining, and
    /// announces the caller if the record changed meanwhile.
    pub(super) async fn mark_queued(
        &self,
        name: &LockName,
        priority: u32,
        mut read: Option<Stored>,
    ) -> Result<(), ServiceError> {
        let began = Instant::now();
        for _ in 0..super::MAX_ROUNDS {
            let deadline = self.round_deadline(began);
            let current = match read.take() {
                Some(current) => current,
                None => match self.store.read(name, Fresh::Any, deadline).await? {
                    Some(current) => current,
                    None => return Ok(()),
                },
            };
            let Some(marked) = engine::announce_waiter(&current.record, priority) else {
                return Ok(());
            };
            if let Put::Landed(written, version) =
                self.put(name, Some(&current), marked, deadline).await?
            {
                self.cache.remember(name, &written, version);
                return Ok(());
            }
        }
        Err(ServiceError::StoreUnavailable(
            "the lock changed too often to decide".into(),
        ))
    }

    /// Joins `name`'s queue: in the transaction of this instance's next hand-off of the
    /// lock when one comes soon (see `group_commit`), or else on its own. The record is
    /// marked first (`mark_queued`), on what the decision to wait was made on; a decision
    /// made on the record this instance remembers (`WaitBasis::Remembered`) marks it on a
    /// fresh read, and only if the call joins on its own: a hand-off that carries its entry
    /// is conditional on the version it writes over, and carries the caller's priority in
    /// its own mark (`engine::queued_with`). Also says whether a hand-off here carried the
    /// caller in with its entry known, so that its first round may read nothing
    /// (`rider_turn`); an entry found by its key after a lost answer does not count.
    pub(super) async fn join(
        &self,
        name: &LockName,
        ticket: &Ticket,
        basis: WaitBasis,
    ) -> Result<(Waiter, bool), ServiceError> {
        let remembered = match basis {
            WaitBasis::Read(read) => {
                self.mark_queued(name, ticket.priority, read).await?;
                false
            }
            WaitBasis::Remembered => true,
        };
        if let Some(seat) = self.joins.offer(name, ticket) {
            let carried = seat.wait().await;
            // Counted from here: the wait for a hand-off may have taken most of a timeout.
            let deadline = self.deadline();
            match carried {
                Carried::Joined(me) => {
                    self.metrics.queue_joins.at(JoinedBy::HandOff).inc();
                    return Ok((me, true));
                }
                // A listing sent now shows the entry if the hand-off made it and was
                // applied; if it misses one still in flight, the caller ends up with two,
                // and waiting removes the other (see `group_commit`).
                Carried::Unknown => {
                    let queue = self.store.queue(name, deadline).await?;
                    if let Some(me) = queue.into_iter().find(|w| w.key == ticket.key) {
                        self.metrics.queue_joins.at(JoinedBy::HandOff).inc();
                        return Ok((me, false));
                    }
                }
                Carried::Not => {}
            }
        }
        if remembered {
            self.mark_queued(name, ticket.priority, None).await?;
        }
        self.metrics.queue_joins.at(JoinedBy::Alone).inc();
        Ok((
            self.store.enqueue(name, ticket, self.deadline()).await?,
            false,
        ))
    }

    /// When the waiter to watch is a call waiting on this instance too, waits in process
    /// until that call ends (or until `until`) instead of watching its node in ZooKeeper;
    /// `None` when it waits elsewhere. The two end together: its node goes when it is
    /// handed the lock (it learns so in process, or through its own watch, and its call
    /// ends), when it leaves (its call is ending), or with this instance's session (which
    /// every call here then finds gone). Should its call end first and leave its node, the
    /// next round reads the queue and watches the node in ZooKeeper.
    pub(super) async fn behind_waiter_here(
        &self,
        name: &LockName,
        watch: &Watch,
        until: Instant,
    ) -> Option<Wake> {
        let Watch::Predecessor(ahead) = watch else {
            return None;
        };
        let mut ahead = self.local.subscribe(name, ahead)?;
        let ended = async { while ahead.changed().await.is_ok() {} };
        Some(match tokio::time::timeout_at(until, ended).await {
            Ok(()) => Wake::Predecessor,
            Err(_) => Wake::Timer,
        })
    }

    /// When a release on this instance is handing the lock to the waiter `ahead` (on this
    /// instance too), waits until that call has ended, or until `until`: then this instance
    /// has remembered the record and the queue behind it, and the next round needs no read.
    /// Returns at once otherwise, and as soon as such a hand-off fails.
    pub(super) async fn behind_local(&self, name: &LockName, ahead: &str, until: Instant) {
        let Some(mut ahead) = self.local.subscribe(name, ahead) else {
            return;
        };
        let handing = async {
            loop {
                if matches!(*ahead.borrow_and_update(), Notice::Idle) {
                    return;
                }
                if ahead.changed().await.is_err() {
                    return; // its call has ended
                }
            }
        };
        let _ = tokio::time::timeout_at(until, handing).await;
    }

    /// When this waiter watches the record (it heads the queue), and the record it decided
    /// on is one this instance wrote for a holder likely to release here (it got its grant
    /// here, or last renewed here: `RecordCache::holder_here`), waits first for the word of
    /// that release: up to the head's grace (`--head-grace-ms`) from now, and then for as
    /// long as a release here is writing the hand-off to this waiter. In a busy lock the
    /// release comes within the grace and hands this waiter the lock in process (its call
    /// then ends, and this wait with it), so its watch on the record (an `exists`, and later
    /// an event) never reaches ZooKeeper. Otherwise the caller watches the record from the
    /// version it decided on: a change made meanwhile through another instance is seen as
    /// the watch is set, late but never lost.
    pub(super) async fn await_release_here(
        &self,
        name: &LockName,
        watch: &Watch,
        seen: Option<Version>,
        handed: &mut tokio::sync::watch::Receiver<Notice>,
        until: Instant,
    ) -> Grace {
        if !matches!(watch, Watch::Record) || self.head_grace.is_zero() {
            return Grace::None;
        }
        if !seen.is_some_and(|version| self.cache.holder_here(name, version)) {
            return Grace::None;
        }
        let grace_ends = until.min(Instant::now() + self.head_grace);
        tokio::time::sleep_until(grace_ends).await;
        let settled = handed.wait_for(|notice| !matches!(notice, Notice::Pending));
        let _ = tokio::time::timeout_at(until, settled).await;
        if Instant::now() >= until {
            Grace::Timer
        } else {
            Grace::RanOut
        }
    }

    /// The first round of a caller that a hand-off here has just carried into the queue,
    /// decided on what this instance knows instead of on a read: the record it remembers,
    /// and the waiter registered here that comes just before the caller. `None` when there
    /// is no such waiter, or when `limit` callers of the lock here are not yet counted
    /// against its cap (the guard returned counts this one until its first read).
    ///
    /// Only a decision to wait is acted on (`Basis::Remembered`). Waiting for that
    /// waiter is safe although callers of other instances may stand between the two: it is
    /// ahead, so this caller is not at the head while it waits, and when its call ends this
    /// caller decides again, on what is remembered then or on a read.
    pub(super) fn rider_turn<'a>(
        &'a self,
        name: &'a LockName,
        me: &Waiter,
    ) -> Option<(Read, Uncounted<'a>)> {
        let limit = (self.max_waiters_per_lock / 8).min(MAX_RIDERS);
        let ahead = self.local.nearest_ahead(name, me)?;
        let (record, version, _) = self.cache.get(name)?;
        let uncounted = self.local.uncounted(name, limit)?;
        self.metrics.queue_reads_saved.inc();
        let queue = vec![ahead, me.clone()];
        Some((Read::remembered(record, version, queue), uncounted))
    }

    /// When this instance made the last hand-off of the lock and this waiter heads the queue
    /// it left behind, the record and queue it remembers, instead of reading them. Deciding
    /// on them is safe: every write names the remembered version, and the wait that follows
    /// watches the record from that version, so a change since wakes the waiter at once and
    /// it reads (after `await_release_here`'s grace, when the new holder got its grant here).
    /// The engine says when it holds (`engine::remembered_turn_holds`).
    pub(super) fn remembered_turn(
        &self,
        name: &LockName,
        me: &Waiter,
        was_requestor: bool,
    ) -> Option<Read> {
        let (record, version, rest) = self.cache.get(name)?;
        if !engine::remembered_turn_holds(&record, &rest, me, was_requestor) {
            return None;
        }
        self.metrics.queue_reads_saved.inc();
        Some(Read::remembered(record, version, rest))
    }
}
