//! The `Client`: where the service is, the credential, and one HTTP call with the retry
//! policy for transient failures (503, 429, 502, 504, connection errors, timeouts). The
//! read-only and administrative calls (status, list, release, force release) live here too.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::acquire::LockRequest;
use crate::error::Error;
use crate::events::Watch;
use crate::tls::{self, transport};
use crate::types::{ForceReleased, LeaseId, LockInfo, LockPage};

/// How long a plain call (not an acquire that waits) may take before it counts as lost.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// The first pause between retries; it doubles up to `MAX_BACKOFF`.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

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

/// One answer: the status, the JSON body (or the text as a JSON string) and Retry-After.
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: u16,
    pub body: Value,
    pub retry_after: Option<Duration>,
}

impl Answer {
    pub fn is_transient(&self) -> bool {
        matches!(self.status, 429 | 502 | 503 | 504)
    }

    fn error_field(&self, field: &str) -> String {
        self.body["error"][field]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| match field {
                "code" => format!("http_{}", self.status),
                _ => self.body.to_string(),
            })
    }

    /// The error this (non-200) answer stands for.
    pub fn into_error(self) -> Error {
        let code = self.error_field("code");
        let message = self.error_field("message");
        if self.status == 409 && self.body.get("acquired").is_some() {
            let lock = serde_json::from_value(self.body["lock"].clone()).ok();
            return Error::NotAcquired {
                code,
                message,
                lock: lock.map(Box::new),
            };
        }
        if self.is_transient() {
            Error::Unavailable {
                status: self.status,
                code,
                message,
            }
        } else {
            Error::Refused {
                status: self.status,
                code,
                message,
            }
        }
    }

    pub fn parse<T: serde::de::DeserializeOwned>(self) -> Result<T, Error> {
        serde_json::from_value(self.body).map_err(|e| Error::Protocol(e.to_string()))
    }
}

/// Percent-encodes a lock name for a path segment, so that `/` inside it is `%2F`.
pub(crate) fn encode(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The pause before retry number `attempt` (0-based): exponential with jitter, or the
/// service's Retry-After when that is longer (capped, so a long one cannot stall us; and
/// never shorter than the backoff, so `Retry-After: 0` cannot make us spin).
pub(crate) fn backoff(attempt: u32, retry_after: Option<Duration>) -> Duration {
    let cap = FIRST_BACKOFF
        .saturating_mul(1u32 << attempt.min(10))
        .min(MAX_BACKOFF);
    let jittered = cap.mul_f64(0.5 + fastrand::f64() / 2.0);
    retry_after.map_or(jittered, |after| after.min(MAX_BACKOFF).max(jittered))
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

    /// One call, no retries. `Err` is a failure to get an answer (`Unreachable` or `Tls`).
    pub(crate) async fn call_once(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        timeout: Duration,
    ) -> Result<Answer, Error> {
        let mut request = self.request(method, path).timeout(timeout);
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.to_string());
        }
        let response = request.send().await.map_err(transport)?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let text = response.text().await.map_err(transport)?;
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Ok(Answer {
            status,
            body,
            retry_after,
        })
    }

    /// A call retried on transient failures until the retry budget runs out. Only for
    /// calls that are safe to repeat.
    pub(crate) async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Answer, Error> {
        let deadline = Instant::now() + self.inner.retry_for;
        self.call_until(method, path, body, CALL_TIMEOUT, deadline)
            .await
            .map(|(answer, _)| answer)
    }

    /// A call retried on transient failures (with backoff, honouring `Retry-After`) until
    /// `deadline`; each try may take `timeout`. The answer comes with when its try was sent.
    pub(crate) async fn call_until(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        timeout: Duration,
        deadline: Instant,
    ) -> Result<(Answer, Instant), Error> {
        let mut attempt = 0;
        loop {
            let sent_at = Instant::now();
            let outcome = self.call_once(method.clone(), path, body, timeout).await;
            let (error, retry_after) = match outcome {
                Ok(answer) if !answer.is_transient() => return Ok((answer, sent_at)),
                Ok(answer) => {
                    let after = answer.retry_after;
                    (answer.into_error(), after)
                }
                Err(error) if !error.is_transient() => return Err(error),
                Err(error) => (error, None),
            };
            let pause = backoff(attempt, retry_after);
            if Instant::now() + pause >= deadline {
                return Err(error);
            }
            tokio::time::sleep(pause).await;
            attempt += 1;
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
        let path = format!("/v1/locks?{}", query.join("&"));
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

    /// The event stream of every lock whose name starts with `prefix`.
    pub fn watch_prefix(&self, prefix: &str) -> Watch {
        Watch::new(
            self.clone(),
            format!("/v1/events?prefix={}", encode(prefix)),
        )
    }
}

pub(crate) fn ok_or_error(answer: Answer) -> Result<Answer, Error> {
    if answer.status == 200 {
        Ok(answer)
    } else {
        Err(answer.into_error())
    }
}

/// A transport error with its causes, which reqwest keeps in the source chain.
pub(crate) fn describe(error: reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_one_path_segment() {
        assert_eq!(encode("payments/migrate"), "payments%2Fmigrate");
        assert_eq!(encode("a.b_c-d~"), "a.b_c-d~");
        assert_eq!(encode("a b"), "a%20b");
    }

    #[test]
    fn backoff_grows_to_a_cap_and_honours_retry_after() {
        assert!(backoff(0, None) <= FIRST_BACKOFF);
        assert!(backoff(30, None) <= MAX_BACKOFF);
        assert!(backoff(30, None) >= MAX_BACKOFF / 2);
        assert!(backoff(0, Some(Duration::ZERO)) >= FIRST_BACKOFF / 2);
        assert_eq!(backoff(0, Some(Duration::from_secs(60))), MAX_BACKOFF);
    }
}
