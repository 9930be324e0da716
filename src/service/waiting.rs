//! Acquire calls that wait: in a lock's queue for their turn, or as the requestor that asks
//! the holder to clean up. Each call runs on a task of its own and is re-decided after every
//! wake-up; a caller who disconnects takes its queue entry and requestor slot with it, and a
//! lock handed to it in the meantime goes on to the next waiter.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::events::{AcquireAudit, EventKind};
use super::local::{Notice, Uncounted};
use super::{
    refused, snapshot, token_of, AcquireOutcome, Granted, LockService, Put, Read, Refusal,
    ServiceError, WaitBasis,
};
use crate::engine::{self, AcquireRequest, WaitDecision, WaitFailure, Watch};
use crate::metrics::{WaitLimit, Wakeup};
use crate::model::{LockName, Priority, UnixMillis};
use crate::record::LockRecord;
use crate::store::{Version, Wake, WriteOutcome};
use crate::waiter::{Ticket, Waiter};

/// Resolves when nobody awaits the call's outcome any more.
pub(super) type Cancelled = Pin<Box<dyn Future<Output = ()> + Send>>;

pub(super) enum Step {
    Again,
    Done(Box<AcquireOutcome>),
}

struct WaitState<'a> {
    /// When the service received the call.
    received: Instant,
    was_requestor: bool,
    trouble_since: Option<Instant>,
    /// The waiter just ahead left the queue: most often because this instance handed it the
    /// lock, and then this instance knows the record and the queue behind it.
    predecessor_left: bool,
    /// The queue has been read since joining, and had room for this waiter.
    admitted: bool,
    /// Joined in the transaction of a hand-off here, and its first round has not run yet
    /// (see `rider_turn`).
    carried: bool,
    /// Not yet counted against the lock's cap: its first round was decided on what this
    /// instance knows. Dropped once a read of the queue has counted it.
    uncounted: Option<Uncounted<'a>>,
}

/// The queue key of a call: derived from its request id, so a retry finds its entry.
fn waiter_key(name: &LockName, request: &AcquireRequest) -> String {
    match &request.request_id {
        Some(id) => {
            let digest = Sha256::digest(format!(
                "{name}\0{}\0{}",
                request.owner.as_str(),
                id.as_str()
            ));
            digest[..16].iter().map(|b| format!("{b:02x}")).collect()
        }
        None => uuid::Uuid::new_v4().simple().to_string(),
    }
}

/// The instant at which the wall-clock time `until` comes (a millisecond late, so that the
/// decision made then sees it as passed).
fn instant_at(until: Option<UnixMillis>, now: UnixMillis) -> Instant {
    let ms = until.map_or(30_000, |u| u64::try_from(u.0 - now.0).unwrap_or(0) + 1);
    Instant::now() + Duration::from_millis(ms)
}

impl LockService {
    pub(super) async fn wait_in_queue(
        &self,
        name: &LockName,
        request: &AcquireRequest,
        new_lease: crate::model::LeaseId,
        received: Instant,
        basis: WaitBasis,
        mut cancelled: Cancelled,
    ) -> AcquireOutcome {
        let Ok(_waiting) = self.waiting_calls.clone().try_acquire_owned() else {
            self.metrics.waits_refused.at(WaitLimit::PerInstance).inc();
            return Err(ServiceError::TooManyWaiting);
        };
        self.metrics.waits_started.inc();
        let received_at = UnixMillis(UnixMillis::now().0 - received.elapsed().as_millis() as i64);
        // Counted from now, so that no acquire here takes the lock past this call on what the
        // record may not say yet.
        let _joining = self.local.joining(name);
        let ticket = request.ticket(waiter_key(name, request), new_lease, received_at);
        let (me, carried) = match self.join(name, &ticket, basis).await {
            Ok(joined) => joined,
            Err(error) => {
                self.sweep_later(name, None, &ticket);
                return Err(error);
            }
        };
        let (mut handed, _registered) = self.local.register(name, &me, &ticket);
        let state = WaitState {
            received,
            was_requestor: false,
            trouble_since: None,
            predecessor_left: false,
            admitted: false,
            carried,
            uncounted: None,
        };
        let outcome = self
            .wait_turn(name, &me, &ticket, state, &mut cancelled, &mut handed)
            .await;
        outcome
    }

    async fn wait_turn<'a>(
        &'a self,
        name: &'a LockName,
        me: &Waiter,
        ticket: &Ticket,
        state: WaitState<'a>,
        cancelled: &mut Cancelled,
        handed: &mut tokio::sync::watch::Receiver<Notice>,
    ) -> AcquireOutcome {
        let received = state.received;
        // The round in progress is kept across notices rather than dropped, so that a read
        // or watch already sent is not cut off (dropping a watch costs ZooKeeper a request).
        // It owns the state while it runs.
        type Round<'r, 'a> = Pin<Box<dyn Future<Output = (Step, WaitState<'a>)> + Send + 'r>>;
        let mut round: Option<Round<'_, 'a>> = None;
        let mut idle = Some(state);
        loop {
            // While a release here is handing this waiter the lock, only its word counts:
            // no new round starts until it says whether its write landed.
            let pending = matches!(*handed.borrow(), Notice::Pending);
            if round.is_none() && !pending {
                if let Some(mut state) = idle.take() {
                    round = Some(Box::pin(async move {
                        let step = self.wait_step(name, me, ticket, &mut state).await;
                        (step, state)
                    }));
                }
            }
            let step = tokio::select! {
                biased;
                _ = &mut *cancelled => {
                    drop(round);
                    self.withdraw(name, me, ticket, received).await;
                    return Err(ServiceError::StoreUnavailable("the caller left".into()));
                }
                // A release on this instance handed the lock over and says so directly.
                Ok(()) = handed.changed() => match handed.borrow_and_update().clone() {
                    Notice::Handed(record) => {
                        self.metrics.wakeups.at(Wakeup::Handed).inc();
                        return Ok(self.granted(name, ticket, &record, &[], UnixMillis::now()));
                    }
                    Notice::Pending | Notice::Idle => continue,
                },
                (step, state) = async { round.as_mut().expect("a round in progress").await },
                    if round.is_some() => {
                    round = None;
                    idle = Some(state);
                    step
                }
            };
            if let Step::Done(outcome) = step {
                return *outcome;
            }
        }
    }

    async fn wait_step<'a>(
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
                if since.elapsed() >= self.store_timeout {
                    self.sweep_later(name, Some(me), ticket);
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
        let now = UnixMillis::now();
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
        let Read {
            stored,
            record,
            queue,
            queue_remembered,
            ..
        } = match remembered {
            Some(read) => read,
            None => self.read(name, deadline, now, true).await?,
        };
        for orphan in queue.iter().filter(|w| w.key == me.key && w.id != me.id) {
            // A node of this call whose create answer was lost, then retried.
            self.store.leave(name, orphan, deadline).await?;
        }
        if record.requestor.as_ref().and_then(|r| r.waiter.as_deref()) == Some(me.id.as_str()) {
            state.was_requestor = true;
        }
        let version = stored.as_ref().map(|s| s.version);
        let overriding = ticket.priority == Priority::OVERRIDE.get();
        if !state.admitted && !queue_remembered {
            // Room is judged by arrival: a waiter is turned away when the cap's worth of
            // callers joined before it (later joiners have higher sequence numbers, so they
            // never count). The queue thus holds at most the cap, plus callers that are
            // about to leave, plus callers not counted yet because a hand-off carried them
            // in and their first round read nothing (at most `MAX_RIDERS` per lock and
            // instance, see `rider_turn`), and its listing stays far below ZooKeeper's
            // packet limit. An SRE override is never turned away.
            let earlier = queue.iter().filter(|w| w.seq < me.seq).count();
            if earlier >= self.max_waiters_per_lock && !overriding {
                self.metrics.waits_refused.at(WaitLimit::PerLock).inc();
                return self
                    .leave_or_take(name, me, ticket, Refusal::TooManyWaiters)
                    .await;
            }
            state.admitted = true;
            state.uncounted = None;
        }
        let done = |refusal| {
            Ok(Step::Done(Box::new(Err(refused(
                refusal, name, &record, &queue, now,
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
        if queue_remembered && !matches!(decision, WaitDecision::Wait { .. }) {
            // What is remembered only serves to wait: anything else is decided on a read.
            return Ok(Step::Again);
        }
        match decision {
            WaitDecision::Granted => {
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
                Ok(WriteOutcome::Written {
                    zxid,
                    version,
                    session,
                }) => {
                    let version = Version::written(version, session);
                    self.metrics.handoffs.inc();
                    // Taken from a live holder (revoked), or from one whose lease ran out.
                    match (&revoked, &record.holder) {
                        (Some(live), _) => self.metrics.taken_from(live, true, now),
                        (None, Some(expired)) => self.metrics.taken_from(expired, false, now),
                        (None, None) => {}
                    }
                    let mut landed = *next;
                    landed.resolve_token(zxid);
                    let rest: Vec<Waiter> =
                        queue.iter().filter(|w| w.id != me.id).cloned().collect();
                    self.cache
                        .remember_with_rest(name, &landed, version, rest.clone());
                    if let Some(old) = revoked {
                        // Taking the lock from a live holder is always on the trail, with or
                        // without the override.
                        ticket_audit(name, ticket).record(&self.audit, Some(&old), "took_over");
                        self.emit(
                            EventKind::Revoked,
                            name,
                            &LockRecord::held_by(*old),
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
                    if overriding {
                        ticket_audit(name, ticket).record(
                            &self.audit,
                            written.holder.as_ref(),
                            "cleanup_requested",
                        );
                    }
                    if first {
                        self.emit(EventKind::CleanupRequested, name, &written, received);
                    }
                }
                Ok(Step::Again)
            }
            WaitDecision::GiveUpCleanup { record: next } => {
                if let Put::Landed(..) = self.put(name, stored.as_ref(), *next, deadline).await? {
                    self.emit(EventKind::CleanupCancelled, name, &record, received);
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
                };
                self.leave_or_take(name, me, ticket, refusal).await
            }
            WaitDecision::Announce { record: next } => {
                self.put(name, stored.as_ref(), *next, deadline).await?;
                Ok(Step::Again)
            }
            WaitDecision::Vanished => Err(ServiceError::StoreUnavailable(
                "the queue entry vanished with its store session".into(),
            )),
            WaitDecision::Wait { until, watch } => {
                let until = instant_at(until, now);
                let wake = match self.behind_waiter_here(name, &watch, until).await {
                    Some(wake) => wake,
                    None => self.store.wait_change(name, &watch, version, until).await?,
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
        let lock = snapshot(name, record, queue, now);
        Granted {
            lease_id: ticket.lease_id,
            fencing_token: token_of(record),
            lock,
            fresh: true,
        }
    }
}

fn ticket_audit<'a>(name: &'a LockName, ticket: &'a Ticket) -> AcquireAudit<'a> {
    AcquireAudit {
        lock: name,
        actor: &ticket.actor,
        owner: &ticket.owner,
        priority: ticket.priority,
        message: &ticket.message,
    }
}
