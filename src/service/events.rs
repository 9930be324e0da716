//! What the service tells the outside world: lock events (delivered as webhooks by the
//! `webhook` module), and which acquire steps the audit trail records (see `crate::audit`
//! for the trail itself). What `/metrics` counts is in `crate::metrics`.

use tokio::time::Instant;

use crate::audit::{Actor, Affected, AuditLog, AuditRecord};
use crate::model::{LockName, Priority, UnixMillis};
use crate::record::{Holder, Requestor};
use crate::resource::Resource;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    CleanupRequested,
    CleanupCancelled,
    Revoked,
}

impl EventKind {
    /// The webhook's `type`: the event's name, prefixed with the kind of resource.
    pub fn type_name(self, resource: Resource) -> &'static str {
        match (resource, self) {
            (Resource::Lock, EventKind::CleanupRequested) => "lock.cleanup_requested",
            (Resource::Lock, EventKind::CleanupCancelled) => "lock.cleanup_cancelled",
            (Resource::Lock, EventKind::Revoked) => "lock.revoked",
            (Resource::Election, EventKind::CleanupRequested) => "election.cleanup_requested",
            (Resource::Election, EventKind::CleanupCancelled) => "election.cleanup_cancelled",
            (Resource::Election, EventKind::Revoked) => "election.revoked",
            (Resource::Semaphore, EventKind::CleanupRequested) => "semaphore.cleanup_requested",
            (Resource::Semaphore, EventKind::CleanupCancelled) => "semaphore.cleanup_cancelled",
            (Resource::Semaphore, EventKind::Revoked) => "semaphore.revoked",
        }
    }
}

/// Something the holder of a lock must hear about, at its `notify_url`.
#[derive(Clone, Debug)]
pub struct LockEvent {
    pub kind: EventKind,
    /// What `lock` names: a lock, or an election.
    pub resource: Resource,
    pub lock: LockName,
    /// The holder the event is about (its `notify_url` is the target).
    pub holder: Holder,
    pub requestor: Option<Requestor>,
    pub cleanup_deadline: Option<UnixMillis>,
    /// When the request that caused the event reached the service.
    pub caused_at: Instant,
}

/// Receives lock events; delivery must not block the caller.
pub trait EventSink: Send + Sync {
    fn emit(&self, event: LockEvent);
}

/// Drops every event: for a service without webhooks.
pub struct NoEvents;

impl EventSink for NoEvents {
    fn emit(&self, _: LockEvent) {}
}

/// The audit trail's view of one acquire call: an SRE override at each step it takes, and
/// any preemption that takes the lock from a live holder.
pub struct AcquireAudit<'a> {
    pub lock: &'a LockName,
    pub resource: Resource,
    pub actor: &'a Actor,
    pub owner: &'a str,
    pub priority: u32,
    pub message: &'a str,
}

impl<'a> AcquireAudit<'a> {
    /// The view of an acquire request.
    pub fn of_request(
        lock: &'a LockName,
        resource: Resource,
        request: &'a crate::engine::AcquireRequest,
    ) -> Self {
        AcquireAudit {
            lock,
            resource,
            actor: &request.actor,
            owner: request.owner.as_str(),
            priority: request.priority.get(),
            message: &request.message,
        }
    }

    /// The view of a waiter's ticket.
    pub fn of_ticket(
        lock: &'a LockName,
        resource: Resource,
        ticket: &'a crate::waiter::Ticket,
    ) -> Self {
        AcquireAudit {
            lock,
            resource,
            actor: &ticket.actor,
            owner: &ticket.owner,
            priority: ticket.priority,
            message: &ticket.message,
        }
    }

    /// `sre_override` for the override priority, `preemption_takeover` otherwise.
    pub fn action(&self) -> &'static str {
        if self.priority == Priority::OVERRIDE.get() {
            "sre_override"
        } else {
            "preemption_takeover"
        }
    }

    pub fn record(&self, log: &AuditLog, affected: Option<&Holder>, outcome: &str) {
        log.record(&AuditRecord {
            action: self.action(),
            lock: self.lock.as_str(),
            resource: self.resource,
            actor: self.actor,
            owner: Some(self.owner),
            priority: Some(self.priority),
            affected: affected.map(affected_by),
            reason: Some(self.message),
            outcome,
        });
    }
}

/// How the trail names a holder an action displaced.
pub fn affected_by(holder: &Holder) -> Affected {
    Affected {
        owner: holder.owner.clone(),
        fencing_token: holder.fencing_token.map(|t| t.0),
    }
}
