//! The HTTP API (v1): routes, shared state, and the request/response shapes.

use std::sync::Arc;

use axum::routing::{get, post};
use axum::Router;

use crate::service::LockService;

pub mod auth;
pub mod dto;
pub mod election_dto;
mod elections;
pub mod error;
mod events;
pub mod extract;
mod handlers;
pub mod json_int;
mod metered;
mod queries;
mod queue;
mod refusals;
pub mod request_id;
pub mod scoped;
pub mod semaphore_dto;
mod semaphores;
pub mod token_file;
pub mod ui;

pub use handlers::OPENAPI;

#[derive(Clone)]
pub struct AppState {
    pub service: Arc<LockService>,
    /// The same rules over another root: elections (see `elections`).
    pub elections: Arc<LockService>,
    /// And semaphores (see `semaphores`).
    pub semaphores: Arc<LockService>,
    pub auth: auth::Auth,
    pub limits: dto::Limits,
    pub webhooks: WebhookPolicy,
    /// Seals lease and request ids before they go further (see `crate::seal`).
    pub sealer: crate::seal::Sealer,
    /// How often an event stream sends a heartbeat comment.
    pub event_heartbeat: std::time::Duration,
}

impl AppState {
    /// The service that keeps `resource`.
    pub fn service_of(&self, resource: crate::resource::Resource) -> &Arc<LockService> {
        match resource {
            crate::resource::Resource::Lock => &self.service,
            crate::resource::Resource::Election => &self.elections,
            crate::resource::Resource::Semaphore => &self.semaphores,
        }
    }
}

/// What the acquire handler checks a `notify_url` against.
#[derive(Clone, Copy, Debug)]
pub struct WebhookPolicy {
    /// A webhook secret is configured, so webhooks can be signed and sent.
    pub enabled: bool,
    pub allow_private: bool,
}

/// Every route, as (method, path) in OpenAPI's notation; a test checks the spec agrees.
pub const ROUTES: [(&str, &str); 34] = [
    ("get", "/v1/locks"),
    ("get", "/v1/locks/{name}"),
    ("delete", "/v1/locks/{name}"),
    ("get", "/v1/locks/{name}/queue"),
    ("post", "/v1/locks/{name}/acquire"),
    ("post", "/v1/locks/{name}/renew"),
    ("post", "/v1/locks/{name}/release"),
    ("get", "/v1/locks/{name}/validate"),
    ("get", "/v1/locks/{name}/events"),
    ("get", "/v1/events"),
    ("get", "/v1/elections"),
    ("get", "/v1/elections/{name}"),
    ("post", "/v1/elections/{name}/campaign"),
    ("post", "/v1/elections/{name}/proclaim"),
    ("post", "/v1/elections/{name}/renew"),
    ("post", "/v1/elections/{name}/resign"),
    ("get", "/v1/elections/{name}/validate"),
    ("get", "/v1/elections/{name}/events"),
    ("get", "/v1/semaphores"),
    ("get", "/v1/semaphores/{name}"),
    ("delete", "/v1/semaphores/{name}"),
    ("post", "/v1/semaphores/{name}/acquire"),
    ("post", "/v1/semaphores/{name}/renew"),
    ("post", "/v1/semaphores/{name}/release"),
    ("get", "/v1/semaphores/{name}/validate"),
    ("get", "/v1/semaphores/{name}/events"),
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("get", "/openapi.yaml"),
    ("get", "/metrics"),
    ("get", "/ui"),
    ("get", "/ui/{asset}"),
    ("get", "/"),
    ("get", "/ui/"),
];

pub fn router(state: AppState) -> Router {
    let metrics = state.service.metrics.clone();
    Router::new()
        .route("/v1/locks", get(handlers::list))
        .route(
            "/v1/locks/{name}",
            get(handlers::get_lock).delete(handlers::force_release),
        )
        .route("/v1/locks/{name}/acquire", post(handlers::acquire))
        .route("/v1/locks/{name}/renew", post(handlers::renew))
        .route("/v1/locks/{name}/release", post(handlers::release))
        .route("/v1/locks/{name}/queue", get(queue::lock_queue))
        .route("/v1/locks/{name}/validate", get(handlers::validate))
        .route("/v1/locks/{name}/events", get(events::lock_events))
        .route("/v1/events", get(events::prefix_events))
        .route("/v1/elections", get(elections::list))
        .route("/v1/elections/{name}", get(elections::get_election))
        .route("/v1/elections/{name}/campaign", post(elections::campaign))
        .route("/v1/elections/{name}/proclaim", post(elections::proclaim))
        .route("/v1/elections/{name}/renew", post(elections::renew))
        .route("/v1/elections/{name}/resign", post(elections::resign))
        .route("/v1/elections/{name}/validate", get(elections::validate))
        .route("/v1/elections/{name}/events", get(elections::events))
        .route("/v1/semaphores", get(semaphores::list))
        .route(
            "/v1/semaphores/{name}",
            get(semaphores::get_semaphore).delete(semaphores::force_release),
        )
        .route("/v1/semaphores/{name}/acquire", post(semaphores::acquire))
        .route("/v1/semaphores/{name}/renew", post(semaphores::renew))
        .route("/v1/semaphores/{name}/release", post(semaphores::release))
        .route("/v1/semaphores/{name}/validate", get(semaphores::validate))
        .route(
            "/v1/semaphores/{name}/events",
            get(events::semaphore_events),
        )
        .route("/healthz", get(handlers::healthz))
        .route("/readyz", get(handlers::readyz))
        .route("/openapi.yaml", get(handlers::openapi))
        .route("/metrics", get(handlers::metrics))
        .route("/ui", get(ui::page))
        .route("/ui/{asset}", get(ui::asset))
        .route("/", get(handlers::to_dashboard))
        .route("/ui/", get(handlers::to_dashboard))
        .fallback(handlers::not_found)
        .method_not_allowed_fallback(handlers::method_not_allowed)
        .with_state(state)
        // Applied route by route, where the route template (`MatchedPath`) is known.
        .layer(axum::middleware::from_fn_with_state(
            metrics,
            metered::layer,
        ))
        // Outermost, so that every response (errors and fallbacks too) carries the id.
        .layer(axum::middleware::from_fn(request_id::layer))
}
