//! Webhook delivery: lock events become signed POSTs to the holder's `notify_url`.
//!
//! Events are queued without blocking the request that caused them and delivered by a
//! bounded background worker: Standard Webhooks headers and signature, retries with
//! exponential backoff and jitter (the same `webhook-id` on every try), a per-attempt
//! timeout, no redirects, and the target's addresses checked on every connection.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::{mpsc, Semaphore};
use tracing::{info, warn};

use crate::api::dto::RequestorInfo;
use crate::model::UnixMillis;
use crate::service::events::{EventKind, EventSink, LockEvent, Metrics};

pub mod sign;
pub mod target;

use sign::Secret;

/// Events waiting for delivery; beyond this, new events are dropped (and logged).
const QUEUE_CAPACITY: usize = 4096;
/// Deliveries in flight at once.
const CONCURRENCY: usize = 64;
/// The longest single attempt.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
/// Tries for events without a deadline (`lock.revoked`, `lock.cleanup_cancelled`).
const BOUNDED_TRIES: u32 = 5;
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

pub struct Webhooks {
    jobs: mpsc::Sender<Job>,
    metrics: Arc<Metrics>,
}

struct Job {
    id: String,
    kind: EventKind,
    lock: String,
    url: String,
    body: Vec<u8>,
    caused_at: Instant,
    /// Retry until this instant (the cleanup deadline), or `BOUNDED_TRIES` times.
    retry_until: Option<Instant>,
}

impl Webhooks {
    /// Starts the delivery worker. Must run inside a tokio runtime.
    pub fn start(secret: Secret, allow_private: bool, metrics: Arc<Metrics>) -> Webhooks {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(Arc::new(target::GuardedResolver { allow_private }))
            .user_agent(concat!("lockwarden/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("building the webhook client");
        let (jobs, queue) = mpsc::channel(QUEUE_CAPACITY);
        let worker = Worker {
            client,
            secret,
            allow_private,
            metrics: metrics.clone(),
            slots: Arc::new(Semaphore::new(CONCURRENCY)),
        };
        tokio::spawn(worker.run(queue));
        Webhooks { jobs, metrics }
    }
}

fn body_of(event: &LockEvent, now: UnixMillis) -> Vec<u8> {
    let remaining = event
        .cleanup_deadline
        .map(|d| u64::try_from(d.0 - now.0).unwrap_or(0));
    let body = json!({
        "type": event.kind.as_str(),
        "timestamp": now.rfc3339(),
        "data": {
            "lock": event.lock.as_str(),
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
            id: format!("msg_{}", uuid::Uuid::new_v4().simple()),
            kind: event.kind,
            lock: event.lock.to_string(),
            url,
            body: body_of(&event, now),
            caused_at: event.caused_at,
            retry_until,
        };
        if self.jobs.try_send(job).is_err() {
            Metrics::bump(&self.metrics.webhooks_given_up);
            warn!(lock = %event.lock, event = event.kind.as_str(), "webhook queue is full; event dropped");
        }
    }
}

struct Worker {
    client: reqwest::Client,
    secret: Secret,
    allow_private: bool,
    metrics: Arc<Metrics>,
    slots: Arc<Semaphore>,
}

impl Worker {
    async fn run(self, mut queue: mpsc::Receiver<Job>) {
        let worker = Arc::new(self);
        while let Some(job) = queue.recv().await {
            let Ok(slot) = worker.slots.clone().acquire_owned().await else {
                return;
            };
            let worker = worker.clone();
            tokio::spawn(async move {
                worker.deliver(job).await;
                drop(slot);
            });
        }
    }

    async fn deliver(&self, job: Job) {
        let mut backoff = FIRST_BACKOFF;
        for attempt in 1.. {
            if attempt == 1 {
                let waited = job.caused_at.elapsed();
                info!(lock = %job.lock, event = job.kind.as_str(), webhook_id = %job.id,
                      request_to_first_attempt_us = waited.as_micros() as u64, "delivering webhook");
            }
            let remaining = job
                .retry_until
                .map(|until| until.saturating_duration_since(Instant::now()));
            let per_attempt = remaining.map_or(ATTEMPT_TIMEOUT, |r| {
                r.clamp(Duration::from_millis(100), ATTEMPT_TIMEOUT)
            });
            match self.attempt(&job, per_attempt).await {
                Ok(()) => {
                    Metrics::bump(&self.metrics.webhooks_delivered);
                    return;
                }
                Err(Failure::Refused(why)) => {
                    Metrics::bump(&self.metrics.webhooks_refused);
                    warn!(lock = %job.lock, event = job.kind.as_str(), %why, "webhook target refused; not delivering");
                    return;
                }
                Err(Failure::Retry(why)) => {
                    Metrics::bump(&self.metrics.webhook_attempts_failed);
                    let jittered = backoff.mul_f64(0.5 + fastrand::f64() / 2.0);
                    let out_of_time = match job.retry_until {
                        Some(until) => Instant::now() + jittered >= until,
                        None => attempt >= BOUNDED_TRIES,
                    };
                    if out_of_time {
                        Metrics::bump(&self.metrics.webhooks_given_up);
                        warn!(lock = %job.lock, event = job.kind.as_str(), attempts = attempt, %why, "giving up on a webhook");
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
