//! Event streams (`GET /v1/locks/{name}/events`, `GET /v1/events?prefix=`, an election's
//! `GET /v1/elections/{name}/events`, a semaphore's `GET /v1/semaphores/{name}/events`): the
//! connection, resuming with `Last-Event-ID` after a
//! drop, and the typed `Event`.

use std::time::Duration;

use serde_json::Value;

use crate::call::backoff;
use crate::client::Client;
use crate::error::Error;
use crate::permit::SemaphoreInfo;
use crate::sse::SseParser;
use crate::tls::transport;
use crate::types::{ElectionInfo, LockInfo};

/// The service sends a heartbeat every 15 s; a connection silent for much longer is dead
/// even if no error has reached us (a peer that vanished without a FIN).
const SILENCE_LIMIT: Duration = Duration::from_secs(45);

/// One event of a lock stream, or of an election's.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// `snapshot`, `acquired`, `renewed`, `released`, `expired`, `handed_off`,
    /// `cleanup_requested`, `cleanup_cancelled`, `revoked`, `force_released`, `queue`; on
    /// an election's stream, `snapshot`, `elected`, `proclaimed`, `no_leader`.
    pub kind: String,
    /// The zxid of the change, increasing along the stream.
    pub id: Option<u64>,
    /// The lock after the change (absent on a prefix stream's snapshot).
    pub lock: Option<LockInfo>,
    /// A prefix stream's snapshot: every lock under the prefix.
    pub locks: Vec<LockInfo>,
    /// On an election's stream: the election after the change.
    pub election: Option<ElectionInfo>,
    /// On a semaphore's stream: the semaphore after the change.
    pub semaphore: Option<SemaphoreInfo>,
    /// On a semaphore's stream: the fencing token of the permit the event is about.
    pub fencing_token: Option<u64>,
    /// The event's `data` as sent.
    pub data: Value,
}

impl Event {
    fn parse(kind: String, id: Option<&str>, data: &str) -> Result<Event, Error> {
        let data: Value = serde_json::from_str(data)
            .map_err(|e| Error::Protocol(format!("event data is not JSON: {e}")))?;
        let lock = field(&data, "lock")?;
        let locks = match data.get("locks") {
            Some(locks) => {
                serde_json::from_value(locks.clone()).map_err(|e| Error::Protocol(e.to_string()))?
            }
            None => Vec::new(),
        };
        Ok(Event {
            kind,
            id: id.and_then(|id| id.parse().ok()),
            lock,
            locks,
            election: field(&data, "election")?,
            semaphore: field(&data, "semaphore")?,
            fencing_token: data["fencing_token"].as_u64(),
            data,
        })
    }
}

/// The `data` field `name`, typed, if it is there (a `null` lock is none).
fn field<T: serde::de::DeserializeOwned>(data: &Value, name: &str) -> Result<Option<T>, Error> {
    match data.get(name) {
        Some(Value::Null) | None => Ok(None),
        Some(value) => serde_json::from_value(value.clone())
            .map(Some)
            .map_err(|e| Error::Protocol(e.to_string())),
    }
}

/// A subscription to a lock event stream. `next()` reconnects after a dropped connection,
/// resuming after the last event it delivered.
pub struct Watch {
    client: Client,
    path: String,
    response: Option<reqwest::Response>,
    parser: SseParser,
    pending: std::collections::VecDeque<Event>,
    failures: u32,
}

impl Watch {
    pub(crate) fn new(client: Client, path: String) -> Watch {
        Watch {
            client,
            path,
            response: None,
            parser: SseParser::new(),
            pending: Default::default(),
            failures: 0,
        }
    }

    /// Connects now (rather than on the first `next()`), so that a service without event
    /// streams (`404`) or a refused credential shows at once.
    pub async fn connect(&mut self) -> Result<(), Error> {
        if self.response.is_none() {
            self.open().await?;
        }
        Ok(())
    }

    async fn open(&mut self) -> Result<(), Error> {
        let mut request = self
            .client
            .request(reqwest::Method::GET, &self.path)
            .header(reqwest::header::ACCEPT, "text/event-stream");
        if let Some(id) = self.parser.last_id() {
            request = request.header("Last-Event-ID", id);
        }
        let response = request.send().await.map_err(transport)?;
        let status = response.status().as_u16();
        if status != 200 {
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok()?.trim().parse().ok())
                .map(Duration::from_secs);
            let text = response.text().await.unwrap_or_default();
            let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
            let answer = crate::call::Answer {
                status,
                body,
                retry_after,
            };
            return Err(answer.into_error());
        }
        self.response = Some(response);
        Ok(())
    }

    /// The next event. Transient failures (a dropped connection, 503) are retried for
    /// ever, with backoff; an `Err` is for good (404: the service has no event stream;
    /// 401/403: the credential).
    pub async fn next(&mut self) -> Result<Event, Error> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Ok(event);
            }
            if self.response.is_none() {
                match self.open().await {
                    Ok(()) => {}
                    Err(error) if error.is_transient() => {
                        self.pause().await;
                        continue;
                    }
                    Err(error) => return Err(error),
                }
            }
            let Some(response) = self.response.as_mut() else {
                continue;
            };
            match tokio::time::timeout(SILENCE_LIMIT, response.chunk()).await {
                Ok(Ok(Some(bytes))) => {
                    self.failures = 0;
                    for sse in self.parser.feed(&bytes) {
                        let event = Event::parse(sse.event, sse.id.as_deref(), &sse.data)?;
                        self.pending.push_back(event);
                    }
                }
                // Ended, failed or went silent: resume from the last id on a new connection.
                Ok(Ok(None)) | Ok(Err(_)) | Err(_) => {
                    self.response = None;
                    self.pause().await;
                }
            }
        }
    }

    async fn pause(&mut self) {
        tokio::time::sleep(backoff(self.failures, None)).await;
        self.failures = self.failures.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_and_prefix_snapshot_events_parse() {
        let one = Event::parse(
            "acquired".into(),
            Some("12"),
            r#"{"type":"acquired","lock":{"name":"a","state":"held","fencing_token":12}}"#,
        )
        .unwrap();
        assert_eq!(one.id, Some(12));
        assert_eq!(one.lock.unwrap().name, "a");
        let all = Event::parse(
            "snapshot".into(),
            Some("13"),
            r#"{"type":"snapshot","locks":[{"name":"a","state":"held"},{"name":"b","state":"expired"}]}"#,
        )
        .unwrap();
        assert_eq!(all.locks.len(), 2);
        assert!(all.lock.is_none());
    }
}
