//! The semaphore routes, `/v1/semaphores/...`: counting semaphores on the lock's rules.
//!
//! A semaphore is kept by a third `LockService` over its own root (`--semaphore-root`), so a
//! semaphore and a lock of one name are unrelated: `lock NAME -n 1` never excludes `lock
//! NAME`. Its record holds up to `limit` holders, one per permit, and the engine grants a
//! permit only while fewer than `limit` are untakeable (I18). An acquire is a lock acquire
//! with a `limit`, a release ends one permit (handing it to the next waiter in the same
//! write), and a force release ends one permit, or every permit one write at a time.

use axum::extract::{Extension, State};
use axum::Json;
use serde_json::{json, Value};

use super::auth::{require_admin, Caller};
use super::dto::{ListParams, ReleaseBody, RenewBody, ValidateQuery};
use super::error::ApiError;
use super::extract::{JsonBody, QueryParams};
use super::handlers::{acquire_on, sealed_lease};
use super::queries::{page_of, token_query, validate_on};
use super::request_id::RequestId;
use super::scoped::Named;
use super::semaphore_dto::{AcquiredPermit, PermitInfo, SemaphoreAcquireBody, SemaphoreInfo};
use super::AppState;
use crate::engine::Renewal;
use crate::model::FencingToken;
use crate::resource::Resource;
use crate::service::ServiceError;

type Reply<T = Value> = Result<Json<T>, ApiError>;

fn refused(error: ServiceError) -> ApiError {
    ApiError::of(error, Resource::Semaphore)
}

pub async fn acquire(
    State(app): State<AppState>,
    Named { caller, name }: Named,
    request_id: Option<Extension<RequestId>>,
    JsonBody(body): JsonBody<SemaphoreAcquireBody>,
) -> Reply<AcquiredPermit> {
    let request = body.validate(app.limits)?;
    let (lease_id, granted) =
        acquire_on(&app, Resource::Semaphore, caller, name, request_id, request).await?;
    Ok(Json(AcquiredPermit {
        acquired: true,
        lease_id,
        fencing_token: granted.fencing_token.0,
        semaphore: SemaphoreInfo::of(&granted.lock),
    }))
}

pub async fn renew(
    State(app): State<AppState>,
    Named { name, .. }: Named,
    JsonBody(body): JsonBody<RenewBody>,
) -> Reply {
    let lease_id = sealed_lease(&app, &body.lease_id)?;
    let lease_ms = body.lease_ms(app.limits)?;
    let semaphore = app
        .semaphores
        .renew(&name, &lease_id, &Renewal::lease(lease_ms))
        .await
        .map_err(refused)?;
    // The renewed permit, which the caller knows by its token (its lease is never shown).
    let permit = crate::engine::holder_with_lease(&semaphore.record, &lease_id)
        .map(|h| PermitInfo::of(h, &semaphore));
    Ok(Json(
        json!({"semaphore": SemaphoreInfo::of(&semaphore), "permit": permit}),
    ))
}

pub async fn release(
    State(app): State<AppState>,
    Named { name, .. }: Named,
    JsonBody(body): JsonBody<ReleaseBody>,
) -> Reply {
    let lease_id = sealed_lease(&app, &body.lease_id)?;
    let semaphore = app
        .semaphores
        .release(&name, &lease_id)
        .await
        .map_err(refused)?;
    Ok(Json(
        json!({"released": true, "semaphore": SemaphoreInfo::of(&semaphore)}),
    ))
}

/// An admin's `DELETE`: frees the permit whose token is `?fencing_token=`, or every permit
/// (each in a write of its own, so that each ends as a release would, I18).
pub async fn force_release(
    State(app): State<AppState>,
    Named { caller, name }: Named,
    request_id: Option<Extension<RequestId>>,
    QueryParams(query): QueryParams<ValidateQuery>,
) -> Reply {
    require_admin(caller.role, "force release")?;
    let actor = caller.actor(request_id.map(|Extension(id)| id.0));
    let tokens: Vec<Option<FencingToken>> = match query.fencing_token.as_deref() {
        Some(raw) => vec![Some(FencingToken(token_query("fencing_token", Some(raw))?))],
        // Every permit held as the call begins, by its token: a permit handed on to a waiter
        // is a new grant, which this call leaves alone, as a lock's force release does.
        None => {
            let now = app.semaphores.get(&name, true).await.map_err(refused)?;
            let held: Vec<_> = now.record.holders.iter().map(|h| h.fencing_token).collect();
            // Token 0 is no permit's (tokens are zxids): with none held, the call is audited
            // and answers "already free", and frees no permit granted meanwhile.
            if held.is_empty() {
                vec![Some(FencingToken(0))]
            } else {
                held
            }
        }
    };
    let mut freed = 0u64;
    let mut last = None;
    for token in tokens {
        let (semaphore, already_free) = app
            .semaphores
            .force_release(&name, &actor, token)
            .await
            .map_err(refused)?;
        freed += u64::from(!already_free);
        last = Some(semaphore);
    }
    let semaphore = last.expect("at least one force release");
    Ok(Json(json!({
        "released": true,
        "already_free": freed == 0,
        "freed": freed,
        "semaphore": SemaphoreInfo::of(&semaphore),
    })))
}

pub async fn get_semaphore(State(app): State<AppState>, Named { name, .. }: Named) -> Reply {
    let semaphore = app.semaphores.get(&name, false).await.map_err(refused)?;
    Ok(Json(json!(SemaphoreInfo::of(&semaphore))))
}

pub async fn validate(
    State(app): State<AppState>,
    Named { name, .. }: Named,
    QueryParams(query): QueryParams<ValidateQuery>,
) -> Reply {
    let token = query.fencing_token.as_deref();
    validate_on(&app, Resource::Semaphore, &name, "fencing_token", token).await
}

pub async fn list(
    State(app): State<AppState>,
    caller: Caller,
    QueryParams(params): QueryParams<ListParams>,
) -> Reply {
    let (semaphores, next_cursor) = page_of(&app, Resource::Semaphore, &caller, params).await?;
    let semaphores: Vec<SemaphoreInfo> = semaphores.iter().map(SemaphoreInfo::of).collect();
    Ok(Json(
        json!({"semaphores": semaphores, "next_cursor": next_cursor}),
    ))
}
