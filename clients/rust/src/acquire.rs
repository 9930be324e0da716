//! `LockRequest`: the options of one acquire, and the acquire call itself, retried on
//! transient failures with one `request_id`, so that however many times the call is
//! sent, the service grants at most one lease for it.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::client::Client;
use crate::error::Error;
use crate::guard::{Grant, LockGuard};
use crate::kind::Kind;
use crate::types::{FencingToken, LeaseId, RequestId};

/// How much longer than its waiting time an acquire may take to answer before the call
/// counts as lost and is sent again.
const ANSWER_MARGIN: Duration = Duration::from_secs(10);

/// An acquire being set up: `client.lock(name).lease(..).wait(..).acquire().await`.
#[derive(Clone, Debug)]
pub struct LockRequest {
    kind: Kind,
    client: Client,
    name: String,
    lease: Duration,
    wait: Option<Duration>,
    priority: u32,
    cleanup: Option<Duration>,
    forceful: bool,
    message: String,
    owner: Option<String>,
    notify_url: Option<String>,
    renew_every: Option<Duration>,
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl LockRequest {
    pub(crate) fn new(client: Client, name: String) -> LockRequest {
        Self::of(Kind::Lock, client, name)
    }

    /// A campaign: an acquire of an election's leadership (see `CampaignRequest`).
    pub(crate) fn of(kind: Kind, client: Client, name: String) -> LockRequest {
        LockRequest {
            kind,
            client,
            name,
            lease: Duration::from_secs(30),
            wait: None,
            priority: 0,
            cleanup: None,
            forceful: false,
            message: String::new(),
            owner: None,
            notify_url: None,
            renew_every: None,
        }
    }

    /// The lease (default 30 s). The guard renews it long before it runs out.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Waits in the lock's queue up to this long when it is held (default: do not wait).
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// A higher priority may ask a lower holder to clean up and hand the lock over.
    pub fn priority(mut self, priority: u32) -> Self {
        self.priority = priority;
        self
    }

    /// How long this holder gets to clean up when a higher priority asks for the lock.
    pub fn cleanup(mut self, cleanup: Duration) -> Self {
        self.cleanup = Some(cleanup);
        self
    }

    /// Takes the lock from a lower-priority holder without waiting for its cleanup.
    pub fn forceful(mut self, forceful: bool) -> Self {
        self.forceful = forceful;
        self
    }

    /// A note that others see beside the holder (what the lock is held for).
    pub fn message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    /// Who holds the lock, as others see it (default `lockwarden-client:<pid>`).
    pub fn owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    /// A URL the service calls with this lease's webhooks.
    pub fn notify_url(mut self, url: impl Into<String>) -> Self {
        self.notify_url = Some(url.into());
        self
    }

    /// How often the guard renews (default: a third of the lease).
    pub fn renew_every(mut self, every: Duration) -> Self {
        self.renew_every = Some(every);
        self
    }

    fn body(&self, request_id: &RequestId) -> Value {
        let owner = self
            .owner
            .clone()
            .unwrap_or_else(|| format!("lockwarden-client:{}", std::process::id()));
        let (owner_field, message_field) = self.kind.owner_and_message();
        let mut body = json!({
            owner_field: owner,
            "lease_ms": millis(self.lease),
            message_field: self.message,
            "priority": self.priority,
            "forceful": self.forceful,
            "request_id": request_id,
        });
        if let Some(wait) = self.wait {
            body["waiting_ms"] = json!(millis(wait));
        }
        if let Some(cleanup) = self.cleanup {
            body["cleanup_ms"] = json!(millis(cleanup));
        }
        if let Some(url) = &self.notify_url {
            body["notify_url"] = json!(url);
        }
        if let Some(limit) = self.kind.limit() {
            body["limit"] = json!(limit);
        }
        body
    }

    /// Takes the lock, waiting as set. Transient failures are retried with the same
    /// `request_id` until the client's retry budget (plus the waiting time) runs out.
    pub async fn acquire(self) -> Result<LockGuard, Error> {
        if self.lease.is_zero() {
            return Err(Error::InvalidArgument(
                "the lease must be longer than 0".into(),
            ));
        }
        let request_id = RequestId::random();
        let body = self.body(&request_id);
        let path = self.kind.path(&self.name, self.kind.acquire());
        let wait = self.wait.unwrap_or_default();
        let started = Instant::now();
        let deadline = started + wait + self.client.retry_budget();
        let (answer, sent_at) = self
            .client
            .call_until(
                reqwest::Method::POST,
                &path,
                Some(&body),
                wait + ANSWER_MARGIN,
                deadline,
            )
            .await?;
        if answer.status == 200 {
            self.granted(answer.body, started, sent_at)
        } else {
            Err(answer.into_error())
        }
    }

    fn granted(self, body: Value, started: Instant, sent_at: Instant) -> Result<LockGuard, Error> {
        let bad = |what: &str| Error::Protocol(format!("a grant without {what}: {body}"));
        let lease_id = body["lease_id"].as_str().ok_or_else(|| bad("lease_id"))?;
        let token_field = self.kind.token_field();
        let token = body[token_field].as_u64().ok_or_else(|| bad(token_field))?;
        let lock =
            (self.kind.view(&body, FencingToken(token))).ok_or_else(|| bad("what it holds"))?;
        // The grant was read no earlier than this attempt was sent, so the lease runs at
        // least `remaining_ms` from then: a bound our monotonic clock can keep.
        let remaining = lock
            .remaining_ms
            .map_or(self.lease, Duration::from_millis)
            .min(self.lease);
        let renew_every = self.renew_every.unwrap_or(self.lease / 3);
        Ok(LockGuard::start(Grant {
            kind: self.kind,
            client: self.client,
            name: self.name,
            lease_id: LeaseId::new(lease_id),
            token: FencingToken(token),
            renew_every,
            valid_until: sent_at + remaining,
            // A call that waited long leaves a loose bound: renew at once to tighten it.
            renew_now: sent_at.duration_since(started) + sent_at.elapsed() > renew_every,
            lock,
        }))
    }
}
