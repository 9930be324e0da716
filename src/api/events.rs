//! The event streams: `GET /v1/locks/{name}/events`, `GET /v1/events?prefix=P` and
//! `GET /v1/semaphores/{name}/events`, as Server-Sent Events.
//!
//! A stream starts with a `snapshot` (or, given a `Last-Event-ID` the service can still
//! resume from, with the events that followed it), then sends each change as it happens.
//! Every event's `data` is `{"type", "lock": LockInfo}` (a prefix snapshot carries `locks`;
//! a semaphore's event `{"type", "semaphore": SemaphoreInfo, "fencing_token"}`);
//! its `id` is the change's zxid (see `service::feed`). A comment is sent every
//! `--event-heartbeat-ms`, so idle connections stay open through proxies and a dead one is
//! noticed. A stream ends when the server begins to shut down.
//!
//! Keeps I14 (DESIGN.md, "Invariants") where a stream meets its client: the snapshot (or replay)
//! first, then the hub's events in order, each with its id.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream::{self, StreamExt};
use futures::FutureExt;
use prometheus::IntGauge;
use serde::Deserialize;
use serde_json::{json, Value};

use super::auth::Caller;
use super::dto::LockInfo;
use super::error::ApiError;
use super::extract::QueryParams;
use super::scoped::Named;
use super::semaphore_dto::SemaphoreInfo;
use super::AppState;
use crate::http_server::Closing;
use crate::model::MAX_NAME_BYTES;
use crate::scope::Prefixes;
use crate::service::feed::{EventId, EventType, Interest, Opening, StreamEvent, Subscription};
use crate::service::{LockSnapshot, ServiceError};

#[derive(Debug, Deserialize)]
pub struct EventsQuery {
    pub prefix: Option<String>,
}

pub async fn lock_events(
    State(app): State<AppState>,
    Named { name, .. }: Named,
    closing: Option<Extension<Closing>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let interest = Interest::Lock(name);
    open(&app, Kind::Lock, interest, None, &headers, closing).await
}

/// `GET /v1/semaphores/{name}/events`: the semaphore's stream, each event naming the permit
/// it is about by its `fencing_token`.
pub async fn semaphore_events(
    State(app): State<AppState>,
    Named { name, .. }: Named,
    closing: Option<Extension<Closing>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let interest = Interest::Lock(name);
    open(&app, Kind::Semaphore, interest, None, &headers, closing).await
}

/// What a stream shows: locks, or a semaphore.
#[derive(Clone, Copy)]
enum Kind {
    Lock,
    Semaphore,
}

impl Kind {
    /// An event's `data`: its type, the lock (or semaphore) after it, and for a semaphore the
    /// permit it is about.
    fn data(self, kind: EventType, lock: Option<&LockSnapshot>, token: Option<u64>) -> Value {
        match self {
            Kind::Lock => {
                json!({"type": kind.as_str(), "lock": lock.map(|l| LockInfo::of(l, None))})
            }
            Kind::Semaphore => {
                let mut data = json!({
                    "type": kind.as_str(),
                    "semaphore": lock.map(SemaphoreInfo::of),
                });
                if kind != EventType::Snapshot {
                    data["fencing_token"] = json!(token);
                }
                data
            }
        }
    }
}

/// A scoped caller's stream shows only the names in its scope; when one of its prefixes
/// alone reaches the requested prefix, the hub follows that narrower prefix.
pub async fn prefix_events(
    State(app): State<AppState>,
    caller: Caller,
    QueryParams(query): QueryParams<EventsQuery>,
    closing: Option<Extension<Closing>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let prefix = query.prefix.unwrap_or_default();
    if prefix.len() > MAX_NAME_BYTES {
        return Err(ApiError::invalid(format!(
            "prefix is longer than {MAX_NAME_BYTES} bytes"
        )));
    }
    let within = caller.may_list(&prefix)?;
    let followed = match &within {
        Some(within) => within.narrow(&prefix).to_owned(),
        None => prefix,
    };
    let interest = Interest::Prefix(followed);
    open(&app, Kind::Lock, interest, within, &headers, closing).await
}

/// A `Last-Event-ID` that is not one of ours is ignored: the stream starts afresh.
pub(super) fn last_seen(headers: &HeaderMap) -> Option<EventId> {
    headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

/// Opens a stream on `interest`; with `within`, only events on the names it covers are sent.
async fn open(
    app: &AppState,
    kind: Kind,
    interest: Interest,
    within: Option<Arc<Prefixes>>,
    headers: &HeaderMap,
    closing: Option<Extension<Closing>>,
) -> Result<Response, ApiError> {
    let shown = move |name: &str| within.as_ref().is_none_or(|w| w.covers(name));
    let service = match kind {
        Kind::Lock => &app.service,
        Kind::Semaphore => &app.semaphores,
    };
    let Subscription { opening, live } = service
        .feed
        .open(interest.clone(), last_seen(headers))
        .await
        .map_err(ServiceError::from)?;
    let first: Vec<Event> = match opening {
        Opening::Snapshot {
            id,
            locks,
            truncated,
        } => {
            let data = match interest {
                Interest::Lock(_) => kind.data(EventType::Snapshot, locks.first(), None),
                Interest::Prefix(_) => {
                    let infos: Vec<LockInfo> = locks
                        .iter()
                        .filter(|l| shown(l.name.as_str()))
                        .map(|l| LockInfo::of(l, None))
                        .collect();
                    json!({"type": "snapshot", "locks": infos, "truncated": truncated})
                }
            };
            vec![Event::default()
                .event("snapshot")
                .id(id.to_string())
                .data(data.to_string())]
        }
        Opening::Replay(events) => events
            .iter()
            .filter(|e| shown(e.lock.name.as_str()))
            .map(|e| sse_event(kind, e))
            .collect(),
    };
    // The stream owns `live`: when the client goes, the stream is dropped, and with it the
    // hub's count of open streams, and the one `/metrics` shows.
    let open = OpenStream::count(&app.service.metrics.event_streams);
    let following = stream::unfold((live, open), |(mut live, open)| async move {
        live.next().await.map(|event| (event, (live, open)))
    })
    .filter(move |event| std::future::ready(shown(event.lock.name.as_str())));
    let events = stream::iter(first).chain(following.map(move |e| sse_event(kind, &e)));
    Ok(respond(app, events, closing))
}

/// The response that carries `events`, with heartbeats, until the server begins to close.
pub(super) fn respond(
    app: &AppState,
    events: impl futures::Stream<Item = Event> + Send + 'static,
    closing: Option<Extension<Closing>>,
) -> Response {
    // Outside the server (a router driven directly) nothing closes it.
    let closed = match closing {
        Some(Extension(closing)) => closing.wait().boxed(),
        None => std::future::pending().boxed(),
    };
    let events = events.take_until(closed).map(Ok::<Event, Infallible>);
    let heartbeat = KeepAlive::new()
        .interval(app.event_heartbeat)
        .text("heartbeat");
    Sse::new(events).keep_alive(heartbeat).into_response()
}

/// Counts an open stream in a gauge for as long as it lives.
pub(super) struct OpenStream(IntGauge);

impl OpenStream {
    pub(super) fn count(gauge: &IntGauge) -> OpenStream {
        gauge.inc();
        OpenStream(gauge.clone())
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.dec();
    }
}

fn sse_event(kind: Kind, event: &Arc<StreamEvent>) -> Event {
    let token = event.token.map(|t| t.0);
    let data = kind.data(event.kind, Some(&event.lock), token);
    Event::default()
        .event(event.kind.as_str())
        .id(event.id.to_string())
        .data(data.to_string())
}
