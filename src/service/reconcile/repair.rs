//! The attempts at each kind of repair (see the module above): one look, and what it
//! leaves to do.

use std::sync::Arc;
use tokio::time::Instant;

use tracing::{debug, warn};

use super::{Context, Job, Next, Repair};
use crate::engine::{holder_with_lease, released};
use crate::model::{LeaseId, LockName};
use crate::record::LockRecord;
use crate::service::local::LocalWaiters;
use crate::service::ServiceError;
use crate::store::Reads;
use crate::store::{Fresh, LockStore, RecordWrite, WriteOutcome};
use crate::waiter::Waiter;

/// Passes of a sweep that failed to look or to remove an entry, after which the store is left
/// to end what remains (the entries with their session, a grant with its lease).
const SWEEP_FAILURES: u32 = 60;

/// One attempt at `job`; the job comes back with what is left to do.
pub(super) async fn attempt(context: Arc<Context>, mut job: Job) -> (Job, Next) {
    let deadline = Instant::now() + context.store_timeout;
    let name = &job.name;
    let last_look = Instant::now() >= job.settled;
    let next = match &mut job.repair {
        Repair::UndoGrant {
            service,
            lease,
            lease_ends,
            unsettled,
        } => {
            if Instant::now() >= *lease_ends {
                if *unsettled {
                    warn!(lock = %name, "could not undo a grant; its lease has run out since");
                }
                return (job, Next::Done);
            }
            match context.store.read(name, Fresh::Latest, deadline).await {
                Ok(Some(stored)) if holder_with_lease(&stored.record, lease).is_some() => {
                    match service.release(name, lease).await {
                        Ok(_) | Err(ServiceError::Refused { .. }) => Next::Done,
                        Err(error) => {
                            debug!(lock = %name, %error, "could not undo a grant yet; trying again");
                            *unsettled = true;
                            Next::Again
                        }
                    }
                }
                Ok(_) if last_look => Next::Done,
                Ok(_) => {
                    *unsettled = false;
                    Next::Again
                }
                Err(_) => {
                    *unsettled = true;
                    Next::Again
                }
            }
        }
        Repair::Sweep {
            key,
            me,
            claimable,
            failed,
        } => {
            let mine = (key.as_str(), me.as_ref());
            // A retry of the call waiting here on an entry of its key keeps that entry.
            let retry_here = |w: &Waiter| context.local.ticket(name, &w.id).is_some();
            let store = &*context.store;
            let swept =
                sweep_once(store, name, mine, retry_here, claimable.as_ref(), deadline).await;
            if swept.freed {
                context.collector.schedule(name);
            }
            *failed += u32::from(!swept.clean);
            if last_look && (swept.clean || *failed >= SWEEP_FAILURES) {
                Next::Done
            } else {
                Next::Again
            }
        }
        Repair::TellHanded { tried } => {
            let local = &context.local;
            if last_look || !tried.iter().any(|w| local.ticket(name, &w.id).is_some()) {
                return (job, Next::Done);
            }
            match context
                .store
                .read_with_queue(name, Fresh::Latest, deadline)
                .await
            {
                Ok((Some(stored), queue))
                    if tell_handed(local, name, &stored.record, &queue, tried) =>
                {
                    Next::Done
                }
                _ => Next::Again,
            }
        }
    };
    (job, next)
}

/// What one pass of a sweep did.
#[derive(Default)]
struct Swept {
    /// Every look and every removal was answered.
    clean: bool,
    /// It freed the lock, held by the call's lease.
    freed: bool,
}

/// One pass of a sweep: removes every queue entry of the call (its `key`, or `me`) but those
/// `kept` (a call here waits on), and frees the lock if `claimable` (the call's lease) holds
/// it.
async fn sweep_once(
    store: &dyn LockStore,
    name: &LockName,
    (key, me): (&str, Option<&Waiter>),
    kept: impl Fn(&Waiter) -> bool,
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
        .filter(|w| !kept(w))
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
        if let Some(holder) = holder_with_lease(&stored.record, lease) {
            // The lease's hold ends (a semaphore's other permits stay).
            let free = released(&stored.record, holder);
            let free = RecordWrite::Update(&free, stored.version);
            let outcome = store.write(name, free, deadline).await;
            freed = matches!(outcome, Ok(WriteOutcome::Written { .. }));
        }
    }
    Swept { clean, freed }
}

/// Tells the waiter among `tried` whose lease holds the lock in `record` (read after a
/// `sync`) that it was handed the lock, with the rest of `queue` behind it. Whether one was.
pub(crate) fn tell_handed(
    local: &LocalWaiters,
    name: &LockName,
    record: &LockRecord,
    queue: &[Waiter],
    tried: &[Waiter],
) -> bool {
    for to in tried {
        let Some(ticket) = local.ticket(name, &to.id) else {
            continue;
        };
        if holder_with_lease(record, &ticket.lease_id).is_some() {
            let rest: Vec<Waiter> = queue.iter().filter(|w| w.id != to.id).cloned().collect();
            local.handed(name, &to.id, record, &rest);
            return true;
        }
    }
    false
}
