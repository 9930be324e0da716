//! The dashboard: `GET /ui` (the page) and `GET /ui/{asset}` (its scripts and style sheet),
//! embedded in the binary so that serving it needs nothing beside the binary.
//!
//! The page holds no data of its own: it calls the JSON API (`/v1/...`) from the browser, with
//! the token the user types in, so it sees exactly what `curl` would. Every response carries a
//! strict Content-Security-Policy: scripts and styles only from these files (no inline code,
//! no `eval`), connections only back to this origin, and no framing.

use axum::extract::Path;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
};
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};

use super::error::{ApiError, ErrorCode};

/// No inline script or style, no plugins, no forms posted elsewhere, no framing, no `<base>`.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

const PAGE: &str = include_str!("../../ui/index.html");

/// Every asset, by the name it is served under (`/ui/{name}`).
pub const ASSETS: [(&str, &str, &str); 11] = [
    ("app.css", CSS, include_str!("../../ui/app.css")),
    ("app.js", JS, include_str!("../../ui/app.js")),
    ("api.js", JS, include_str!("../../ui/api.js")),
    ("sse.js", JS, include_str!("../../ui/sse.js")),
    ("format.js", JS, include_str!("../../ui/format.js")),
    ("list.js", JS, include_str!("../../ui/list.js")),
    ("lock.js", JS, include_str!("../../ui/lock.js")),
    ("release.js", JS, include_str!("../../ui/release.js")),
    ("catalog.js", JS, include_str!("../../ui/catalog.js")),
    ("semaphore.js", JS, include_str!("../../ui/semaphore.js")),
    ("election.js", JS, include_str!("../../ui/election.js")),
];

fn serve(content_type: &'static str, body: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    // Revalidated on every load: a new binary's page never runs with an old script.
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

pub async fn page() -> Response {
    serve(HTML, PAGE)
}

pub async fn asset(Path(name): Path<String>) -> Result<Response, ApiError> {
    ASSETS
        .iter()
        .find(|(asset, _, _)| *asset == name)
        .map(|(_, content_type, body)| serve(content_type, body))
        .ok_or_else(|| ApiError::new(ErrorCode::NotFound, "no such dashboard asset"))
}
