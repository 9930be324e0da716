//! Webhook delivery: lock events become signed POSTs to the holder's `notify_url`.
//!
//! This module owns delivery: Standard Webhooks headers and signature, retries with
//! exponential backoff and jitter (the same `webhook-id` on every try), a per-attempt
//! timeout (connecting included), no redirects, and the target's addresses checked on every
//! connection (`target`).
//!
//! Isolation: events are handed to a lane per target origin (scheme, host, port; see
//! `lanes`) without blocking the request that caused them. A lane runs at most
//! `TARGET_IN_FLIGHT` deliveries, each holding its slot through its retries, and queues at
//! most `TARGET_QUEUE` more; beyond that, or beyond `MAX_TARGETS` busy targets, the event is
//! dropped and counted as given up. So a target that never answers can hold up only its own
//! events, never another target's: there is no shared pool of slots for it to exhaust. This
//! keeps I15 for webhooks (DESIGN.md, "Invariants").
//!
//! The limit is per host and port, not per host name alone, so that receivers on different
//! ports of one host do not share a lane. There is no separate per-name cap: names cost an
//! attacker nothing (wildcard DNS), so it would not bound anything `MAX_TARGETS` does not.

use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

use serde_json::json;
use tracing::{info, warn};

use crate::metrics::{Metrics, WebhookResult};
use crate::model::UnixMillis;
use crate::record::RequestorInfo;
use crate::service::events::{EventKind, EventSink, LockEvent};

pub mod lanes;
pub mod sign;
pub mod target;

use lanes::{Admit, Lanes, Limits};
use sign::Secret;

/// Deliveries in flight at once to one target (origin); each keeps its slot while it
/// retries, so a dead target holds at most this many.
const TARGET_IN_FLIGHT: usize = 4;
/// Events waiting for one target's free slot; beyond this, its new events are dropped.
const TARGET_QUEUE: usize = 64;
/// Targets with deliveries running or waiting; events for further targets are dropped.
/// With the two limits above it bounds the whole: 4096 deliveries in flight (so at most as
/// many open connections) and 65536 events waiting.
const MAX_TARGETS: usize = 1024;
/// The longest single attempt.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest wait for a TCP connection, within the attempt's timeout: a target that drops
/// SYNs fails fast and is retried rather than eating the whole attempt.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Tries for events without a deadline (`lock.revoked`, `lock.cleanup_cancelled`).
const BOUNDED_TRIES: u32 = 5;
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

pub struct Webhooks {
    deliveries: Arc<Deliveries>,
}

struct Job {
    /// The lane: the origin of `url`.
    target: String,
    id: String,
    kind: &'static str,
    lock: String,
    url: String,
    body: Vec<u8>,
    caused_at: Instant,
    /// Retry until this instant (the cleanup deadline), or `BOUNDED_TRIES` times.
    retry_until: Option<Instant>,
}

impl Webhooks {
    /// Sets up delivery. Must run inside a tokio runtime, which delivers every event.
    pub fn start(secret: Secret, allow_private: bool, metrics: Arc<Metrics>) -> Webhooks {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(CONNECT_TIMEOUT)
            .dns_resolver(Arc::new(target::GuardedResolver { allow_private }))
            .user_agent(concat!("lockwarden/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("building the webhook client");
        let deliveries = Deliveries {
            client,
            secret,
            allow_private,
            metrics,
            lanes: Mutex::new(Lanes::new(Limits {
                in_flight: TARGET_IN_FLIGHT,
                queued: TARGET_QUEUE,
                targets: MAX_TARGETS,
            })),
            // `emit` is a plain function that may be called where no runtime is current;
            // deliveries are spawned on the runtime that started the service.
            runtime: tokio::runtime::Handle::current(),
        };
        Webhooks {
            deliveries: Arc::new(deliveries),
        }
    }
}

/// The lane of a notify URL: its origin. An unparsable URL (none passes the acquire
/// check) gets a lane of its own and is refused at its first attempt.
fn target_of(url: &str) -> String {
    url::Url::parse(url).map_or_else(|_| url.to_owned(), |u| u.origin().ascii_serialization())
}

fn body_of(event: &LockEvent, now: UnixMillis) -> Vec<u8> {
    let remaining = event.cleanup_deadline.map(|d| now.millis_until(d));
    let body = json!({
        "type": event.kind.type_name(event.resource),
        "timestamp": now.rfc3339(),
        "data": {
            event.resource.as_str(): event.lock.as_str(),
            "owner": event.holder.owner,
            "fencing_token": event.holder.fencing_token.map(|t| t.0),
            "requestor": event.requestor.as_ref().map(RequestorInfo::of),
            "cleanup_deadline": event.cleanup_deadline.and_then(UnixMillis::rfc3339),
            "cleanup_remaining_ms": remaining,
        }
    });
    serde_json::to_vec(&body).expect("a JSON value always serialises")
}

impl EventSink for Webhooks {
    fn emit(&self, event: LockEvent) {
        let Some(url) = event.holder.notify_url.clone() else {
            return;
        };
        let now = UnixMillis::now();
        let retry_until = match event.kind {
            EventKind::CleanupRequested => event.cleanup_deadline.map(|d| {
                Instant::now() + Duration::from_millis(u64::try_from(d.0 - now.0).unwrap_or(0))
            }),
            EventKind::CleanupCancelled | EventKind::Revoked => None,
        };
        let job = Job {
            target: target_of(&url),
            id: format!("msg_{}", uuid::Uuid::new_v4().simple()),
            kind: event.kind.type_name(event.resource),
            lock: event.lock.to_string(),
            url,
            body: body_of(&event, now),
            caused_at: event.caused_at,
            retry_until,
        };
        Deliveries::offer(&self.deliveries, job);
    }
}

struct Deliveries {
    client: reqwest::Client,
    secret: Secret,
    allow_private: bool,
    metrics: Arc<Metrics>,
    lanes: Mutex<Lanes<Job>>,
    runtime: tokio::runtime::Handle,
}

impl Deliveries {
    fn record(&self, result: WebhookResult) {
        self.metrics.webhooks.at(result).inc();
    }

    /// Hands an event to its target's lane; never blocks on delivery.
    fn offer(this: &Arc<Deliveries>, job: Job) {
        let target = job.target.clone();
        let admitted = {
            let mut lanes = this.lanes.lock().unwrap();
            let admitted = lanes.offer(&target, job);
            this.metrics.webhook_queue.set(lanes.queued() as i64);
            admitted
        };
        match admitted {
            Admit::Start(job) => {
                let this = this.clone();
                this.runtime.clone().spawn(this.run_lane_slot(job));
            }
            Admit::Queued => {}
            Admit::Dropped(job, full) => {
                this.record(WebhookResult::GivenUp);
                warn!(lock = %job.lock, event = job.kind, target = %job.target,
                      why = full.as_str(), "webhook event dropped");
            }
        }
    }

    /// One slot of a lane: delivers `job`, then whatever waits in the lane, until none does.
    async fn run_lane_slot(self: Arc<Self>, mut job: Job) {
        let mut waited = false;
        loop {
            if waited && job.retry_until.is_some_and(|until| Instant::now() >= until) {
                // It waited in its lane past the cleanup deadline: the request is settled,
                // and an attempt now would only delay the events behind it.
                self.record(WebhookResult::GivenUp);
                warn!(lock = %job.lock, event = job.kind, target = %job.target,
                      "the cleanup deadline passed while the webhook waited for its target; giving up");
            } else {
                self.deliver(&job).await;
            }
            let next = {
                let mut lanes = self.lanes.lock().unwrap();
                let next = lanes.finished(&job.target);
                self.metrics.webhook_queue.set(lanes.queued() as i64);
                next
            };
            match next {
                Some(queued) => (job, waited) = (queued, true),
                None => return,
            }
        }
    }

    async fn deliver(&self, job: &Job) {
        let mut backoff = FIRST_BACKOFF;
        for attempt in 1.. {
            if attempt == 1 {
                let waited = job.caused_at.elapsed();
                info!(lock = %job.lock, event = job.kind, webhook_id = %job.id,
                      request_to_first_attempt_us = waited.as_micros() as u64, "delivering webhook");
            }
            let remaining = job
                .retry_until
                .map(|until| until.saturating_duration_since(Instant::now()));
            let per_attempt = remaining.map_or(ATTEMPT_TIMEOUT, |r| {
                r.clamp(Duration::from_millis(100), ATTEMPT_TIMEOUT)
            });
            match self.attempt(job, per_attempt).await {
                Ok(()) => {
                    self.record(WebhookResult::Delivered);
                    return;
                }
                Err(Failure::Refused(why)) => {
                    self.record(WebhookResult::RefusedTarget);
                    warn!(lock = %job.lock, event = job.kind, %why, "webhook target refused; not delivering");
                    return;
                }
                Err(Failure::Retry(why)) => {
                    self.record(WebhookResult::AttemptFailed);
                    let jittered = backoff.mul_f64(0.5 + fastrand::f64() / 2.0);
                    let out_of_time = match job.retry_until {
                        Some(until) => Instant::now() + jittered >= until,
                        None => attempt >= BOUNDED_TRIES,
                    };
                    if out_of_time {
                        self.record(WebhookResult::GivenUp);
                        warn!(lock = %job.lock, event = job.kind, attempts = attempt, %why, "giving up on a webhook");
                        return;
                    }
                    tokio::time::sleep(jittered).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    async fn attempt(&self, job: &Job, timeout: Duration) -> Result<(), Failure> {
        target::check(&job.url, self.allow_private)
            .await
            .map_err(Failure::Refused)?;
        let timestamp = UnixMillis::now().0 / 1000;
        let signature = self.secret.sign(&job.id, timestamp, &job.body);
        let sent = self
            .client
            .post(&job.url)
            .timeout(timeout)
            .header("content-type", "application/json")
            .header("webhook-id", &job.id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(job.body.clone())
            .send()
            .await;
        match sent {
            Ok(response) if response.status().is_success() => Ok(()),
            Ok(response) => Err(Failure::Retry(format!("answered {}", response.status()))),
            Err(error) => Err(Failure::Retry(error.to_string())),
        }
    }
}

enum Failure {
    /// The target is not allowed: retrying cannot help.
    Refused(String),
    Retry(String),
}
