//! The election routes, `/v1/elections/...`: leader election on the lock's rules.
//!
//! An election is kept by a second `LockService` over its own root (`--election-root`), so
//! an election and a lock of one name are unrelated. A campaign is a lock acquire (the
//! candidate holds, its value is the holder's message, its term the fencing token), a
//! resignation a release. Two rules differ, and both are the engine's: a renewal or a
//! proclaim is strict (I17: never after the lease's end on this instance's clock), and only
//! a live leader is shown. The stream tells `elected`, `proclaimed` and `no_leader`, read
//! off the lock stream's events (`election_dto::election_event`); the hub's lease-end timer
//! makes `no_leader` arrive when a lease runs out, with nobody calling.

use axum::extract::{Extension, State};
use axum::http::HeaderMap;
use axum::response::sse::Event;
use axum::response::Response;
use axum::Json;
use futures::stream::{self, StreamExt};
use serde_json::{json, Value};

use super::auth::Caller;
use super::dto::{ListParams, ReleaseBody, RenewBody};
use super::election_dto::{
    check_value, election_event, CampaignBody, Elected, ElectionInfo, LeaderInfo, ProclaimBody,
    TermQuery,
};
use super::error::ApiError;
use super::events::{last_seen, respond, OpenStream};
use super::extract::{JsonBody, QueryParams};
use super::handlers::{acquire_on, sealed_lease};
use super::queries::{page_of, validate_on};
use super::request_id::RequestId;
use super::scoped::Named;
use super::AppState;
use crate::engine::Renewal;
use crate::http_server::Closing;
use crate::resource::Resource;
use crate::service::feed::{EventId, EventType, Interest, Opening, StreamEvent, Subscription};
use crate::service::{LockSnapshot, ServiceError};

type Reply<T = Value> = Result<Json<T>, ApiError>;

fn refused(error: ServiceError) -> ApiError {
    ApiError::of(error, Resource::Election)
}

pub async fn campaign(
    State(app): State<AppState>,
    Named { caller, name }: Named,
    request_id: Option<Extension<RequestId>>,
    JsonBody(body): JsonBody<CampaignBody>,
) -> Reply<Elected> {
    let request = body.validate(app.limits)?;
    let (lease_id, granted) =
        acquire_on(&app, Resource::Election, caller, name, request_id, request).await?;
    Ok(Json(Elected {
        elected: true,
        lease_id,
        term: granted.fencing_token.0,
        election: ElectionInfo::of(&granted.lock),
    }))
}

/// A strict renewal (I17), with the leader's new value when it proclaims one.
async fn renew_leader(
    app: &AppState,
    name: &crate::model::LockName,
    lease_id: &str,
    renewal: Renewal,
) -> Result<LockSnapshot, ApiError> {
    let lease_id = sealed_lease(app, lease_id)?;
    app.elections
        .renew(name, &lease_id, &renewal)
        .await
        .map_err(refused)
}

pub async fn proclaim(
    State(app): State<AppState>,
    Named { name, .. }: Named,
    JsonBody(body): JsonBody<ProclaimBody>,
) -> Reply {
    check_value(&body.value)?;
    let renewal = Renewal {
        lease_ms: None,
        message: Some(body.value),
        strict: true,
    };
    let election = renew_leader(&app, &name, &body.lease_id, renewal).await?;
    Ok(Json(json!({"election": ElectionInfo::of(&election)})))
}

pub async fn renew(
    State(app): State<AppState>,
    Named { name, .. }: Named,
    JsonBody(body): JsonBody<RenewBody>,
) -> Reply {
    let lease_ms = body.lease_ms(app.limits)?;
    let renewal = Renewal {
        lease_ms,
        message: None,
        strict: true,
    };
    let election = renew_leader(&app, &name, &body.lease_id, renewal).await?;
    Ok(Json(json!({"election": ElectionInfo::of(&election)})))
}

pub async fn resign(
    State(app): State<AppState>,
    Named { name, .. }: Named,
    JsonBody(body): JsonBody<ReleaseBody>,
) -> Reply {
    let lease_id = sealed_lease(&app, &body.lease_id)?;
    let election = app
        .elections
        .release(&name, &lease_id)
        .await
        .map_err(refused)?;
    Ok(Json(
        json!({"resigned": true, "election": ElectionInfo::of(&election)}),
    ))
}

pub async fn get_election(State(app): State<AppState>, Named { name, .. }: Named) -> Reply {
    let election = app.elections.get(&name, false).await.map_err(refused)?;
    Ok(Json(json!(ElectionInfo::of(&election))))
}

pub async fn validate(
    State(app): State<AppState>,
    Named { name, .. }: Named,
    QueryParams(query): QueryParams<TermQuery>,
) -> Reply {
    validate_on(
        &app,
        Resource::Election,
        &name,
        "term",
        query.term.as_deref(),
    )
    .await
}

pub async fn list(
    State(app): State<AppState>,
    caller: Caller,
    QueryParams(params): QueryParams<ListParams>,
) -> Reply {
    let (elections, next_cursor) = page_of(&app, Resource::Election, &caller, params).await?;
    let elections: Vec<ElectionInfo> = elections.iter().map(ElectionInfo::of).collect();
    Ok(Json(
        json!({"elections": elections, "next_cursor": next_cursor}),
    ))
}

/// `GET /v1/elections/{name}/events`: the lock stream of the election's record, told as an
/// observer needs it. Each stream remembers the leader it told last, so a renewal that
/// keeps the value says nothing, one that changes it is `proclaimed`, and one that finds
/// no leader told is `elected`.
pub async fn events(
    State(app): State<AppState>,
    Named { name, .. }: Named,
    closing: Option<Extension<Closing>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let Subscription { opening, live } = app
        .elections
        .feed
        .open(Interest::Lock(name.clone()), last_seen(&headers))
        .await
        .map_err(|e| refused(ServiceError::from(e)))?;
    let first: Vec<(EventType, EventId, ElectionInfo)> = match opening {
        Opening::Snapshot { id, locks, .. } => {
            // An election nobody ever campaigned in has no record: it has no leader.
            let election = locks.into_iter().next().unwrap_or_else(|| LockSnapshot {
                name,
                record: Default::default(),
                read_at: crate::model::UnixMillis::now(),
                takeover_at: None,
                margin_ms: 0,
                waiters: 0,
            });
            vec![(EventType::Snapshot, id, ElectionInfo::of(&election))]
        }
        Opening::Replay(events) => events.iter().map(|e| shown(e)).collect(),
    };
    let open = OpenStream::count(&app.service.metrics.event_streams);
    let following = stream::unfold((live, open), |(mut live, open)| async move {
        live.next().await.map(|event| (shown(&event), (live, open)))
    });
    let told: Option<LeaderInfo> = None;
    let events = stream::iter(first)
        .chain(following)
        .scan(told, |told, (kind, id, after)| {
            let said = election_event(kind, &after, told.as_ref());
            if said.is_some() || kind == EventType::Snapshot {
                *told = after.leader.clone();
            }
            std::future::ready(Some(said.map(|said| {
                let data = json!({"type": said, "election": after});
                Event::default()
                    .event(said)
                    .id(id.to_string())
                    .data(data.to_string())
            })))
        })
        .filter_map(std::future::ready);
    Ok(respond(&app, events, closing))
}

/// A lock stream's event, with the election it shows.
fn shown(event: &StreamEvent) -> (EventType, EventId, ElectionInfo) {
    (event.kind, event.id, ElectionInfo::of(&event.lock))
}
