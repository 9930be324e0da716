//! The `Client`: where the service is and the credential, and the read-only and
//! administrative calls (status, list, release, force release, event streams). One HTTP
//! call and its retry policy are `call.rs`; an acquire is `acquire.rs`.

use std::sync::Arc;
use std::time::Duration;

use crate::acquire::LockRequest;
use crate::call::{encode, ok_or_error};
use crate::election::CampaignRequest;
use crate::error::Error;
use crate::events::Watch;
use crate::kind::Kind;
use crate::permit::{SemaphoreInfo, SemaphorePage};
use crate::tls;
use crate::types::{ElectionInfo, ElectionPage, ForceReleased, LeaseId, LockInfo, LockPage};

/// A handle on one lockwarden service (any of its instances behind one URL). Cheap to
/// clone; clones share connections.
#[derive(Clone, Debug)]
pub struct Client {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
    retry_for: Duration,
}

impl Client {
    /// A client for the service at `url` (`http://127.0.0.1:8080` or
    /// `https://locks.example:8443`, say). Over https it trusts the public CAs (Mozilla's
    /// list, built in); a private CA needs [`Client::ca_file`] or [`Client::ca_pem`].
    pub fn new(url: impl Into<String>) -> Client {
        let http = tls::http_client(None).unwrap_or_default();
        Client {
            inner: Arc::new(Inner {
                base: url.into().trim_end_matches('/').to_owned(),
                token: None,
                http,
                retry_for: Duration::from_secs(30),
            }),
        }
    }

    fn with(self, change: impl FnOnce(&mut Inner)) -> Client {
        let mut inner = Arc::try_unwrap(self.inner).unwrap_or_else(|shared| Inner {
            base: shared.base.clone(),
            token: shared.token.clone(),
            http: shared.http.clone(),
            retry_for: shared.retry_for,
        });
        change(&mut inner);
        Client {
            inner: Arc::new(inner),
        }
    }

    /// Sends `Authorization: Bearer <token>` with every call.
    pub fn token(self, token: impl Into<String>) -> Client {
        let token = token.into();
        self.with(|inner| inner.token = Some(token))
    }

    /// How long transient failures are retried before a call gives up (default 30 s). An
    /// acquire that waits gets its waiting time on top.
    pub fn retry_for(self, budget: Duration) -> Client {
        self.with(|inner| inner.retry_for = budget)
    }

    /// Uses this reqwest client (for proxies, TLS roots, …).
    pub fn http_client(self, http: reqwest::Client) -> Client {
        self.with(|inner| inner.http = http)
    }

    /// The service's base URL.
    pub fn url(&self) -> &str {
        &self.inner.base
    }

    pub(crate) fn retry_budget(&self) -> Duration {
        self.inner.retry_for
    }

    /// Starts an acquire of the lock `name`; set its options, then `.acquire().await`.
    pub fn lock(&self, name: impl Into<String>) -> LockRequest {
        LockRequest::new(self.clone(), name.into())
    }

    pub(crate) fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let request = self
            .inner
            .http
            .request(method, format!("{}{path}", self.inner.base));
        match &self.inner.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// The lock's current state (a never-used lock shows as free).
    pub async fn status(&self, name: &str) -> Result<LockInfo, Error> {
        let path = format!("/v1/locks/{}", encode(name));
        let answer = self.call(reqwest::Method::GET, &path, None).await?;
        ok_or_error(answer)?.parse()
    }

    /// One page of held or expired locks whose names start with `prefix`.
    pub async fn list(
        &self,
        prefix: &str,
        limit: Option<u32>,
        cursor: Option<&str>,
    ) -> Result<LockPage, Error> {
        self.page("/v1/locks", prefix, limit, cursor).await
    }

    /// One page of the elections whose names start with `prefix`.
    pub async fn elections(
        &self,
        prefix: &str,
        limit: Option<u32>,
        cursor: Option<&str>,
    ) -> Result<ElectionPage, Error> {
        self.page("/v1/elections", prefix, limit, cursor).await
    }

    /// One page of the semaphores whose names start with `prefix` (`GET /v1/semaphores`).
    pub async fn semaphores(
        &self,
        prefix: &str,
        limit: Option<u32>,
        cursor: Option<&str>,
    ) -> Result<SemaphorePage, Error> {
        self.page("/v1/semaphores", prefix, limit, cursor).await
    }

    async fn page<T: serde::de::DeserializeOwned>(
        &self,
        root: &str,
        prefix: &str,
        limit: Option<u32>,
        cursor: Option<&str>,
    ) -> Result<T, Error> {
        let mut query = vec![("prefix", prefix.to_owned())];
        if let Some(limit) = limit {
            query.push(("limit", limit.to_string()));
        }
        if let Some(cursor) = cursor {
            query.push(("cursor", cursor.to_owned()));
        }
        let query: Vec<String> = query
            .iter()
            .map(|(k, v)| format!("{k}={}", encode(v)))
            .collect();
        let path = format!("{root}?{}", query.join("&"));
        let answer = self.call(reqwest::Method::GET, &path, None).await?;
        ok_or_error(answer)?.parse()
    }

    /// Releases the lease `lease_id` on `name` (what `LockGuard::release` does, for a
    /// lease held by another process).
    pub async fn release(&self, name: &str, lease_id: &LeaseId) -> Result<LockInfo, Error> {
        let path = format!("/v1/locks/{}/release", encode(name));
        let body = serde_json::json!({ "lease_id": lease_id });
        let answer = self.call(reqwest::Method::POST, &path, Some(&body)).await?;
        let answer = ok_or_error(answer)?;
        serde_json::from_value(answer.body["lock"].clone())
            .map_err(|e| Error::Protocol(e.to_string()))
    }

    /// Releases the lock whoever holds it (needs the admin token); the answer says whether
    /// it was free already.
    pub async fn force_release(&self, name: &str) -> Result<ForceReleased, Error> {
        let path = format!("/v1/locks/{}", encode(name));
        let answer = self.call(reqwest::Method::DELETE, &path, None).await?;
        let answer = ok_or_error(answer)?;
        serde_json::from_value(answer.body).map_err(|e| Error::Protocol(e.to_string()))
    }

    /// The event stream of one lock (`GET /v1/locks/{name}/events`).
    pub fn watch(&self, name: &str) -> Watch {
        Watch::new(self.clone(), format!("/v1/locks/{}/events", encode(name)))
    }

    /// Asks for one permit of the semaphore `name` of `limit` permits; set its options
    /// (those of a lock's acquire), then `.acquire().await`. The guard is a lock's: it
    /// renews its permit, tells when it is lost or asked to give way, and releases it
    /// when dropped. A semaphore and a lock of one name are unrelated.
    pub fn semaphore(&self, name: impl Into<String>, limit: u32) -> LockRequest {
        LockRequest::of(Kind::Semaphore(limit), self.clone(), name.into())
    }

    /// The event stream of the semaphore `name`: each event names the permit it is about
    /// (`Event::fencing_token`) and carries the semaphore after it.
    pub fn watch_semaphore(&self, name: &str) -> Watch {
        Watch::new(
            self.clone(),
            format!("/v1/semaphores/{}/events", encode(name)),
        )
    }

    /// The semaphore's holders and queue (`GET /v1/semaphores/{name}`).
    pub async fn semaphore_info(&self, name: &str) -> Result<SemaphoreInfo, Error> {
        let path = format!("/v1/semaphores/{}", encode(name));
        let answer = self.call(reqwest::Method::GET, &path, None).await?;
        ok_or_error(answer)?.parse()
    }

    /// Starts a campaign in the election `name`; set its options, then
    /// `.campaign().await`.
    pub fn election(&self, name: impl Into<String>) -> CampaignRequest {
        CampaignRequest::new(self.clone(), name.into())
    }

    /// The election's current leader, if any (`GET /v1/elections/{name}`).
    pub async fn leader(&self, name: &str) -> Result<ElectionInfo, Error> {
        let path = format!("/v1/elections/{}", encode(name));
        let answer = self.call(reqwest::Method::GET, &path, None).await?;
        ok_or_error(answer)?.parse()
    }

    /// The election's stream: `snapshot`, then `elected`, `proclaimed` and `no_leader`,
    /// each event's `election` the election after it.
    pub fn observe(&self, name: &str) -> Watch {
        Watch::new(
            self.clone(),
            format!("/v1/elections/{}/events", encode(name)),
        )
    }

    /// The event stream of every lock whose name starts with `prefix`.
    pub fn watch_prefix(&self, prefix: &str) -> Watch {
        Watch::new(
            self.clone(),
            format!("/v1/events?prefix={}", encode(prefix)),
        )
    }
}
