//! What the listing and validate routes of locks, elections and semaphores share: a page
//! of names within the caller's scope, and a token read from a query string.

use axum::Json;
use serde_json::{json, Value};

use super::auth::Caller;
use super::dto::ListParams;
use super::error::ApiError;
use super::AppState;
use crate::model::{FencingToken, LockName, MAX_NAME_BYTES};
use crate::resource::Resource;
use crate::service::LockSnapshot;
use crate::store::ListQuery;

pub const DEFAULT_PAGE: usize = 100;
pub const MAX_PAGE: usize = 1000;

type Reply<T = Value> = Result<Json<T>, ApiError>;

/// A fencing token (or term) in the query parameter `field`: required, and an `int64`, as
/// tokens are zxids, which are signed 64-bit.
pub(super) fn token_query(field: &str, raw: Option<&str>) -> Result<u64, ApiError> {
    let raw =
        raw.ok_or_else(|| ApiError::invalid(format!("the {field} query parameter is required")))?;
    query_uint(raw)
        .filter(|&t| i64::try_from(t).is_ok())
        .ok_or_else(|| {
            ApiError::invalid(format!(
                "{field} must be an integer from 0 to 9223372036854775807"
            ))
        })
}

/// One page of the names `resource` keeps, within the caller's scope, and the cursor of
/// the next page.
pub(super) async fn page_of(
    app: &AppState,
    resource: Resource,
    caller: &Caller,
    params: ListParams,
) -> Result<(Vec<LockSnapshot>, Option<String>), ApiError> {
    let query = list_query(caller, params)?;
    let (page, more) = app
        .service_of(resource)
        .list(&query)
        .await
        .map_err(|e| ApiError::of(e, resource))?;
    let next_cursor = more
        .then(|| page.last().map(|s| s.name.to_string()))
        .flatten();
    Ok((page, next_cursor))
}

/// Whether `raw`, the query parameter `field`, is a current token of `name` in `resource`.
pub(super) async fn validate_on(
    app: &AppState,
    resource: Resource,
    name: &LockName,
    field: &str,
    raw: Option<&str>,
) -> Reply {
    let token = token_query(field, raw)?;
    let current = app
        .service_of(resource)
        .validate(name, FencingToken(token))
        .await
        .map_err(|e| ApiError::of(e, resource))?;
    Ok(Json(json!({"current": current})))
}

/// The page a listing asks for, within the caller's scope.
pub(super) fn list_query(caller: &Caller, params: ListParams) -> Result<ListQuery, ApiError> {
    let prefix = params.prefix.unwrap_or_default();
    if prefix.len() > MAX_NAME_BYTES {
        return Err(ApiError::invalid(format!(
            "prefix is longer than {MAX_NAME_BYTES} bytes"
        )));
    }
    let within = caller.may_list(&prefix)?;
    let limit = match params.limit.as_deref() {
        None => DEFAULT_PAGE,
        Some(raw) => query_uint(raw)
            .filter(|n| (1..=MAX_PAGE as u64).contains(n))
            .map(|n| n as usize)
            .ok_or_else(|| ApiError::invalid(format!("limit must be between 1 and {MAX_PAGE}")))?,
    };
    // An empty cursor is the start, as if none were given: clients that always send the
    // previous page's `next_cursor` would otherwise need a special case for the first page.
    // Any other cursor is the name the page starts after: every name, whether or not it
    // exists, is a position in name order.
    let after = params
        .cursor
        .as_deref()
        .filter(|c| !c.is_empty())
        .map(|c| {
            LockName::parse(c).map_err(|_| {
                ApiError::invalid(
                    "cursor must be a name (the previous page's next_cursor), or empty",
                )
            })
        })
        .transpose()?;
    Ok(ListQuery {
        prefix,
        after,
        limit,
        free: false,
        within,
    })
}

/// A non-negative integer in a query string: ASCII digits only. (Rust's own parser also
/// takes a leading `+`, which the contract's `integer` does not allow.)
fn query_uint(raw: &str) -> Option<u64> {
    if raw.is_empty() || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    raw.parse().ok()
}
