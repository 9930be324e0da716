//! `GET /v1/locks/{name}/queue`: a lock and the callers waiting for it, in the order it
//! will be handed on.
//!
//! Only what identifies a waiting caller to a person is shown (owner, priority, message,
//! when it joined, until when it waits). Lease ids, request ids and their seals stay in the
//! service: they are bearer secrets, and their seals are what the store keeps of them.

use axum::extract::State;
use axum::Json;
use serde::Serialize;

use super::dto::{rfc3339, LockInfo};
use super::error::ApiError;
use super::scoped::Named;
use super::AppState;
use crate::model::UnixMillis;
use crate::service::queue_view::QueuedCaller;

#[derive(Debug, Serialize)]
pub struct LockQueue {
    pub lock: LockInfo,
    pub queue: Vec<QueueEntry>,
    pub truncated: bool,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct QueueEntry {
    /// 1 for the caller the lock goes to next.
    pub position: usize,
    pub owner: String,
    pub priority: u32,
    pub message: String,
    pub forceful: bool,
    /// This caller is the lock's requestor: it asked the holder to clean up.
    pub requestor: bool,
    pub joined_at: Option<String>,
    /// When it stops waiting: its `waiting_ms` after it joined, and for the requestor no
    /// later than the holder's cleanup deadline.
    pub waiting_until: Option<String>,
    /// Milliseconds left of its wait, on the service's clock.
    pub wait_remaining_ms: Option<u64>,
}

impl QueueEntry {
    /// `cleanup_deadline` is the lock's, which ends the requestor's wait if it comes first.
    fn of(
        position: usize,
        caller: &QueuedCaller,
        cleanup_deadline: Option<UnixMillis>,
        now: UnixMillis,
    ) -> QueueEntry {
        let ticket = &caller.ticket;
        // A ticket without a join time carries 0: unknown, not 1970.
        let joined_at = Some(UnixMillis(ticket.received_at)).filter(|at| at.0 > 0);
        let until = match (ticket.wait_until(), cleanup_deadline) {
            (Some(own), Some(cleanup)) if caller.requestor => Some(own.min(cleanup)),
            (None, cleanup) if caller.requestor => cleanup,
            (own, _) => own,
        };
        QueueEntry {
            position,
            owner: ticket.owner.clone(),
            // The node's name decides the order; its priority is the one that counts.
            priority: caller.waiter.priority,
            message: ticket.message.clone(),
            forceful: ticket.forceful,
            requestor: caller.requestor,
            joined_at: joined_at.and_then(rfc3339),
            waiting_until: until.and_then(rfc3339),
            wait_remaining_ms: until.map(|at| now.millis_until(at)),
        }
    }
}

pub async fn lock_queue(
    State(app): State<AppState>,
    Named { name, .. }: Named,
) -> Result<Json<LockQueue>, ApiError> {
    let view = app.service.queue_view(&name).await?;
    let now = view.lock.read_at;
    let requestor = view.lock.record.requestor.as_ref();
    let cleanup_deadline = requestor.and_then(|r| r.cleanup_deadline);
    let queue = view
        .callers
        .iter()
        .enumerate()
        .map(|(i, caller)| QueueEntry::of(i + 1, caller, cleanup_deadline, now))
        .collect();
    Ok(Json(LockQueue {
        lock: LockInfo::of(&view.lock, None),
        queue,
        truncated: view.truncated,
    }))
}
