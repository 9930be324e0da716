//! The read-only view of a lock's queue (`GET /v1/locks/{name}/queue`): who waits, in the
//! order the lock will be handed on, read from the waiters' tickets.
//!
//! The queue's node names give the order; each ticket (one store read per waiter) gives who
//! the caller is and until when it waits. Tickets also hold the sealed lease and request ids:
//! this view keeps them inside the service, and the API renders only the public fields.
//!
//! Keeps I16 (DESIGN.md, "Invariants"): sealed ids never leave the service.

use futures::stream::{self, StreamExt};

use super::{LockService, LockSnapshot, ServiceError};
use crate::model::LockName;
use crate::waiter::{Ticket, Waiter};

/// The most queue entries one view reads; a longer queue is cut (and says so).
pub const QUEUE_VIEW_MAX: usize = 1000;
/// Ticket reads in flight at once: enough to pipeline a long queue over one ZooKeeper
/// session, few enough not to crowd out the calls that change locks.
const READS_IN_FLIGHT: usize = 16;

/// One caller in a lock's queue.
#[derive(Clone, Debug)]
pub struct QueuedCaller {
    pub waiter: Waiter,
    pub ticket: Ticket,
    /// This caller is the lock's live requestor (it asked the holder to clean up).
    pub requestor: bool,
}

/// A lock and its queue, read together.
#[derive(Clone, Debug)]
pub struct QueueView {
    /// The lock, with `waiters` the whole queue's length.
    pub lock: LockSnapshot,
    /// In service order; callers that left while the view was read are not in it.
    pub callers: Vec<QueuedCaller>,
    /// The queue was longer than [`QUEUE_VIEW_MAX`].
    pub truncated: bool,
}

impl LockService {
    pub async fn queue_view(&self, name: &LockName) -> Result<QueueView, ServiceError> {
        let deadline = self.deadline();
        let (lock, queue) = self.look(name, deadline, false).await?;
        // `snapshot` has dropped a requestor whose waiter is gone, so this names a live one.
        let requestor = lock
            .record
            .requestor
            .as_ref()
            .and_then(|r| r.waiter.clone());
        let truncated = queue.len() > QUEUE_VIEW_MAX;
        let tickets: Vec<_> = stream::iter(queue.into_iter().take(QUEUE_VIEW_MAX))
            .map(|waiter| async move {
                let ticket = self.store.ticket(name, &waiter, deadline).await;
                (waiter, ticket)
            })
            .buffered(READS_IN_FLIGHT)
            .collect()
            .await;
        let mut callers = Vec::with_capacity(tickets.len());
        for (waiter, ticket) in tickets {
            // `None`: the caller left (or was handed the lock) after the queue was listed.
            if let Some(ticket) = ticket? {
                callers.push(QueuedCaller {
                    requestor: requestor.as_deref() == Some(waiter.id.as_str()),
                    waiter,
                    ticket,
                });
            }
        }
        Ok(QueueView {
            lock,
            callers,
            truncated,
        })
    }
}
