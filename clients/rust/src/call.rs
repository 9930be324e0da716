//! One HTTP call to the service: the answer (status, JSON body, Retry-After) and the error
//! it stands for, and the retry policy for transient failures (503, 429, 502, 504,
//! connection errors, timeouts): exponential backoff with jitter, honouring Retry-After,
//! until the client's retry budget or the caller's deadline. Also how a lock name becomes a
//! path segment.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::client::Client;
use crate::error::Error;
use crate::tls::transport;

/// How long a plain call (not an acquire that waits) may take before it counts as lost.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// The first pause between retries; it doubles up to `MAX_BACKOFF`.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

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
        // A refused acquire (or campaign) says so: `"acquired": false` (`"elected"`).
        let refused_grant = ["acquired", "elected"]
            .iter()
            .any(|k| self.body.get(k).is_some());
        if self.status == 409 && refused_grant {
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

impl Client {
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
        let deadline = Instant::now() + self.retry_budget();
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
