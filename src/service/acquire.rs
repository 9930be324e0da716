//! The acquire call, as one path: joins a retry with the same request_id to its first call
//! (`replies`), then runs rounds of (read or remembered record, the engine's decision, one
//! conditional write) that grant a free or expired lock at once, refuse on the latest copy,
//! or say that the call must wait (to queue, or to preempt). Most acquires find no record,
//! or the free record this instance left, and write at once (`cache`); what the first round
//! decides on is the engine's rule (`AcquireRequest::first_basis`). A call that must wait
//! runs on a task of its own (see `waiting`).
//!
//! Keeps (DESIGN.md, "Invariants") I4 (refusals on the latest copy), I6 (the override is
//! audited), I9 (a retry joins or gets its first call's outcome), I10 (a lost answer
//! settled, through `outcome`) and I11 (`UndoGrant`; a grant nobody receives is released).

use std::sync::Arc;
use tokio::time::Instant;

use tracing::{info, warn, Instrument};

use super::events::AcquireAudit;
use super::reconcile::UndoGrant;
use super::replies::{Flight, OutcomeReceiver};
use super::waiting::Cancelled;
use super::{
    refused, snapshot, token_of, AcquireOutcome, Granted, Immediate, LockService, Put, Read,
    Refusal, ServiceError, WaitBasis, MAX_ROUNDS,
};
use crate::engine::{self, AcquireDecision, AcquireRefusal, AcquireRequest, Basis, Trust};
use crate::metrics::WaitOutcome;
use crate::model::{LeaseId, LockName, Priority};
use crate::record::{Holder, LockRecord};
use crate::store::Version;

impl LockService {
    /// Acquires on a task of its own. If nobody is left to receive a fresh grant (the caller
    /// disconnected), the grant is released again, so no lock is left held by nobody.
    /// `new_lease` is the lease (its seal, see `crate::seal`) a fresh grant gets.
    pub async fn acquire(
        self: &Arc<Self>,
        name: LockName,
        request: AcquireRequest,
        new_lease: LeaseId,
    ) -> AcquireOutcome {
        let received = Instant::now();
        if request.priority == Priority::OVERRIDE {
            AcquireAudit::of_request(&name, self.resource, &request).record(
                &self.audit,
                None,
                "requested",
            );
        }
        // Whether this call has already been found to wait; then the task below goes straight
        // to the queue (it decides again there, after joining, on a fresh read).
        let mut must_wait = None;
        if request.request_id.is_none() {
            // The common case runs inline. If the caller goes away mid-call, the guard
            // releases whatever this call may have granted.
            let mut guard = UndoGrant {
                service: self.clone(),
                name: name.clone(),
                lease: new_lease,
                lease_ms: request.lease_ms,
                armed: true,
                sent_grant: false,
            };
            let immediate = self
                .acquire_now(&name, &request, new_lease, &mut guard.sent_grant)
                .await;
            // A call that failed on the store after sending a grant may have lost its answer:
            // the caller never learns its lease, so the guard stays armed and undoes it.
            guard.armed = guard.sent_grant
                && matches!(
                    immediate,
                    Immediate::Done(Err(ServiceError::StoreUnavailable(_)))
                );
            match immediate {
                Immediate::Done(outcome) => return outcome,
                Immediate::MustWait(basis) => must_wait = Some(basis),
            }
        }
        let (sender, receiver) = match &request.request_id {
            Some(id) => match self.replies.begin(&name, id, &request.request_digest)? {
                Flight::Finished(outcome) => return self.still_granted(&name, *outcome).await,
                Flight::Joined(receiver) => return outcome_of(receiver).await,
                Flight::Lead(sender, receiver) => (sender, receiver),
            },
            None => {
                let (sender, receiver) = tokio::sync::watch::channel(None);
                (Arc::new(sender), receiver)
            }
        };
        let service = self.clone();
        // The task keeps the request's span, so what it logs carries the request id.
        tokio::spawn(
            async move {
            let listeners = sender.clone();
            let cancelled: Cancelled = Box::pin(async move { listeners.closed().await });
            let immediate = match must_wait {
                Some(basis) => Immediate::MustWait(basis),
                None => {
                    service
                        .acquire_now(&name, &request, new_lease, &mut false)
                        .await
                }
            };
            let outcome = match immediate {
                Immediate::Done(outcome) => outcome,
                Immediate::MustWait(basis) => {
                    let outcome = service
                        .wait_in_queue(&name, &request, new_lease, received, basis, cancelled)
                        .await;
                    let waited = match &outcome {
                        Ok(_) => Some(WaitOutcome::Granted),
                        // Turned away before it joined: it did not wait.
                        Err(ServiceError::TooManyWaiting) => None,
                        Err(ServiceError::StoreUnavailable(_)) => Some(WaitOutcome::Failed),
                        Err(_) => Some(WaitOutcome::Refused),
                    };
                    if let Some(waited) = waited {
                        service.metrics.acquire_waited(waited, received.elapsed());
                    }
                    outcome
                }
            };
            // A call with a request_id is not undone: its retry must find the grant.
            let undo = request.request_id.is_none()
                && sender.receiver_count() == 0
                && matches!(&outcome, Ok(granted) if granted.fresh);
            if let Some(id) = &request.request_id {
                service.replies.finish(
                    &name,
                    id,
                    &request.request_digest,
                    (!undo).then_some(&outcome),
                );
            }
            if let (true, Ok(granted)) = (undo, &outcome) {
                info!(lock = %name, "caller went away before its grant was delivered; releasing it");
                if let Err(error) = service.release(&name, &granted.lease_id).await {
                    warn!(lock = %name, %error, "could not undo an undelivered grant; its lease will run out");
                }
            }
            sender.send_replace(Some(outcome));
        }
            .in_current_span(),
        );
        outcome_of(receiver).await
    }

    /// Acquires without waiting, or says that the call must wait in the queue.
    pub(super) async fn acquire_now(
        &self,
        name: &LockName,
        request: &AcquireRequest,
        new_lease: LeaseId,
        sent_grant: &mut bool,
    ) -> Immediate {
        match self
            .try_acquire_now(name, request, new_lease, sent_grant)
            .await
        {
            Ok(immediate) => immediate,
            Err(error) => Immediate::Done(Err(error)),
        }
    }

    async fn try_acquire_now(
        &self,
        name: &LockName,
        request: &AcquireRequest,
        new_lease: LeaseId,
        sent_grant: &mut bool,
    ) -> Result<Immediate, ServiceError> {
        let began = Instant::now();
        // What the last write that lost its race was planned on, for the log if all do.
        let mut lost_on = None;
        // The basis the next round decides on: the first as the engine says, then a read.
        let mut basis = request.first_basis(self.local.any(name), || {
            self.cache.last_written_held(name, self.wall.now())
        });
        for _ in 0..MAX_ROUNDS {
            // Each round (a read and a conditional write) has a store timeout of its own,
            // within a bound for the whole call (`round_deadline`).
            let deadline = self.round_deadline(began);
            let now = self.wall.now();
            let asked = std::mem::replace(&mut basis, Basis::Read);
            let Read {
                stored,
                record,
                queue,
                basis: on,
            } = match self.remembered_for(name, asked) {
                Some(read) => read,
                None if asked == Basis::Latest => self.read_latest(name, deadline).await?,
                None => self.read(name, deadline, now, false).await?,
            };
            let done = |outcome| Ok(Immediate::Done(outcome));
            let decision = match self.planted.over_grant && record.limit.is_some() {
                false => {
                    engine::decide_acquire(&record, &queue, request, self.clock(now), new_lease)
                }
                true => {
                    super::seams::over_grant(&record, &queue, request, self.clock(now), new_lease)
                }
            };
            if let Trust::ReadAgain(again) = decision.trust(on) {
                basis = again;
                continue;
            }
            let (next, lease_id, fresh) = match decision {
                AcquireDecision::AlreadyGranted { lease_id } => {
                    // A retry is told "granted" only on a read after a sync: a lagging
                    // follower may still show a lease that has ended.
                    let lock = snapshot(name, &record, &queue, self.clock(now));
                    let granted = Granted {
                        lease_id,
                        fencing_token: token_of(&record, &lease_id),
                        lock,
                        fresh: false,
                    };
                    return done(self.still_granted(name, Ok(granted)).await);
                }
                AcquireDecision::Refuse(AcquireRefusal::LockHeld) => {
                    let clock = self.clock(now);
                    let retry_at = engine::retry_at(&record, &queue, clock);
                    let refusal = Refusal::LockHeld { retry_at };
                    return done(Err(refused(refusal, name, &record, &queue, clock)));
                }
                AcquireDecision::Refuse(AcquireRefusal::RequestIdReused) => {
                    return done(Err(ServiceError::RequestIdReused))
                }
                AcquireDecision::Refuse(AcquireRefusal::LimitMismatch) => {
                    return done(Err(refused(
                        Refusal::LimitMismatch,
                        name,
                        &record,
                        &queue,
                        self.clock(now),
                    )))
                }
                AcquireDecision::Refuse(AcquireRefusal::LeaseEnded) => {
                    return done(Err(refused(
                        Refusal::LeaseEnded,
                        name,
                        &record,
                        &queue,
                        self.clock(now),
                    )))
                }
                AcquireDecision::Wait if on == Basis::Remembered => {
                    return Ok(Immediate::MustWait(WaitBasis::Remembered))
                }
                AcquireDecision::Wait => return Ok(Immediate::MustWait(WaitBasis::Read(stored))),
                AcquireDecision::OwnGrantLanded { lease_id } => {
                    // An earlier round's grant, whose lost answer was read back (perhaps on
                    // another session, not ordered after it) before it landed: the caller's.
                    let Some(found) = stored else { continue };
                    info!(lock = %name, "a grant read back as not landed had landed; answering it");
                    self.grant_landed(name, request, None, &found.record, found.version);
                    return done(Ok(Granted {
                        lease_id,
                        fencing_token: token_of(&found.record, &lease_id),
                        lock: snapshot(name, &found.record, &queue, self.clock(now)),
                        fresh: true,
                    }));
                }
                AcquireDecision::Grant { record, lease_id } => (record, lease_id, true),
                AcquireDecision::Reacquire { record, lease_id } => (record, lease_id, false),
            };
            *sent_grant |= fresh;
            match self.put(name, stored.as_ref(), next, deadline).await? {
                Put::Landed(written, version) => {
                    let ended = crate::engine::ended_by(&record, &written);
                    // What the grant replaced: a lapsed holder, or the caller's own hold.
                    let replaced =
                        ended.or_else(|| crate::engine::holder_with_lease(&record, &lease_id));
                    self.grant_landed(name, request, replaced, &written, version);
                    // A fresh grant over a holder means its lease had run out (a live one is
                    // never granted over without waiting): a lazy expiry.
                    if let (true, Some(expired)) = (fresh, ended) {
                        self.metrics.taken_from(expired, false, now);
                    }
                    let lock = snapshot(name, &written, &queue, self.clock(now));
                    return done(Ok(Granted {
                        lease_id,
                        fencing_token: token_of(&written, &lease_id),
                        lock,
                        fresh,
                    }));
                }
                Put::Raced => lost_on = Some(stored.map(|s| s.version)),
                Put::NestedLocks => {
                    return done(Err(refused(
                        Refusal::NameConflict,
                        name,
                        &record,
                        &queue,
                        self.clock(now),
                    )))
                }
            }
        }
        warn!(lock = %name, rounds = MAX_ROUNDS, ?lost_on, "no round's write landed (lost_on: what the last refused one was planned on)");
        Err(ServiceError::StoreUnavailable(
            "the lock changed too often to decide".into(),
        ))
    }

    /// What every grant that landed is recorded by: the override's audit line (`replaced`:
    /// the holder it took the lock from, when known), the grant count, and the record kept
    /// as this instance's last write.
    fn grant_landed(
        &self,
        name: &LockName,
        request: &AcquireRequest,
        replaced: Option<&Holder>,
        written: &LockRecord,
        version: Version,
    ) {
        if request.priority == Priority::OVERRIDE {
            AcquireAudit::of_request(name, self.resource, request).record(
                &self.audit,
                replaced,
                "granted",
            );
        }
        self.metrics.grants.inc();
        self.cache.remember_grant(name, written, version);
    }
}

async fn outcome_of(mut receiver: OutcomeReceiver) -> AcquireOutcome {
    match receiver.wait_for(Option::is_some).await {
        Ok(outcome) => outcome.clone().expect("waited for Some"),
        Err(_) => Err(ServiceError::StoreUnavailable(
            "the acquire task ended without an outcome".into(),
        )),
    }
}
