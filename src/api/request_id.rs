//! Request ids: every response carries `x-request-id`, and everything logged while a call is
//! handled is inside a `request` span that names it.
//!
//! The caller's id is kept when it is printable ASCII of at most 128 characters (what can go
//! into a header and a log line unaltered); any other, or none, is replaced by a UUID v4.

use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

pub const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The id of the call being handled, for handlers (the audit trail records it).
#[derive(Clone, Debug)]
pub struct RequestId(pub String);

/// Whether a caller's id is kept as it is.
fn acceptable(id: &str) -> bool {
    !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| (0x20..=0x7e).contains(&b))
}

pub async fn layer(mut request: Request, next: Next) -> Response {
    let id = request
        .headers()
        .get(&X_REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| acceptable(v))
        .map(str::to_owned)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let span = tracing::info_span!(
        "request",
        request_id = %id,
        method = %request.method(),
        path = %request.uri().path(),
    );
    request.extensions_mut().insert(RequestId(id.clone()));
    let mut response = next.run(request).instrument(span).await;
    // Printable ASCII always makes a valid header value.
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(X_REQUEST_ID, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::acceptable;

    #[test]
    fn only_short_printable_ascii_ids_are_kept() {
        assert!(acceptable("abc-123 x/y"));
        assert!(acceptable(&"a".repeat(128)));
        assert!(!acceptable(&"a".repeat(129)));
        assert!(!acceptable(""));
        assert!(!acceptable("tab\there"));
        assert!(!acceptable("zoë"));
    }
}
