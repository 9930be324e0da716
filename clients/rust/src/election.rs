//! Leader election: `client.election(name).candidate(..).value(..).campaign().await` gives
//! a `Leadership`, which renews itself (strictly: a leader whose lease ran out is no
//! leader), tells when it is lost, proclaims a new value, and resigns when dropped. It is a
//! `LockGuard` on the election's paths (see `kind`).

use std::time::Duration;

use crate::acquire::LockRequest;
use crate::client::Client;
use crate::error::Error;
use crate::guard::{CleanupRequest, LockGuard, LossReason};
use crate::kind::Kind;
use crate::types::{ElectionInfo, FencingToken, LeaseId};

/// A campaign being set up. Its options are a lock acquire's, with the candidate for the
/// owner and the value for the message.
#[derive(Clone, Debug)]
pub struct CampaignRequest(LockRequest);

impl CampaignRequest {
    pub(crate) fn new(client: Client, name: String) -> CampaignRequest {
        CampaignRequest(LockRequest::of(Kind::Election, client, name))
    }

    /// Who campaigns, as observers see it [default: `lockwarden-client:<pid>`].
    pub fn candidate(self, candidate: impl Into<String>) -> Self {
        CampaignRequest(self.0.owner(candidate))
    }

    /// What the leader tells observers (an address, say); at most 4096 characters.
    pub fn value(self, value: impl Into<String>) -> Self {
        CampaignRequest(self.0.message(value))
    }

    /// The lease (default 30 s), renewed every third of it.
    pub fn lease(self, lease: Duration) -> Self {
        CampaignRequest(self.0.lease(lease))
    }

    /// How long to wait for the leader to resign or lapse (default: not at all).
    pub fn wait(self, wait: Duration) -> Self {
        CampaignRequest(self.0.wait(wait))
    }

    /// A higher priority asks a lower leader to hand over.
    pub fn priority(self, priority: u32) -> Self {
        CampaignRequest(self.0.priority(priority))
    }

    /// How long this leader gets to hand over when a higher priority asks.
    pub fn cleanup(self, cleanup: Duration) -> Self {
        CampaignRequest(self.0.cleanup(cleanup))
    }

    /// Take over from a lower leader at the end of its cleanup window.
    pub fn forceful(self, forceful: bool) -> Self {
        CampaignRequest(self.0.forceful(forceful))
    }

    /// Where the service sends this leader's signed `election.*` webhooks.
    pub fn notify_url(self, url: impl Into<String>) -> Self {
        CampaignRequest(self.0.notify_url(url))
    }

    /// Campaigns, waiting as set; transient failures are retried with one `request_id`.
    /// `Err(Error::Refused)` with code `leader_exists` or `wait_timeout` when another leads.
    pub async fn campaign(self) -> Result<Leadership, Error> {
        self.0.acquire().await.map(Leadership)
    }
}

/// This process leads an election. Dropping it resigns (best effort, in the background).
#[derive(Debug)]
pub struct Leadership(LockGuard);

impl Leadership {
    pub fn name(&self) -> &str {
        self.0.name()
    }

    pub fn lease_id(&self) -> &LeaseId {
        self.0.lease_id()
    }

    /// The term of this leadership: the fencing token of the win.
    pub fn term(&self) -> FencingToken {
        self.0.fencing_token()
    }

    /// Resolves when the leadership is lost: its lease ran out, a renewal was refused, or
    /// another leader was seen.
    pub fn lost(&self) -> impl std::future::Future<Output = LossReason> + Send + 'static {
        self.0.lost()
    }

    /// Resolves when a candidate of higher priority asks this leader to hand over: finish
    /// within the cleanup window declared, then `resign()`.
    pub fn cleanup_requested(
        &self,
    ) -> impl std::future::Future<Output = CleanupRequest> + Send + 'static {
        self.0.cleanup_requested()
    }

    /// Why the leadership was lost, if it has been.
    pub fn loss(&self) -> Option<LossReason> {
        self.0.loss()
    }

    /// Tells observers a new value, keeping the term (and renewing the lease).
    pub async fn proclaim(&self, value: impl Into<String>) -> Result<ElectionInfo, Error> {
        let body = serde_json::json!({"lease_id": self.lease_id(), "value": value.into()});
        let answer = self.0.renew_with("proclaim", body).await?;
        serde_json::from_value(answer["election"].clone())
            .map_err(|e| Error::Protocol(e.to_string()))
    }

    /// Stops renewing and steps down; the next candidate is elected in the same write.
    pub async fn resign(self) -> Result<(), Error> {
        self.0.release().await
    }
}
