//! The HTTP handlers: each validates its input, calls the service once, and renders.
//!
//! Keeps I6 (`require_admin` before the service sees an override or a force release), I9 (a
//! `request_id`'s lease id is derived from it) and I16 (what a caller presents is sealed as soon as
//! it is parsed); see DESIGN.md, "Invariants".

use axum::extract::{Extension, State};
use axum::http::header::{ACCEPT, CONTENT_TYPE, VARY};
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Redirect};
use axum::Json;
use serde_json::{json, Value};

use super::auth::{require_admin, Caller};
use super::dto::{
    AcquireBody, Acquired, ForceReleased, GetQuery, ListParams, LockInfo, ReleaseBody, Released,
    RenewBody, Renewed, ValidateQuery,
};
use super::error::{ApiError, ErrorCode};
use super::extract::{JsonBody, QueryParams};
use super::queries::{page_of, validate_on};
use super::request_id::RequestId;
use super::scoped::Named;
use super::AppState;
use crate::engine::AcquireRequest;
use crate::metrics::Format;
use crate::model::{LeaseId, LockName, Priority};
use crate::resource::Resource;
use crate::service::{Granted, Refusal, ServiceError};

type Reply<T = Value> = Result<Json<T>, ApiError>;

/// The seal of the lease a caller presents: past this layer, leases are known by their
/// seals only (see `crate::seal`).
pub(super) fn sealed_lease(app: &AppState, raw: &str) -> Result<LeaseId, ApiError> {
    let plain = LeaseId::parse(raw).map_err(ApiError::invalid)?;
    Ok(app.sealer.lease(&plain))
}

pub async fn acquire(
    State(app): State<AppState>,
    Named { caller, name }: Named,
    request_id: Option<Extension<RequestId>>,
    JsonBody(body): JsonBody<AcquireBody>,
) -> Reply<Acquired> {
    let request = body.validate(app.limits)?;
    let (lease_id, granted) =
        acquire_on(&app, Resource::Lock, caller, name, request_id, request).await?;
    Ok(Json(Acquired {
        acquired: true,
        lease_id,
        fencing_token: granted.fencing_token.0,
        lock: LockInfo::of(&granted.lock, None),
    }))
}

/// An acquire of a lock, or a campaign in an election: the checks of who may ask, the
/// lease id (derived from a `request_id`), and the service's answer with the caller's lease
/// id in plain text.
pub(super) async fn acquire_on(
    app: &AppState,
    resource: Resource,
    caller: Caller,
    name: LockName,
    request_id: Option<Extension<RequestId>>,
    mut request: AcquireRequest,
) -> Result<(String, Granted), ApiError> {
    if request.priority == Priority::OVERRIDE {
        require_admin(caller.role, "priority 2147483647 (the SRE override)")?;
    }
    caller.may_acquire_at(request.priority)?;
    request.actor = caller.actor(request_id.map(|Extension(id)| id.0));
    if let Some(url) = &request.notify_url {
        if !app.webhooks.enabled {
            return Err(ApiError::invalid(
                "notify_url needs a server started with --webhook-secret, which signs webhooks",
            ));
        }
        crate::webhook::target::check(url, app.webhooks.allow_private)
            .await
            .map_err(ApiError::invalid)?;
    }
    // A grant made for a request_id gets a lease id derived from it, so that a retry (on
    // any instance) answers with the same one; see `crate::seal`.
    let fresh_lease = match &request.request_id {
        Some(id) => {
            app.sealer
                .lease_for_request(&name, &request.owner, id, &request.request_digest)
        }
        None => LeaseId::random(),
    };
    let presented = request.lease_id;
    request.lease_id = presented.map(|plain| app.sealer.lease(&plain));
    request.request_id = request.request_id.map(|id| app.sealer.request(&id));
    let refused = |e: ServiceError| ApiError::of(e, resource).on_acquire();
    let granted = app
        .service_of(resource)
        .acquire(name, request, app.sealer.lease(&fresh_lease))
        .await
        .map_err(refused)?;
    let Some(lease_id) = [Some(fresh_lease), presented]
        .into_iter()
        .flatten()
        .find(|plain| app.sealer.lease(plain) == granted.lease_id)
    else {
        // A retry of an acquire whose grant is in the unsealed layout (`LW_LEASE_ID` in plain
        // text, not derived from the request_id): its lease id cannot be derived again.
        return Err(refused(ServiceError::Refused {
            refusal: Refusal::LeaseEnded,
            lock: Box::new(granted.lock),
        }));
    };
    Ok((lease_id.to_string(), granted))
}

pub async fn renew(
    State(app): State<AppState>,
    Named { name, .. }: Named,
    JsonBody(body): JsonBody<RenewBody>,
) -> Reply<Renewed> {
    let lease_id = sealed_lease(&app, &body.lease_id)?;
    let lease_ms = body.lease_ms(app.limits)?;
    let lock = app
        .service
        .renew(&name, &lease_id, &crate::engine::Renewal::lease(lease_ms))
        .await?;
    Ok(Json(Renewed {
        lock: LockInfo::of(&lock, None),
    }))
}

pub async fn release(
    State(app): State<AppState>,
    Named { name, .. }: Named,
    JsonBody(body): JsonBody<ReleaseBody>,
) -> Reply<Released> {
    let lease_id = sealed_lease(&app, &body.lease_id)?;
    let lock = app.service.release(&name, &lease_id).await?;
    Ok(Json(Released {
        released: true,
        lock: LockInfo::of(&lock, None),
    }))
}

pub async fn force_release(
    State(app): State<AppState>,
    Named { caller, name }: Named,
    request_id: Option<Extension<RequestId>>,
) -> Reply<ForceReleased> {
    require_admin(caller.role, "force release")?;
    let actor = caller.actor(request_id.map(|Extension(id)| id.0));
    let (lock, already_free) = app.service.force_release(&name, &actor, None).await?;
    Ok(Json(ForceReleased {
        released: true,
        already_free,
        lock: LockInfo::of(&lock, None),
    }))
}

pub async fn get_lock(
    State(app): State<AppState>,
    Named { name, .. }: Named,
    QueryParams(query): QueryParams<GetQuery>,
) -> Reply {
    // Whether the caller owns the lock is answered on the latest copy, as a renew is.
    let lock = app.service.get(&name, query.owner.is_some()).await?;
    Ok(Json(json!(LockInfo::of(&lock, query.owner.as_deref()))))
}

pub async fn validate(
    State(app): State<AppState>,
    Named { name, .. }: Named,
    QueryParams(query): QueryParams<ValidateQuery>,
) -> Reply {
    let token = query.fencing_token.as_deref();
    validate_on(&app, Resource::Lock, &name, "fencing_token", token).await
}

pub async fn list(
    State(app): State<AppState>,
    caller: Caller,
    QueryParams(params): QueryParams<ListParams>,
) -> Reply {
    let (locks, next_cursor) = page_of(&app, Resource::Lock, &caller, params).await?;
    let locks: Vec<LockInfo> = locks.iter().map(|lock| LockInfo::of(lock, None)).collect();
    Ok(Json(json!({"locks": locks, "next_cursor": next_cursor})))
}

pub async fn metrics(
    State(app): State<AppState>,
    headers: HeaderMap,
) -> Result<impl IntoResponse, ApiError> {
    app.auth.metrics_reader(&headers)?;
    let accept = headers.get(ACCEPT).and_then(|v| v.to_str().ok());
    let format = Format::negotiate(accept);
    let others = [("semaphore", &app.semaphores), ("election", &app.elections)];
    app.service.update_gauges();
    for (_, service) in &others {
        service.update_gauges();
    }
    let others = others.map(|(kind, service)| (kind, &*service.metrics));
    Ok((
        [(CONTENT_TYPE, format.content_type()), (VARY, "accept")],
        app.service.metrics.render_with(format, &others),
    ))
}

pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

pub async fn readyz(State(app): State<AppState>) -> Reply {
    app.service.ready().await?;
    app.elections.ready().await?;
    Ok(Json(json!({"status": "ready"})))
}

pub const OPENAPI: &str = include_str!("../../openapi.yaml");

pub async fn openapi() -> impl IntoResponse {
    ([(CONTENT_TYPE, "application/yaml")], OPENAPI)
}

/// The actions of a lock, the route segment after `/v1/locks/{name}`.
const LOCK_ACTIONS: [&str; 6] = ["acquire", "renew", "release", "queue", "validate", "events"];

/// The longest path a 404 quotes back in its hint; a longer one gets the hint without it.
const MAX_QUOTED_PATH: usize = 600;

pub async fn not_found(uri: Uri) -> ApiError {
    let message = match slash_in_name(uri.path()) {
        Some(hint) => format!("no such route: {hint}"),
        None => "no such route".to_owned(),
    };
    ApiError::new(ErrorCode::NotFound, message)
}

/// For a path under `/v1/locks/` that no route matched because the lock name in it holds a
/// raw `/`: how to send it (each `/` in the name as `%2F`), with the path to use when it
/// is plain enough to tell.
fn slash_in_name(path: &str) -> Option<String> {
    let rest = path.strip_prefix("/v1/locks/")?;
    if !rest.contains('/') {
        return None;
    }
    const HOW: &str = "a '/' inside a lock name must be sent as %2F";
    let (name, action) = match rest.rsplit_once('/') {
        Some((name, action)) if LOCK_ACTIONS.contains(&action) => (name, Some(action)),
        _ => (rest, None),
    };
    if path.len() > MAX_QUOTED_PATH || name.split('/').any(str::is_empty) {
        return Some(format!("{HOW} (the lock a/b is /v1/locks/a%2Fb)"));
    }
    let encoded = name.replace('/', "%2F");
    let suggested = match action {
        Some(action) => format!("/v1/locks/{encoded}/{action}"),
        None => format!("/v1/locks/{encoded}"),
    };
    Some(format!("{HOW} (for the lock {name}: {suggested})"))
}

/// `GET /` and `GET /ui/`: a browser pointed at the service, or at the dashboard with a
/// trailing slash, is sent on to the dashboard.
pub async fn to_dashboard() -> Redirect {
    Redirect::permanent("/ui")
}

pub async fn method_not_allowed() -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        "this route does not take that method",
    )
}
