//! What the service tells the outside world: lock events (delivered as webhooks by the
//! `webhook` module), counters for `/metrics`, and which acquire steps the audit trail
//! records (see `crate::audit` for the trail itself).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::audit::{Actor, Affected, AuditLog, AuditRecord};
use crate::model::{LockName, Priority, UnixMillis};
use crate::record::{Holder, Requestor};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    CleanupRequested,
    CleanupCancelled,
    Revoked,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::CleanupRequested => "lock.cleanup_requested",
            EventKind::CleanupCancelled => "lock.cleanup_cancelled",
            EventKind::Revoked => "lock.revoked",
        }
    }
}

/// Something the holder of a lock must hear about, at its `notify_url`.
#[derive(Clone, Debug)]
pub struct LockEvent {
    pub kind: EventKind,
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

/// Counters exposed at `/metrics`.
#[derive(Default)]
pub struct Metrics {
    pub grants: AtomicU64,
    pub handoffs: AtomicU64,
    pub waits_started: AtomicU64,
    /// Waits refused because the lock's queue was full, or this instance had too many.
    pub waits_refused_full: AtomicU64,
    pub waits_refused_busy: AtomicU64,
    pub wakeups_record: AtomicU64,
    pub wakeups_predecessor: AtomicU64,
    pub wakeups_timer: AtomicU64,
    pub wakeups_handed: AtomicU64,
    pub queue_reads_saved: AtomicU64,
    /// Microseconds that releases' hand-off writes took, and how many there were.
    pub handoff_write_us: AtomicU64,
    pub handoff_writes: AtomicU64,
    pub webhooks_delivered: AtomicU64,
    pub webhook_attempts_failed: AtomicU64,
    pub webhooks_given_up: AtomicU64,
    pub webhooks_refused: AtomicU64,
}

impl Metrics {
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn handoff_write_took(&self, took: std::time::Duration) {
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.handoff_write_us.fetch_add(micros, Ordering::Relaxed);
        Metrics::bump(&self.handoff_writes);
    }

    /// The counters in Prometheus' text format.
    pub fn render(&self) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut out = String::new();
        let mut counter = |name: &str, help: &str, samples: &[(&str, u64)]| {
            out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} counter\n"));
            for (labels, value) in samples {
                out.push_str(&format!("{name}{labels} {value}\n"));
            }
        };
        counter(
            "lockwarden_grants_total",
            "Locks granted without waiting.",
            &[("", get(&self.grants))],
        );
        counter(
            "lockwarden_handoffs_total",
            "Locks passed to a waiter.",
            &[("", get(&self.handoffs))],
        );
        counter(
            "lockwarden_waits_total",
            "Acquire calls that joined a queue.",
            &[("", get(&self.waits_started))],
        );
        counter(
            "lockwarden_waits_refused_total",
            "Acquire calls refused with too_many_waiters, by the limit they met.",
            &[
                ("{limit=\"per_lock\"}", get(&self.waits_refused_full)),
                ("{limit=\"per_instance\"}", get(&self.waits_refused_busy)),
            ],
        );
        counter(
            "lockwarden_waiter_wakeups_total",
            "Times a waiting call woke up, by cause.",
            &[
                ("{cause=\"record\"}", get(&self.wakeups_record)),
                ("{cause=\"predecessor\"}", get(&self.wakeups_predecessor)),
                ("{cause=\"timer\"}", get(&self.wakeups_timer)),
                ("{cause=\"handed\"}", get(&self.wakeups_handed)),
            ],
        );
        counter(
            "lockwarden_queue_reads_saved_total",
            "Releases, renewals and waiters that used what this instance remembered from its last hand-off of the lock instead of reading the queue.",
            &[("", get(&self.queue_reads_saved))],
        );
        counter(
            "lockwarden_webhooks_total",
            "Webhook deliveries, by result.",
            &[
                ("{result=\"delivered\"}", get(&self.webhooks_delivered)),
                (
                    "{result=\"attempt_failed\"}",
                    get(&self.webhook_attempts_failed),
                ),
                ("{result=\"given_up\"}", get(&self.webhooks_given_up)),
                ("{result=\"refused_target\"}", get(&self.webhooks_refused)),
            ],
        );
        out.push_str(&format!(
            "# HELP lockwarden_handoff_write_seconds Time a release's hand-off write (one ZooKeeper multi) took.\n\
             # TYPE lockwarden_handoff_write_seconds summary\n\
             lockwarden_handoff_write_seconds_sum {:.6}\n\
             lockwarden_handoff_write_seconds_count {}\n",
            get(&self.handoff_write_us) as f64 / 1e6,
            get(&self.handoff_writes)
        ));
        out
    }
}

/// The audit trail's view of one acquire call: an SRE override at each step it takes, and
/// any preemption that takes the lock from a live holder.
pub struct AcquireAudit<'a> {
    pub lock: &'a LockName,
    pub actor: &'a Actor,
    pub owner: &'a str,
    pub priority: u32,
    pub message: &'a str,
}

impl AcquireAudit<'_> {
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
