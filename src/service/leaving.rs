//! How a waiting call ends when it does not get the lock the normal way: it gives up (but
//! takes a lock handed to it just before), its caller disconnects (it leaves the queue,
//! passes on a lock that reached it, and withdraws its requestor slot), or the store fails
//! (a background sweep removes what it may have left). Also the guard that undoes an
//! inline grant whose caller went away mid-call.
//!
//! **Why one look after leaving is enough for a waiting call.** Every write that hands the
//! lock to a waiter (its own takeover in `round`, or another caller's release) deletes that
//! waiter's queue entry in the same `multi`. So once the waiter's own delete of its entry has
//! been answered, either way, no such hand-off can land any more: it landed before the
//! delete, or it fails for want of the entry. A read made after a `sync` (which shows every
//! write the leader committed before it) then shows any hand-off that reached the waiter.
//! The inline guard below has no entry to fence its grant with, so it looks again until no
//! write of its call can land.
//!
//! Keeps I11 (a caller gone leaves no lock, entry or requestor slot) and I12 (`sweep_later` removes
//! what the store kept); see DESIGN.md, "Invariants".

use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use tracing::{debug, info, warn};

use super::events::EventKind;
use super::waiting::Step;
use super::{refused, LockService, Read, Refusal, ServiceError};
use crate::engine::{self, holder_with_lease, AfterLeaving};
use crate::model::{LeaseId, LockName};
use crate::record::LockRecord;
use crate::store::{Fresh, LockStore, RecordWrite, WriteOutcome};
use crate::waiter::{Ticket, Waiter};

/// Releases, on its own task, a grant whose caller will never learn of it: the caller went
/// away mid-call, or the call failed after a write whose answer was lost (the grant may
/// have landed). It reads with `sync` until the store answers, for as long as the lease
/// could last, so a lease is never left held by nobody while the store is briefly away.
/// (This is the inline acquire's guard; a waiting call is looked after by `withdraw` and
/// `sweep_later` below.)
///
/// A lost write may also land *after* such a read: a server can apply a request it took in
/// before its connection broke, and a read on a stand-in or new session is not ordered
/// after it. So a read that finds the lease not holding the lock is not the end: the guard
/// looks again until every write the call sent has landed or never will (the collector's
/// delay, which `ServeArgs::check` makes longer than that window), or the lease has run out.
/// It releases only a lease it has seen holding the lock, and a call that sent no grant has
/// nothing to undo (I11).
pub(super) struct UndoGrant {
    pub(super) service: Arc<LockService>,
    pub(super) name: LockName,
    pub(super) lease: LeaseId,
    pub(super) lease_ms: u64,
    pub(super) armed: bool,
    /// Whether the call has sent a write granting `lease`.
    pub(super) sent_grant: bool,
}

impl Drop for UndoGrant {
    fn drop(&mut self) {
        if !self.armed || !self.sent_grant || tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        let (service, name, lease) = (self.service.clone(), self.name.clone(), self.lease);
        let give_up = Instant::now()
            + Duration::from_millis(self.lease_ms.saturating_add(service.max_clock_skew_ms));
        let settled = Instant::now() + service.landing_window;
        tokio::spawn(async move {
            let mut pause = Duration::from_millis(100);
            // Whether the last look failed to settle it (no answer, or a release that failed).
            let mut unsettled = false;
            while Instant::now() < give_up {
                unsettled = match service
                    .store
                    .read(&name, Fresh::Latest, service.deadline())
                    .await
                {
                    Ok(Some(stored)) if holder_with_lease(&stored.record, &lease).is_some() => {
                        match service.release(&name, &lease).await {
                            Ok(_) | Err(ServiceError::Refused { .. }) => return,
                            Err(error) => {
                                debug!(lock = %name, %error, "could not undo a grant yet; trying again");
                                true
                            }
                        }
                    }
                    Ok(_) if Instant::now() >= settled => return,
                    Ok(_) => false,
                    Err(_) => true,
                };
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
            }
            if unsettled {
                warn!(lock = %name, "could not undo a grant; its lease has run out since");
            }
        });
    }
}

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
        // An entry already gone may have gone in a hand-off to this waiter, whose write the
        // server this read goes to may not have applied yet: that read is made after a sync.
        let Read { record, queue, .. } = if left {
            self.read(name, deadline, now, true).await?
        } else {
            self.read_latest(name, deadline).await?
        };
        if !left && holder_with_lease(&record, &ticket.lease_id).is_some() {
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
            self.sweep_later(name, Some(me), ticket);
            return;
        }
        for _ in 0..super::MAX_ROUNDS {
            // After a sync: a hand-off to this waiter (its own takeover, or another's release)
            // that landed before the leave must show, whichever server the read goes to.
            let stored = match self.store.read(name, Fresh::Latest, deadline).await {
                Ok(Some(stored)) => stored,
                Ok(None) => return,
                // The lock may have reached this waiter: keep checking in the background.
                Err(_) => return self.sweep_later(name, Some(me), ticket),
            };
            let record = stored.record;
            let cleared = match engine::after_leaving(&record, &me.id, &ticket.lease_id) {
                AfterLeaving::Nothing => return,
                AfterLeaving::PassOn => {
                    info!(lock = %name, "a waiter left just as the lock reached it; passing it on");
                    if self.release(name, &ticket.lease_id).await.is_err() {
                        self.sweep_later(name, Some(me), ticket);
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
                    self.emit(EventKind::CleanupCancelled, name, &record, received);
                    return;
                }
                Ok(_) => continue,
                Err(_) => return,
            }
        }
    }

    /// When the store was unreachable as a call ended, its queue entry may linger, or a lost
    /// create may still land. Keep removing every entry of this call while removing one fails,
    /// and, for a call without a `request_id`, until no write of it can land any more
    /// (`landing_window`). A call with one shares its key with its retries, which may adopt an
    /// entry it left (see `joining`): its sweep stops at the first clean pass, as a retry
    /// is most likely still to come.
    pub(super) fn sweep_later(&self, name: &LockName, me: Option<&Waiter>, ticket: &Ticket) {
        // A grant that a retry with the same request_id would return is left to its lease.
        let claimable = ticket.request_id.is_none();
        let (store, name, key, lease_id) = (
            self.store.clone(),
            name.clone(),
            ticket.key.clone(),
            ticket.lease_id,
        );
        let me = me.cloned();
        let timeout = self.store_timeout;
        let collector = self.collector.clone();
        let window = if claimable {
            self.landing_window
        } else {
            Duration::ZERO
        };
        let settled = Instant::now() + window;
        tokio::spawn(async move {
            let mut pause = Duration::from_millis(100);
            // Passes that failed to look or to remove an entry; after 60, the store is left
            // to end what remains (the entries with their session, a grant with its lease).
            let mut failed = 0;
            loop {
                let deadline = Instant::now() + timeout;
                let last_look = Instant::now() >= settled;
                let mine = (key.as_str(), me.as_ref());
                let swept = sweep_once(
                    &*store,
                    &name,
                    mine,
                    claimable.then_some(&lease_id),
                    deadline,
                )
                .await;
                if swept.freed {
                    collector.schedule(&name);
                }
                failed += usize::from(!swept.clean);
                if last_look && (swept.clean || failed >= 60) {
                    return;
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
            }
        });
    }
}

/// What one pass of `sweep_later` did.
#[derive(Default)]
struct Swept {
    /// Every look and every removal was answered.
    clean: bool,
    /// It freed the lock, held by the call's lease.
    freed: bool,
}

/// One pass of `sweep_later`: removes every queue entry of the call (its `key`, or `me`) and
/// frees the lock if `claimable` (the call's lease) holds it.
async fn sweep_once(
    store: &dyn LockStore,
    name: &LockName,
    (key, me): (&str, Option<&Waiter>),
    claimable: Option<&LeaseId>,
    deadline: Instant,
) -> Swept {
    // After a sync, so that the listing shows this call's entry, which may have been made
    // through another server than the one this session is on.
    let Ok((mut stored, queue)) = store.read_with_queue(name, Fresh::Latest, deadline).await else {
        return Swept::default();
    };
    let mine: Vec<Waiter> = queue
        .into_iter()
        .filter(|w| w.key == key || me.is_some_and(|m| m.id == w.id))
        .collect();
    let mut clean = true;
    for waiter in &mine {
        clean &= store.leave(name, waiter, deadline).await.is_ok();
    }
    // A hand-off to this call deletes one of its entries in the same write: with none
    // listed, any that landed shows in the record read with the listing. With some, one may
    // have landed before their removal, so read again.
    if !mine.is_empty() {
        let Ok(again) = store.read(name, Fresh::Latest, deadline).await else {
            return Swept::default();
        };
        stored = again;
    }
    let mut freed = false;
    if let (Some(stored), Some(lease)) = (stored, claimable) {
        if holder_with_lease(&stored.record, lease).is_some() {
            let outcome = store
                .write(
                    name,
                    RecordWrite::Update(&LockRecord::default(), stored.version),
                    deadline,
                )
                .await;
            freed = matches!(outcome, Ok(WriteOutcome::Written { .. }));
        }
    }
    Swept { clean, freed }
}
