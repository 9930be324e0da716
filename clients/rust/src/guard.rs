//! `LockGuard`: a held lease. It owns the background work that keeps the lease (see
//! `keeper`), the two signals a holder must heed (`lost`, `cleanup_requested`), and the
//! release, explicit or on drop.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::client::Client;
use crate::error::Error;
use crate::events::Watch;
use crate::keeper::{self, Shared};
use crate::kind::Kind;
use crate::types::{FencingToken, LeaseId, LockInfo, Requestor};

/// Why a lease is no longer held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LossReason {
    /// A renewal was refused (`code` is `not_owner`, say): the service no longer has
    /// this lease.
    RenewalRefused { code: String },
    /// The lock's state (from a renewal answer or an event) shows another grant or none.
    /// `event` is the stream's event type when an event showed it (`revoked`,
    /// `force_released`, …).
    Superseded {
        event: Option<String>,
        holder_token: Option<FencingToken>,
    },
    /// The service could not be reached, and the lease has run out by our own clock.
    LeaseRanOut,
}

impl fmt::Display for LossReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LossReason::RenewalRefused { code } => write!(f, "a renewal was refused ({code})"),
            LossReason::Superseded {
                event: Some(event), ..
            } => write!(f, "the lock was taken from us ({event})"),
            LossReason::Superseded { .. } => write!(f, "the lock is no longer ours"),
            LossReason::LeaseRanOut => {
                write!(f, "the service was unreachable until the lease ran out")
            }
        }
    }
}

/// A higher priority's request that this holder clean up and let go.
#[derive(Clone, Debug, PartialEq)]
pub struct CleanupRequest {
    pub requestor: Requestor,
    /// The cleanup window left when the request was seen (none: the service gave no
    /// deadline, so the requestor waits up to its own `waiting_ms`).
    pub remaining_at_sight: Option<Duration>,
    seen_at: Instant,
}

impl CleanupRequest {
    pub(crate) fn new(requestor: Requestor) -> CleanupRequest {
        let remaining_at_sight = requestor.cleanup_deadline().map(|deadline| {
            deadline
                .duration_since(SystemTime::now())
                .unwrap_or_default()
        });
        CleanupRequest {
            requestor,
            remaining_at_sight,
            seen_at: Instant::now(),
        }
    }

    /// What is left of the cleanup window now (by our monotonic clock since we saw it).
    pub fn remaining(&self) -> Option<Duration> {
        self.remaining_at_sight
            .map(|left| left.saturating_sub(self.seen_at.elapsed()))
    }
}

/// What an acquire hands the guard.
pub(crate) struct Grant {
    pub kind: Kind,
    pub client: Client,
    pub name: String,
    pub lease_id: LeaseId,
    pub token: FencingToken,
    pub renew_every: Duration,
    pub valid_until: Instant,
    pub renew_now: bool,
    pub lock: LockInfo,
}

/// A held lock. It renews itself until released or dropped; dropping it releases the
/// lease in the background (best effort, on the current tokio runtime).
pub struct LockGuard {
    kind: Kind,
    client: Client,
    name: String,
    lease_id: LeaseId,
    token: FencingToken,
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
    released: bool,
}

impl LockGuard {
    pub(crate) fn start(grant: Grant) -> LockGuard {
        let shared = Arc::new(Shared::new(grant.token));
        shared.judge(&grant.lock, None);
        let tasks = vec![
            tokio::spawn(keeper::renew(
                grant.kind,
                grant.client.clone(),
                grant.name.clone(),
                grant.lease_id.clone(),
                grant.renew_every,
                grant.valid_until,
                grant.renew_now,
                shared.clone(),
            )),
            tokio::spawn(keeper::watch_events(
                grant.kind,
                Watch::new(grant.client.clone(), grant.kind.path(&grant.name, "events")),
                shared.clone(),
            )),
        ];
        LockGuard {
            kind: grant.kind,
            client: grant.client,
            name: grant.name,
            lease_id: grant.lease_id,
            token: grant.token,
            shared,
            tasks,
            released: false,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn lease_id(&self) -> &LeaseId {
        &self.lease_id
    }

    /// The grant's fencing token: pass it to the resource the lock protects.
    pub fn fencing_token(&self) -> FencingToken {
        self.token
    }

    /// Resolves when the lease is lost (and never, once it has been released).
    pub fn lost(&self) -> impl std::future::Future<Output = LossReason> + Send + 'static {
        // Once the guard is released, a released lease is never lost: it stays pending.
        first_set(self.shared.lost.subscribe())
    }

    /// Resolves when a higher priority asks this holder to clean up and let go.
    pub fn cleanup_requested(
        &self,
    ) -> impl std::future::Future<Output = CleanupRequest> + Send + 'static {
        first_set(self.shared.cleanup.subscribe())
    }

    /// Why the lease was lost, if it has been.
    pub fn loss(&self) -> Option<LossReason> {
        self.shared.lost.borrow().clone()
    }

    /// The pending cleanup request, if one was seen.
    pub fn cleanup_request(&self) -> Option<CleanupRequest> {
        self.shared.cleanup.borrow().clone()
    }

    fn stop(&mut self) {
        self.released = true;
        for task in self.tasks.drain(..) {
            task.abort();
        }
    }

    /// Stops renewing and releases the lease. After a loss the service answers
    /// `409 not_owner` (an error here) when another caller holds the lock now, and
    /// success when the lock is free.
    pub async fn release(mut self) -> Result<(), Error> {
        self.stop();
        let_go(self.kind, &self.client, &self.name, &self.lease_id).await
    }

    /// What the guard holds now, as the service shows it, with the lease renewed: a
    /// leader's proclaim (`CampaignRequest`), whose answer is judged as a renewal's.
    pub(crate) async fn renew_with(
        &self,
        action: &str,
        body: serde_json::Value,
    ) -> Result<serde_json::Value, Error> {
        let path = self.kind.path(&self.name, action);
        let answer = self
            .client
            .call(reqwest::Method::POST, &path, Some(&body))
            .await?;
        let answer = crate::call::ok_or_error(answer)?;
        if let Some(view) = self.kind.view(&answer.body, self.token) {
            self.shared.judge(&view, None);
        }
        Ok(answer.body)
    }
}

/// Lets go of a lease: a lock's release, or a leader's resignation.
async fn let_go(kind: Kind, client: &Client, name: &str, lease_id: &LeaseId) -> Result<(), Error> {
    let path = kind.path(name, kind.release());
    let body = serde_json::json!({ "lease_id": lease_id });
    let answer = client
        .call(reqwest::Method::POST, &path, Some(&body))
        .await?;
    crate::call::ok_or_error(answer).map(drop)
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        self.stop();
        if self.loss().is_some() {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let client = self.client.clone();
            let name = std::mem::take(&mut self.name);
            let lease_id = self.lease_id.clone();
            let kind = self.kind;
            runtime.spawn(async move {
                let _ = let_go(kind, &client, &name, &lease_id).await;
            });
        }
    }
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("name", &self.name)
            .field("fencing_token", &self.token)
            .finish_non_exhaustive()
    }
}

/// The value a signal is first set to; pending for ever if it never is (its sender gone).
async fn first_set<T: Clone>(mut receiver: watch::Receiver<Option<T>>) -> T {
    let seen = receiver
        .wait_for(Option::is_some)
        .await
        .ok()
        .and_then(|r| r.clone());
    match seen {
        Some(value) => value,
        None => std::future::pending().await,
    }
}
