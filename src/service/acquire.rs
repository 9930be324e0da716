//! The acquire call: joins a retry with the same request_id to its first call, runs the
//! immediate path inline (`immediate`), and runs a call that must wait (to queue, or to
//! preempt) on a task of its own (see `waiting`).
//!
//! Keeps (DESIGN.md, "Invariants") I4 (refusals on the latest copy), I6 (the override is audited),
//! I9 (a retry joins or gets its first call's outcome; `still_granted`), I10 (a lost answer
//! settled) and I11 (`UndoGrant`; a grant nobody receives is released).

use std::sync::Arc;
use tokio::time::Instant;

use tracing::{info, warn, Instrument};

use super::events::AcquireAudit;
use super::reconcile::UndoGrant;
use super::replies::{Flight, OutcomeReceiver};
use super::waiting::Cancelled;
use super::AcquireOutcome;
use super::{refused, snapshot, token_of, Granted, Immediate, LockService, Refusal, ServiceError};
use crate::engine::{self, AcquireRequest};
use crate::metrics::WaitOutcome;
use crate::model::{LeaseId, LockName, Priority};
use crate::store::Fresh;
use crate::store::Reads;

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
            AcquireAudit::of_request(&name, &request).record(&self.audit, None, "requested");
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

    /// A finished call's outcome for its retry: a grant only while its lease still holds the
    /// lock (read afresh, with `sync`), so a retry never reports a lease that has ended.
    pub(super) async fn still_granted(
        &self,
        name: &LockName,
        outcome: AcquireOutcome,
    ) -> AcquireOutcome {
        let Ok(granted) = outcome else {
            return outcome;
        };
        let deadline = self.deadline();
        let now = self.wall.now();
        let stored = self.store.read(name, Fresh::Latest, deadline).await?;
        let record = stored.map(|s| s.record).unwrap_or_default();
        let queue = self.store.queue(name, deadline).await?;
        let live =
            engine::live_holder(&record, now).is_some_and(|h| h.lease_id == Some(granted.lease_id));
        if !live {
            return Err(refused(
                Refusal::LeaseEnded,
                name,
                &record,
                &queue,
                self.clock(now),
            ));
        }
        Ok(Granted {
            fencing_token: token_of(&record),
            lock: snapshot(name, &record, &queue, self.clock(now)),
            fresh: false,
            ..granted
        })
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
