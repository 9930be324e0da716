//! Acquire calls that wait: in a lock's queue for their turn, or as the requestor that asks
//! the holder to clean up. Each call runs on a task of its own and is re-decided after every
//! wake-up; a caller who disconnects takes its queue entry and requestor slot with it, and a
//! lock handed to it in the meantime goes on to the next waiter. What one round decides and
//! does is in `round`.
//!
//! Keeps I9: a call with a `request_id` queues under a key derived from it (`waiter_key`), so
//! that its retry finds its entry; see DESIGN.md, "Invariants".

use std::future::Future;
use std::pin::Pin;
use tokio::time::Instant;

use sha2::{Digest, Sha256};

use super::local::{Notice, Uncounted};
use super::{AcquireOutcome, LockService, ServiceError, WaitBasis};
use crate::engine::{AcquireRequest, Basis};
use crate::metrics::{WaitLimit, Wakeup};
use crate::model::{LockName, UnixMillis};
use crate::store::EntrySession;
use crate::waiter::{Ticket, Waiter};

/// Resolves when nobody awaits the call's outcome any more.
pub(super) type Cancelled = Pin<Box<dyn Future<Output = ()> + Send>>;

pub(super) enum Step {
    Again,
    Done(Box<AcquireOutcome>),
}

pub(super) struct WaitState<'a> {
    /// When the service received the call.
    pub(super) received: Instant,
    pub(super) was_requestor: bool,
    pub(super) trouble_since: Option<Instant>,
    /// The waiter just ahead left the queue: most often because this instance handed it the
    /// lock, and then this instance knows the record and the queue behind it.
    pub(super) predecessor_left: bool,
    /// The queue has been read since joining, and had room for this waiter.
    pub(super) admitted: bool,
    /// Joined in the transaction of a hand-off here, and its first round has not run yet
    /// (see `rider_turn`).
    pub(super) carried: bool,
    /// Not yet counted against the lock's cap: its first round was decided on what this
    /// instance knows. Dropped once a read of the queue has counted it.
    pub(super) uncounted: Option<Uncounted<'a>>,
    /// The store session this call's queue entry was made on, when it is known to be one
    /// session from before the join to after it (see `store::EntryLife`), and
    /// the entry is this call's alone: its key is random, since the call has no `request_id`.
    /// (Calls sharing a `request_id` share a key, and one may remove an entry another made or
    /// adopted: see `round` and `leaving`.)
    pub(super) entry_session: Option<EntrySession>,
    /// What releases on this instance tell this waiter, for the round's own use (see
    /// `joining::await_release_here`): the round owns the state, while `wait_turn` polls
    /// its own receiver of the same channel.
    pub(super) handed: tokio::sync::watch::Receiver<Notice>,
    /// The last round waited out the head's grace with no word from a release here.
    pub(super) grace_ran_out: bool,
    /// What the next round reads on when it does not decide on what is remembered:
    /// `Latest` after a round whose decision needed the latest copy (its `trust`), else
    /// `Read`.
    pub(super) basis: Basis,
}

/// The queue key of a call: derived from its request id, so a retry finds its entry, or
/// else from the fresh lease it would be granted, which is its alone.
fn waiter_key(
    name: &LockName,
    request: &AcquireRequest,
    new_lease: crate::model::LeaseId,
) -> String {
    let digest = match &request.request_id {
        Some(id) => Sha256::digest(format!(
            "{name}\0{}\0{}",
            request.owner.as_str(),
            id.as_str()
        )),
        None => Sha256::digest(format!("lease\0{new_lease}")),
    };
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
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
        let received_at = UnixMillis(self.wall.now().0 - received.elapsed().as_millis() as i64);
        // Counted from now, so that no acquire here takes the lock past this call on what the
        // record may not say yet.
        let _joining = self.local.joining(name);
        let ticket = request.ticket(waiter_key(name, request, new_lease), new_lease, received_at);
        // Only an entry whose key is this call's alone (no `request_id`) can be judged.
        let own_key = request.request_id.is_none();
        let session_before = own_key.then(|| self.store.entry_life().session).flatten();
        let (me, carried) = match self.join(name, &ticket, basis).await {
            Ok(joined) => joined,
            Err(error) => {
                self.reconciler.sweep(name, None, &ticket);
                return Err(error);
            }
        };
        let entry_session = session_before.filter(|&s| self.store.entry_life().session == Some(s));
        let (mut handed, _registered) = self.local.register(name, &me, &ticket);
        let state = WaitState {
            received,
            was_requestor: false,
            trouble_since: None,
            predecessor_left: false,
            admitted: false,
            carried,
            uncounted: None,
            entry_session,
            handed: handed.clone(),
            grace_ran_out: false,
            basis: Basis::Read,
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
                    Notice::Handed(handed) => {
                        self.metrics.wakeups.at(Wakeup::Handed).inc();
                        let (record, rest) = &*handed;
                        return Ok(self.granted(name, ticket, record, rest, self.wall.now()));
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
}
