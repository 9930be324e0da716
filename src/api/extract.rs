//! Request extractors that turn every malformed input into the API's error shape, never into
//! axum's default plain-text rejections.
//!
//! Keeps I15 (DESIGN.md, "Invariants") for request bodies: at most `MAX_BODY_BYTES`, and read
//! within the server's `BodyReadTimeout`, so a client slow to send its body is cut off.

use axum::body::Body;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::{ApiError, ErrorCode};
use crate::http_server::BodyReadTimeout;
use crate::model::LockName;

/// The largest request body accepted.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// The body read limit where the server sets none (a router served by other means).
const DEFAULT_BODY_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The `{name}` path segment, percent-decoded and validated.
pub struct LockPath(pub LockName);

impl<S: Send + Sync> FromRequestParts<S> for LockPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(raw) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|_| {
                ApiError::new(
                    ErrorCode::InvalidLockName,
                    "lock name is not valid percent-encoded UTF-8",
                )
            })?;
        LockName::parse(&raw)
            .map(LockPath)
            .map_err(|why| ApiError::new(ErrorCode::InvalidLockName, why))
    }
}

/// The query string, decoded into `T`.
pub struct QueryParams<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default();
        serde_urlencoded::from_str(query)
            .map(QueryParams)
            .map_err(|e| ApiError::invalid(format!("bad query string: {e}")))
    }
}

/// A JSON request body of at most [`MAX_BODY_BYTES`].
pub struct JsonBody<T>(pub T);

fn is_json(content_type: &str) -> bool {
    let mime = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))
}

fn too_large() -> ApiError {
    ApiError::new(
        ErrorCode::PayloadTooLarge,
        format!("request body is larger than {MAX_BODY_BYTES} bytes"),
    )
}

async fn read_body(body: Body) -> Result<axum::body::Bytes, ApiError> {
    axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|error| {
            let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&error);
            while let Some(e) = cause {
                if e.is::<http_body_util::LengthLimitError>() {
                    return too_large();
                }
                cause = e.source();
            }
            ApiError::invalid("could not read the request body")
        })
}

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, _: &S) -> Result<Self, ApiError> {
        let headers = request.headers();
        let content_type = headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if !is_json(content_type) {
            return Err(ApiError::new(
                ErrorCode::UnsupportedMediaType,
                "request body must be JSON (Content-Type: application/json)",
            ));
        }
        let declared = headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|len| len > MAX_BODY_BYTES as u64) {
            return Err(too_large());
        }
        // Bounded in time as a whole, so a client that trickles its body cannot hold the
        // connection (the server sets the limit; see `http_server`).
        let timeout = request
            .extensions()
            .get::<BodyReadTimeout>()
            .map_or(DEFAULT_BODY_READ_TIMEOUT, |t| t.0);
        let bytes = tokio::time::timeout(timeout, read_body(request.into_body()))
            .await
            .map_err(|_| {
                ApiError::new(
                    ErrorCode::RequestTimeout,
                    format!(
                        "the request body did not arrive within {} ms",
                        timeout.as_millis()
                    ),
                )
            })??;
        serde_json::from_slice(&bytes)
            .map(JsonBody)
            .map_err(|e| ApiError::invalid(format!("invalid JSON body: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::is_json;

    #[test]
    fn json_content_types() {
        assert!(is_json("application/json"));
        assert!(is_json("Application/JSON; charset=utf-8"));
        assert!(is_json("application/merge-patch+json"));
        assert!(!is_json("text/plain"));
        assert!(!is_json(""));
    }
}
