//! One round of a waiting call: what it decides on (a read, or what this instance knows:
//! see `joining`), the engine's decision, and what the call does about it: take the lock,
//! register as the requestor, give up, or wait for the next change.
//!
//! Keeps (DESIGN.md, "Invariants") I4 (`too_many_waiters` and `superseded` on the latest copy), I5
//! (the holder asked to clean up, told when revoked), I8 (`engine::gives_up_in_trouble`), I10 (a lost
//! answer read again, a late grant recognised), I11 (no entry of the call left queued;
//! `leave_or_take`) and I15 (the per-lock cap).

use std::time::Duration;
use tokio::time::Instant;

use super::events::{AcquireAudit, EventKind};
use super::joining::Grace;
use super::waiting::{Step, WaitState};
use super::{refused, snapshot, token_of, Granted, LockService, Put, Read, Refusal, ServiceError};
use crate::engine::{self, Admission, Basis, Trust, Vanished, WaitDecision, WaitFailure};
use crate::metrics::{HeadGrace, WaitLimit, Wakeup};
use crate::model::{LockName, Priority, UnixMillis};
use crate::record::LockRecord;
use crate::store::{Wake, WriteOutcome};
use crate::waiter::Watch;
use crate::waiter::{Ticket, Waiter};

/// The instant at which the wall-clock time `until` comes (a millisecond late, so that the
/// decision made then sees it as passed).
fn instant_at(until: Option<UnixMillis>, now: UnixMillis) -> Instant {
    let ms = until.map_or(30_000, |u| u64::try_from(u.0 - now.0).unwrap_or(0) + 1);
    Instant::now() + Duration::from_millis(ms)
}

impl LockService {
    pub(super) async fn wait_step<'a>(
        &'a self,
        name: &'a LockName,
        me: &Waiter,
        ticket: &Ticket,
        state: &mut WaitState<'a>,
    ) -> Step {
        match self.try_wait_step(name, me, ticket, state).await {
            Ok(step) => {
                state.trouble_since = None;
                step
            }
            Err(error) => {
                let since = *state.trouble_since.get_or_insert_with(Instant::now);
                let waited_out = ticket
                    .wait_until()
                    .is_some_and(|until| self.wall.now() >= until);
                if engine::gives_up_in_trouble(
                    since.elapsed(),
                    self.store_timeout,
                    self.store.entry_life().outlives_outage,
                    waited_out,
                ) {
                    self.reconciler.sweep(name, Some(me), ticket);
                    return Step::Done(Box::new(Err(error)));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                Step::Again
            }
        }
    }

    async fn try_wait_step<'a>(
        &'a self,
        name: &'a LockName,
        me: &Waiter,
        ticket: &Ticket,
        state: &mut WaitState<'a>,
    ) -> Result<Step, ServiceError> {
        let received = state.received;
        let deadline = self.deadline();
        let now = self.wall.now();
        let after_grace = std::mem::take(&mut state.grace_ran_out);
        let remembered = if std::mem::take(&mut state.carried) {
            self.rider_turn(name, me).map(|(read, uncounted)| {
                state.uncounted = Some(uncounted);
                read
            })
        } else {
            std::mem::take(&mut state.predecessor_left)
                .then(|| self.remembered_turn(name, me, state.was_requestor))
                .flatten()
        };
        // A refusal is decided on the latest copy (see `reading`): a lagging one may still
        // list waiters that have left, or not yet show this caller as the requestor.
        let asked = std::mem::replace(&mut state.basis, Basis::Read);
        let Read {
            stored,
            record,
            queue,
            basis: on,
        } = match remembered {
            Some(read) => read,
            None if asked == Basis::Latest => self.read_latest(name, deadline).await?,
            None => self.read(name, deadline, now, true).await?,
        };
        for orphan in engine::orphans(&queue, me) {
            self.store.leave(name, orphan, deadline).await?;
        }
        if engine::names_requestor(&record, &me.id) {
            state.was_requestor = true;
        }
        let version = stored.as_ref().map(|s| s.version);
        if !state.admitted {
            // Callers a hand-off carried in whose first round read nothing are not counted
            // yet: at most `MAX_RIDERS` per lock and instance (see `rider_turn`).
            let cap = self.max_waiters_per_lock;
            match engine::admission(&queue, me, ticket.priority, cap, on) {
                Admission::Unjudged => {}
                Admission::Admitted => {
                    state.admitted = true;
                    state.uncounted = None;
                }
                Admission::ReadAgain(again) => {
                    state.basis = again;
                    return Ok(Step::Again);
                }
                Admission::TooMany => {
                    self.metrics.waits_refused.at(WaitLimit::PerLock).inc();
                    return self
                        .leave_or_take(name, me, ticket, Refusal::TooManyWaiters)
                        .await;
                }
            }
        }
        let done = |refusal| {
            Ok(Step::Done(Box::new(Err(refused(
                refusal,
                name,
                &record,
                &queue,
                self.clock(now),
            )))))
        };
        let decision = engine::decide_waiting(
            &record,
            &queue,
            ticket,
            &me.id,
            state.was_requestor,
            self.clock(now),
        );
        if let Trust::ReadAgain(again) = decision.trust(on) {
            state.basis = again;
            return Ok(Step::Again);
        }
        match decision {
            WaitDecision::Granted => {
                if after_grace {
                    // Handed the lock while it waited for a release here (a local hand-off
                    // would have said so in process): the holder released elsewhere.
                    self.metrics.head_graces.at(HeadGrace::Missed).inc();
                    self.cache.grace_missed(name);
                }
                // Granted through another entry of this call (a lost answer made two): this
                // one must not stay queued, or the lock would later be handed to it.
                if queue.iter().any(|w| w.id == me.id) {
                    self.store.leave(name, me, deadline).await?;
                }
                Ok(Step::Done(Box::new(Ok(
                    self.granted(name, ticket, &record, &queue, now)
                ))))
            }
            WaitDecision::Take {
                record: next,
                revoked,
            } => match self
                .store
                .hand_off(name, &next, version, me, &[], deadline)
                .await
                .map(|handed| handed.outcome)
            {
                Ok(WriteOutcome::Written { zxid, version }) => {
                    self.metrics.handoffs.inc();
                    // Taken from a live holder (revoked), or from one whose lease ran out.
                    match (&revoked, engine::ended_by(&record, &next)) {
                        (Some(live), _) => self.metrics.taken_from(live, true, now),
                        (None, Some(expired)) => self.metrics.taken_from(expired, false, now),
                        (None, None) => {}
                    }
                    let mut landed = *next;
                    landed.resolve_token(zxid);
                    let rest: Vec<Waiter> =
                        queue.iter().filter(|w| w.id != me.id).cloned().collect();
                    self.cache
                        .remember_with_rest(name, &landed, version, rest.clone(), true);
                    if let Some(old) = revoked {
                        // Taking the lock from a live holder is always on the trail, with or
                        // without the override.
                        AcquireAudit::of_ticket(name, self.resource, ticket).record(
                            &self.audit,
                            Some(&old),
                            "took_over",
                        );
                        self.emit(
                            EventKind::Revoked,
                            name,
                            Some(&old),
                            &LockRecord::default(),
                            received,
                        );
                    }
                    Ok(Step::Done(Box::new(Ok(
                        self.granted(name, ticket, &landed, &rest, now)
                    ))))
                }
                Ok(WriteOutcome::NestedLocks) => {
                    self.store.leave(name, me, deadline).await?;
                    done(Refusal::NameConflict)
                }
                Ok(WriteOutcome::Conflict) | Err(crate::store::StoreError::OutcomeUnknown(_)) => {
                    Ok(Step::Again)
                }
                Err(error) => Err(error.into()),
            },
            WaitDecision::Register {
                record: next,
                first,
            } => {
                if let Put::Landed(written, _) =
                    self.put(name, stored.as_ref(), *next, deadline).await?
                {
                    if !state.was_requestor {
                        self.metrics.preemptions.inc();
                    }
                    state.was_requestor = true;
                    if ticket.priority == Priority::OVERRIDE.get() {
                        AcquireAudit::of_ticket(name, self.resource, ticket).record(
                            &self.audit,
                            engine::victim(&written),
                            "cleanup_requested",
                        );
                    }
                    if first {
                        let victim = engine::victim(&written);
                        self.emit(
                            EventKind::CleanupRequested,
                            name,
                            victim,
                            &written,
                            received,
                        );
                    }
                }
                Ok(Step::Again)
            }
            WaitDecision::GiveUpCleanup { record: next } => {
                if let Put::Landed(..) = self.put(name, stored.as_ref(), *next, deadline).await? {
                    let victim = engine::victim(&record);
                    self.emit(EventKind::CleanupCancelled, name, victim, &record, received);
                    return self
                        .leave_or_take(name, me, ticket, Refusal::CleanupTimeout)
                        .await;
                }
                Ok(Step::Again)
            }
            WaitDecision::Fail(failure) => {
                let refusal = match failure {
                    WaitFailure::WaitTimeout => Refusal::WaitTimeout,
                    WaitFailure::Superseded => Refusal::Superseded,
                    WaitFailure::LeaseEnded => Refusal::LeaseEnded,
                    WaitFailure::LimitMismatch => Refusal::LimitMismatch,
                };
                self.leave_or_take(name, me, ticket, refusal).await
            }
            WaitDecision::Announce { record: next } => {
                self.put(name, stored.as_ref(), *next, deadline).await?;
                Ok(Step::Again)
            }
            WaitDecision::Vanished => {
                let session = state.entry_session;
                let kept = session.is_some() && self.store.entry_life().session == session;
                match engine::vanished(kept) {
                    Vanished::WithSession => Err(ServiceError::StoreUnavailable(
                        "the queue entry vanished with its store session".into(),
                    )),
                    Vanished::GrantEnded => done(Refusal::LeaseEnded),
                }
            }
            WaitDecision::Wait { until, watch } => {
                let until = instant_at(until, now);
                let wake = match self.behind_waiter_here(name, &watch, until).await {
                    Some(wake) => wake,
                    None => match self
                        .await_release_here(name, &watch, version, &mut state.handed, until)
                        .await
                    {
                        Grace::Timer => Wake::Timer,
                        grace => {
                            if let Grace::RanOut = grace {
                                self.metrics.head_graces.at(HeadGrace::RanOut).inc();
                                state.grace_ran_out = true;
                            }
                            self.store.wait_change(name, &watch, version, until).await?
                        }
                    },
                };
                let cause = match wake {
                    Wake::Record => Wakeup::Record,
                    Wake::Predecessor => Wakeup::Predecessor,
                    Wake::Timer => Wakeup::Timer,
                };
                self.metrics.wakeups.at(cause).inc();
                if let (Wake::Predecessor, Watch::Predecessor(ahead)) = (wake, &watch) {
                    self.behind_local(name, ahead, until).await;
                    state.predecessor_left = true;
                }
                Ok(Step::Again)
            }
        }
    }

    pub(super) fn granted(
        &self,
        name: &LockName,
        ticket: &Ticket,
        record: &LockRecord,
        queue: &[Waiter],
        now: UnixMillis,
    ) -> Granted {
        let lock = snapshot(name, record, queue, self.clock(now));
        Granted {
            lease_id: ticket.lease_id,
            fencing_token: token_of(record, &ticket.lease_id),
            lock,
            fresh: true,
        }
    }
}
