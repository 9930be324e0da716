//! How a waiting call ends when it does not get the lock the normal way: it gives up (but
//! takes a lock handed to it just before), its caller disconnects (it leaves the queue,
//! passes on a lock that reached it, and withdraws its requestor slot), or the store fails
//! (the reconciler's sweep removes what it may have left).
//!
//! **Why one look after leaving is enough for a waiting call.** Every write that hands the
//! lock to a waiter (its own takeover in `round`, or another caller's release) deletes that
//! waiter's queue entry in the same `multi`. So once the waiter's own delete of its entry has
//! been answered, either way, no such hand-off can land any more: it landed before the
//! delete, or it fails for want of the entry. A read made after a `sync` (which shows every
//! write the leader committed before it) then shows any hand-off that reached the waiter.
//! (The inline acquire has no entry to fence its grant with, so its guard looks again until
//! no write of its call can land: see `reconcile`.)
//!
//! Keeps I11 (a caller gone leaves no lock, entry or requestor slot; what the store kept is
//! left to the reconciler's sweep); see DESIGN.md, "Invariants".

use tokio::time::Instant;

use tracing::info;

use super::events::EventKind;
use super::waiting::Step;
use super::{refused, LockService, Read, Refusal, ServiceError};
use crate::engine::{self, AfterLeaving};
use crate::model::LockName;
use crate::store::Reads;
use crate::store::{Fresh, RecordWrite, WriteOutcome};
use crate::waiter::{Ticket, Waiter};

impl LockService {
    /// Leaves the queue to answer `refusal`; but if a hand-off reached this waiter first,
    /// the lock is its, and the answer is the grant.
    pub(super) async fn leave_or_take(
        &self,
        name: &LockName,
        me: &Waiter,
        ticket: &Ticket,
        refusal: Refusal,
    ) -> Result<Step, ServiceError> {
        let deadline = self.deadline();
        let left = self.store.leave(name, me, deadline).await?;
        let now = self.wall.now();
        let basis = engine::giving_up_reads_on(left);
        let Read { record, queue, .. } = self.read_cached(name, deadline, now, basis).await?;
        if engine::gave_up_holding(left, &record, &ticket.lease_id) {
            return Ok(Step::Done(Box::new(Ok(
                self.granted(name, ticket, &record, &queue, now)
            ))));
        }
        Ok(Step::Done(Box::new(Err(refused(
            refusal,
            name,
            &record,
            &queue,
            self.clock(now),
        )))))
    }

    /// The caller disconnected: leave the queue (after which no hand-off can reach this
    /// waiter), pass on a lock that reached it before, and withdraw its requestor slot.
    pub(super) async fn withdraw(
        &self,
        name: &LockName,
        me: &Waiter,
        ticket: &Ticket,
        received: Instant,
    ) {
        let deadline = self.deadline();
        if self.store.leave(name, me, deadline).await.is_err() {
            self.reconciler.sweep(name, Some(me), ticket);
            return;
        }
        for _ in 0..super::MAX_ROUNDS {
            // After a sync: a hand-off to this waiter (its own takeover, or another's release)
            // that landed before the leave must show, whichever server the read goes to.
            let stored = match self.store.read(name, Fresh::Latest, deadline).await {
                Ok(Some(stored)) => stored,
                Ok(None) => return,
                // The lock may have reached this waiter: keep checking in the background.
                Err(_) => return self.reconciler.sweep(name, Some(me), ticket),
            };
            let record = stored.record;
            let cleared = match engine::after_leaving(&record, &me.id, ticket) {
                AfterLeaving::Nothing | AfterLeaving::KeepForRetry => return,
                AfterLeaving::PassOn => {
                    info!(lock = %name, "a waiter left just as the lock reached it; passing it on");
                    if self.release(name, &ticket.lease_id).await.is_err() {
                        self.reconciler.sweep(name, Some(me), ticket);
                    }
                    return;
                }
                AfterLeaving::Withdraw(cleared) => cleared,
            };
            match self
                .store
                .write(
                    name,
                    RecordWrite::Update(&cleared, stored.version),
                    deadline,
                )
                .await
            {
                Ok(WriteOutcome::Written { .. }) => {
                    let victim = crate::engine::victim(&record);
                    self.emit(EventKind::CleanupCancelled, name, victim, &record, received);
                    return;
                }
                Ok(_) => continue,
                Err(_) => return,
            }
        }
    }
}
