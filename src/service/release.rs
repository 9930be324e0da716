//! Release and force release (renew is in `renew`). Each first tries the record this
//! instance wrote last (a conditional write on its version, with no read), and falls back
//! to reading when the record changed. A release with callers waiting hands the lock to the
//! next one in the same write; a waiter on this instance is told in-process, also when that
//! write's answer was lost and a later round finds it landed: the waiter's watch may be on
//! the session the write was lost on, which may not come back. A release that ends before
//! it knows (its caller left mid-write, an error, or no rounds left) leaves that to the
//! reconciler (`reconcile`).
//!
//! Keeps (DESIGN.md, "Invariants") I4 (`let_go`: refusals on the latest copy), I6
//! (`force_release` is audited), I10 (`let_go` settles a lost answer), I11 (`let_go` removes
//! a spent entry instead of handing it the lock; riders are told through
//! `group_commit::tell_riders`) and I12 (a free record for the collector).

use tokio::time::Instant;

use super::events::{affected_by, EventKind};
use super::group_commit::Rider;
use super::outcome::Settled;
use super::reconcile::{tell_handed, UnsettledHandOff};
use super::{
    refused, snapshot, LockService, LockSnapshot, Read, Refusal, ServiceError, MAX_ROUNDS,
};
use crate::audit::{Actor, AuditRecord};
use crate::engine::{self, Basis, ReleaseDecision, Trust};
use crate::metrics::labels::LabelValue;
use crate::metrics::{ForceOutcome, HoldEnd};
use crate::model::{FencingToken, LeaseId, LockName, UnixMillis};
use crate::record::{Forced, Holder, LockRecord};
use crate::store::{Joined, RecordWrite, Version};
use crate::waiter::{Ticket, Waiter};

/// Where the write that ended a hold left the record. (A local value of one call: the size
/// of its variants does not matter.)
#[allow(clippy::large_enum_variant)]
enum Landed {
    /// At this version, as this record.
    At(LockRecord, Version),
    /// Gone: a release whose answer was lost, found freed and already collected.
    Collected,
}

pub(super) fn too_busy() -> ServiceError {
    ServiceError::StoreUnavailable("the lock changed too often to decide".into())
}

impl LockService {
    pub async fn release(
        &self,
        name: &LockName,
        lease_id: &LeaseId,
    ) -> Result<LockSnapshot, ServiceError> {
        let decide = |record: &LockRecord, queue: &[Waiter], now| {
            engine::decide_release(record, queue, lease_id, now)
        };
        self.let_go(name, decide, None)
            .await
            .map(|(after, _)| after)
    }

    /// An admin's force release; the holder is told `lock.revoked`. Every call, whatever
    /// its outcome, is on the audit trail. Returns the lock as the call left it, and whether
    /// it was free already (nobody held it, so nothing was released).
    /// `token` picks one of a semaphore's permits (`None`: its first, or a lock's holder).
    pub async fn force_release(
        &self,
        name: &LockName,
        actor: &Actor,
        token: Option<FencingToken>,
    ) -> Result<(LockSnapshot, bool), ServiceError> {
        let received = Instant::now();
        let decide = |record: &LockRecord, queue: &[Waiter], _| {
            engine::decide_force_release(record, queue, token)
        };
        let result = self.let_go(name, decide, Some(Forced::Admin)).await;
        let removed = result
            .as_ref()
            .ok()
            .and_then(|(_, removed)| removed.as_ref());
        let outcome = match (&result, removed) {
            (Err(_), _) => ForceOutcome::Failed,
            (Ok(_), Some(_)) => ForceOutcome::Released,
            (Ok(_), None) => ForceOutcome::AlreadyFree,
        };
        self.metrics.force_releases.at(outcome).inc();
        // The trail's words for these outcomes are the metric's label values.
        let outcome = outcome.label();
        self.audit.record(&AuditRecord {
            action: "force_release",
            lock: name.as_str(),
            resource: self.resource,
            actor,
            owner: None,
            priority: None,
            affected: removed.map(|(_, holder)| affected_by(holder)),
            reason: None,
            outcome,
        });
        let (after, removed) = result?;
        let already_free = removed.is_none();
        if let Some((record, holder)) = removed {
            self.emit(EventKind::Revoked, name, Some(&holder), &record, received);
        }
        Ok((after, already_free))
    }

    /// Ends a lease as `decide` says: frees the record (a semaphore's permit), or hands the
    /// lock (the permit) to the next waiter in the same write. Returns the new state, and the
    /// record it replaced with the holder whose hold it ended.
    async fn let_go(
        &self,
        name: &LockName,
        decide: impl Fn(&LockRecord, &[Waiter], UnixMillis) -> ReleaseDecision,
        forced: Option<Forced>,
    ) -> Result<(LockSnapshot, Option<(LockRecord, Holder)>), ServiceError> {
        let began = Instant::now();
        let mut basis = Basis::Cached;
        // The record whose hold a round's write set out to end, when that write's lost answer
        // was read back as not landed. That read may have gone out on another session than the
        // write (a stand-in, a new session), which is not ordered after it, so the write may
        // land after all.
        let mut ending: Option<(LockRecord, Holder)> = None;
        // The waiters this call's hand-offs went to (one may land late, see `ending`), and,
        // armed while a hand-off's outcome is unknown, what tells a waiter here if the call
        // ends before it knows (see `reconcile`).
        let mut unsettled = UnsettledHandOff::new(self, name);
        for _ in 0..MAX_ROUNDS {
            let _turn = match &self.turns {
                Some(turns) if self.resource == crate::resource::Resource::Semaphore => {
                    Some(turns.take(name).await)
                }
                _ => None,
            };
            let deadline = self.round_deadline(began);
            let now = self.wall.now();
            // Once a write's lost answer was read back as not landed, every round reads after
            // a sync: the next read may go out on another session than that one, and only a
            // read after a sync can show the hold gone (see `reading`).
            let this_round = match ending {
                Some(_) => Basis::Latest,
                None => std::mem::replace(&mut basis, Basis::Read),
            };
            let Read {
                stored,
                record,
                queue,
                basis: on,
            } = self.read_cached(name, deadline, now, this_round).await?;
            // Once such a read shows that hold gone, it has ended as the call asked, whoever
            // ended it (`engine::hold_over`).
            if let Some(ended) = ending
                .as_ref()
                .filter(|(_, holder)| engine::hold_over(holder, &record, on))
            {
                tell_handed(&self.local, name, &record, &queue, &unsettled.tried);
                unsettled.armed = false;
                return Ok((
                    snapshot(name, &record, &queue, self.clock(now)),
                    Some(ended.clone()),
                ));
            }
            let decision = decide(&record, &queue, now);
            if let Trust::ReadAgain(again) = decision.trust(on) {
                basis = again;
                continue;
            }
            let stored = match (&decision, stored) {
                (ReleaseDecision::NotOwner, _) => {
                    return Err(refused(
                        Refusal::NotOwner,
                        name,
                        &record,
                        &queue,
                        self.clock(now),
                    ))
                }
                (ReleaseDecision::AlreadyFree, _) | (_, None) => {
                    return Ok((snapshot(name, &record, &queue, self.clock(now)), None))
                }
                (_, Some(stored)) => stored,
            };
            // What this round writes: the record handed to the next waiter, or a free record.
            let ended = match &decision {
                ReleaseDecision::HandOff { ending, .. } | ReleaseDecision::Delete { ending } => {
                    (**ending).clone()
                }
                _ => continue,
            };
            let (mut expected, to, to_here) = match &decision {
                ReleaseDecision::HandOff { to, .. } => {
                    unsettled.tried(to);
                    let here = self.local.ticket(name, &to.id);
                    let to_here = here.is_some();
                    let ticket = match here {
                        Some(ticket) => ticket,
                        None => match self.store.ticket(name, to, deadline).await? {
                            Some(ticket) => ticket,
                            None => continue,
                        },
                    };
                    if engine::spent_entry(&record, &ticket) {
                        // A late join of a request granted already: removed, not handed the
                        // lock. The next round decides on a copy that shows it gone.
                        self.store.leave(name, to, deadline).await?;
                        self.cache.forget(name);
                        basis = Basis::Latest;
                        continue;
                    }
                    let queued = engine::queued_after(
                        &record,
                        &queue,
                        Some(&to.id),
                        on != Basis::Remembered,
                    );
                    let clock = self.clock(now);
                    match engine::hand_over(&record, &queue, &ticket, &to.id, &ended, clock, queued)
                    {
                        Some(handed) => (handed, Some(to), to_here),
                        None => (engine::kept_waiting(&record, &ended), None, false),
                    }
                }
                // Free the record rather than delete it; the collector deletes it later.
                _ => (engine::released(&record, &ended), None, false),
            };
            expected.forced = forced;
            // Callers joining the queue here ride on a hand-off (see `group_commit`), when
            // they queue behind its new holder. The others (all of them, when the release
            // frees the lock) join on their own at once, as they would have without it.
            let next_in_line =
                to.map(|to| queue.iter().find(|w| w.id != to.id).map(|w| w.priority));
            let (riders, alone): (Vec<Rider>, Vec<Rider>) = self
                .joins
                .board(name, next_in_line)
                .into_iter()
                .partition(|r| {
                    engine::may_ride_behind(r.ticket.priority, to.map(|to| to.priority))
                });
            self.tell_riders(name, alone, Joined::NotCarried);
            let joining: Vec<Ticket> = riders.iter().map(|r| r.ticket.clone()).collect();
            expected.queued =
                engine::queued_with(expected.queued, joining.iter().map(|t| t.priority));
            let pending = to.map(|to| self.local.pending(name, &to.id));
            let outcome = match to {
                Some(to) => {
                    // Whether the waiter is here is asked again when the guard goes: one
                    // whose join is still being answered may register meanwhile.
                    unsettled.armed = true;
                    let started = Instant::now();
                    let handed = self
                        .store
                        .hand_off(
                            name,
                            &expected,
                            Some(stored.version),
                            to,
                            &joining,
                            deadline,
                        )
                        .await;
                    self.metrics
                        .handoff_writes
                        .observe(started.elapsed().as_secs_f64());
                    let carried = handed
                        .as_ref()
                        .map_or(Joined::Unknown, |h| h.joined.clone());
                    self.tell_riders(name, riders, carried);
                    handed.map(|h| h.outcome)
                }
                None => {
                    self.store
                        .write(
                            name,
                            RecordWrite::Update(&expected, stored.version),
                            deadline,
                        )
                        .await
                }
            };
            let landed = match self
                .settle(name, Some(&record), expected, outcome, deadline)
                .await?
            {
                Settled::Landed(landed, version) => Some(Landed::At(*landed, version)),
                // Gone: freed and already collected, so the release landed.
                Settled::Collected => Some(Landed::Collected),
                Settled::NotLanded => {
                    ending = Some((record.clone(), ended.clone()));
                    None
                }
                // Refused by its condition: it never lands. One before it still may.
                Settled::Conflict | Settled::NestedLocks => {
                    unsettled.armed = ending.is_some();
                    None
                }
            };
            let Some(landed) = landed else {
                // Decide again on a fresh read.
                self.cache.forget(name);
                continue;
            };
            // This write landed on the version an earlier unsettled one of this call was
            // planned on, or a later one: that one never will.
            unsettled.armed = false;
            let end = match (forced, to) {
                (Some(_), _) => HoldEnd::Forced,
                (None, Some(_)) => HoldEnd::HandedOff,
                (None, None) => HoldEnd::Released,
            };
            self.metrics.hold_ended(end, &ended, self.wall.now());
            match (to, landed) {
                (Some(to), Landed::At(landed, version)) => {
                    self.metrics.handoffs.inc();
                    // Not the riders: what is remembered must stay a prefix of the queue, and a
                    // caller of another instance may have joined between it and them.
                    let rest: Vec<Waiter> =
                        queue.iter().filter(|w| w.id != to.id).cloned().collect();
                    let after = snapshot(name, &landed, &rest, self.clock(now));
                    // Remembered before the new holder is told: the waiter behind it goes on
                    // when the new holder's call ends, and decides on what is remembered.
                    self.cache
                        .remember_with_rest(name, &landed, version, rest.clone(), to_here);
                    self.local.handed(name, &to.id, &landed, &rest);
                    drop(pending);
                    return Ok((after, Some((record, ended))));
                }
                (None, Landed::At(landed, version)) => {
                    self.cache.remember(name, &landed, version);
                    self.collector.schedule(name);
                    return Ok((
                        snapshot(name, &landed, &[], self.clock(now)),
                        Some((record, ended)),
                    ));
                }
                // Found already gone (collected) after a lost answer: nothing to remember.
                (_, Landed::Collected) => {
                    self.cache.forget(name);
                    let free = LockRecord::default();
                    return Ok((
                        snapshot(name, &free, &[], self.clock(now)),
                        Some((record, ended)),
                    ));
                }
            }
        }
        Err(too_busy())
    }
}
