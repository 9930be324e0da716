//! Request metrics: a layer that times every call, from its arrival to its response head,
//! into `lockwarden_http_request_duration_seconds`, labelled by route template (never the
//! concrete path, which holds a lock name), method and outcome.
//!
//! The outcome is `ok` for a success, the stable error `code` for an error answered through
//! `ApiError` (which marks its response with it), and the bare HTTP status otherwise. Every
//! label value comes from a fixed set, so the number of series stays bounded whatever
//! callers send.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

use super::error::ErrorCode;
use crate::metrics::Metrics;

/// The route of a request that matched none (it was answered by a fallback).
pub const UNMATCHED: &str = "unmatched";

pub async fn layer(State(metrics): State<Arc<Metrics>>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = request.extensions().get::<MatchedPath>().cloned();
    let method = method_label(request.method());
    let response = next.run(request).await;
    let route = route.as_ref().map_or(UNMATCHED, MatchedPath::as_str);
    let status = response.status();
    let outcome = outcome_label(response.extensions().get::<ErrorCode>(), &status);
    metrics.request_took(route, method, outcome, started.elapsed());
    response
}

/// The methods the API routes take, and `other` for any else: a caller can send any token
/// as a method, and it must not become a label value.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "get",
        Method::POST => "post",
        Method::DELETE => "delete",
        Method::HEAD => "head",
        Method::PUT => "put",
        Method::PATCH => "patch",
        Method::OPTIONS => "options",
        _ => "other",
    }
}

fn outcome_label<'a>(code: Option<&ErrorCode>, status: &'a StatusCode) -> &'a str {
    match code {
        Some(code) => code.as_str(),
        None if status.is_success() => "ok",
        None => status.as_str(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use axum::response::IntoResponse;

    use super::*;
    use crate::api::error::ApiError;
    use crate::api::ROUTES;

    #[test]
    fn outcomes_are_ok_the_error_code_or_the_status() {
        let label = |response: Response| {
            let status = response.status();
            outcome_label(response.extensions().get::<ErrorCode>(), &status).to_owned()
        };
        assert_eq!(label(StatusCode::OK.into_response()), "ok");
        assert_eq!(label(StatusCode::NO_CONTENT.into_response()), "ok");
        let held = ApiError::new(ErrorCode::LockHeld, "held").into_response();
        assert_eq!(label(held), "lock_held");
        assert_eq!(
            label(StatusCode::INTERNAL_SERVER_ERROR.into_response()),
            "500"
        );
        assert_eq!(method_label(&Method::from_bytes(b"BREW").unwrap()), "other");
    }

    /// The `prometheus` crate finds a series by a hash of its label values run together,
    /// without a separator: two different triples must never run together the same way.
    #[test]
    fn no_two_label_triples_run_together_alike() {
        let routes: Vec<&str> = ROUTES
            .iter()
            .map(|(_, path)| *path)
            .chain([UNMATCHED])
            .collect();
        let methods = [
            "get", "post", "delete", "head", "put", "patch", "options", "other",
        ];
        let statuses = (100..600).filter_map(|s| StatusCode::from_u16(s).ok());
        let outcomes: Vec<String> = ErrorCode::ALL
            .iter()
            .map(|c| c.as_str().to_owned())
            .chain(["ok".to_owned()])
            .chain(statuses.map(|s| s.as_str().to_owned()))
            .collect();
        let mut seen = HashMap::new();
        for route in &routes {
            for method in methods {
                for outcome in &outcomes {
                    let triple = (*route, method, outcome.as_str());
                    let joined = format!("{route}{method}{outcome}");
                    if let Some(earlier) = seen.insert(joined, triple) {
                        assert_eq!(earlier, triple, "two triples run together alike");
                    }
                }
            }
        }
    }
}
