//! Bearer-token authentication: API tokens, the admin role, and the `/metrics` token.
//!
//! Tokens are compared through their SHA-256 digests with a constant-time equality, and every
//! configured token is compared on every call, so timing reveals neither a token nor which
//! one matched.
//!
//! Keeps I6 (DESIGN.md, "Invariants"): only the admin token makes a caller admin (`require_admin`).

use axum::http::header::AUTHORIZATION;
use axum::http::HeaderMap;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::error::{ApiError, ErrorCode};
use crate::audit::Actor;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    User,
    Admin,
}

#[derive(Clone, Default)]
pub struct Auth {
    api_tokens: Vec<[u8; 32]>,
    admin_token: Option<[u8; 32]>,
    metrics_token: Option<[u8; 32]>,
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn unauthorized(message: &str) -> ApiError {
    ApiError::new(ErrorCode::Unauthorized, message)
}

impl Auth {
    pub fn new(api_tokens: &[String], admin_token: Option<&str>) -> Self {
        Auth {
            api_tokens: api_tokens.iter().map(|t| digest(t)).collect(),
            admin_token: admin_token.map(digest),
            metrics_token: None,
        }
    }

    /// With a token, `/metrics` needs it; without one, `/metrics` is open.
    pub fn with_metrics_token(mut self, token: Option<&str>) -> Self {
        self.metrics_token = token.map(digest);
        self
    }

    /// Whether this call may read `/metrics`. Only the metrics token opens it (not the API
    /// or admin tokens): a scraper's credential should open nothing else, and vice versa.
    pub fn metrics_reader(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        let Some(expected) = self.metrics_token else {
            return Ok(());
        };
        let presented = bearer(headers)?
            .ok_or_else(|| unauthorized("/metrics needs an Authorization: Bearer token"))?;
        if bool::from(expected.ct_eq(&digest(presented))) {
            Ok(())
        } else {
            Err(unauthorized("unknown token"))
        }
    }

    /// Who is calling. Without API tokens configured, a call without a token is an ordinary
    /// caller; a token that is presented must be a known one.
    pub fn caller(&self, headers: &HeaderMap) -> Result<Role, ApiError> {
        let Some(token) = bearer(headers)? else {
            return if self.api_tokens.is_empty() {
                Ok(Role::User)
            } else {
                Err(unauthorized(
                    "this call needs an Authorization: Bearer token",
                ))
            };
        };
        let presented = digest(token);
        let is_admin = self
            .admin_token
            .is_some_and(|admin| bool::from(admin.ct_eq(&presented)));
        let is_user = self.api_tokens.iter().fold(false, |found, known| {
            found | bool::from(known.ct_eq(&presented))
        });
        match (is_admin, is_user) {
            (true, _) => Ok(Role::Admin),
            (false, true) => Ok(Role::User),
            (false, false) => Err(unauthorized("unknown token")),
        }
    }
}

impl Auth {
    /// The audit trail's name for a caller already resolved to `role` from `headers`: the
    /// role, and the token by a digest prefix (never the token).
    pub fn actor(&self, role: Role, headers: &HeaderMap, request_id: Option<String>) -> Actor {
        let token = bearer(headers).ok().flatten();
        let name = match (role, token) {
            (Role::Admin, _) => "admin",
            (Role::User, Some(_)) => "api",
            (Role::User, None) => "none",
        };
        Actor::new(name, token, request_id)
    }
}

/// The bearer token of `Authorization`, `None` without the header; a malformed header is
/// refused.
fn bearer(headers: &HeaderMap) -> Result<Option<&str>, ApiError> {
    let Some(value) = headers.get(AUTHORIZATION) else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(Some)
        .ok_or_else(|| unauthorized("the Authorization header must be 'Bearer <token>'"))
}

pub fn require_admin(role: Role, what: &str) -> Result<(), ApiError> {
    match role {
        Role::Admin => Ok(()),
        Role::User => Err(ApiError::new(
            ErrorCode::Forbidden,
            format!("{what} needs the admin token"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(auth: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(value) = auth {
            headers.insert(AUTHORIZATION, value.parse().unwrap());
        }
        headers
    }

    #[test]
    fn open_service_accepts_anonymous_callers_but_not_unknown_tokens() {
        let auth = Auth::new(&[], Some("root"));
        assert_eq!(auth.caller(&headers(None)).unwrap(), Role::User);
        assert_eq!(
            auth.caller(&headers(Some("Bearer root"))).unwrap(),
            Role::Admin
        );
        assert!(auth.caller(&headers(Some("Bearer nope"))).is_err());
        assert!(auth.caller(&headers(Some("Basic abc"))).is_err());
    }

    #[test]
    fn the_metrics_token_alone_opens_metrics_when_set() {
        let open = Auth::new(&["t1".into()], Some("root"));
        assert!(open.metrics_reader(&headers(None)).is_ok());
        let closed = open.with_metrics_token(Some("m"));
        assert!(closed.metrics_reader(&headers(Some("Bearer m"))).is_ok());
        for refused in [
            None,
            Some("Bearer t1"),
            Some("Bearer root"),
            Some("Bearer "),
            Some("m"),
        ] {
            assert!(
                closed.metrics_reader(&headers(refused)).is_err(),
                "{refused:?}"
            );
        }
    }

    #[test]
    fn closed_service_needs_a_known_token() {
        let auth = Auth::new(&["t1".into(), "t2".into()], Some("root"));
        assert!(auth.caller(&headers(None)).is_err());
        assert_eq!(
            auth.caller(&headers(Some("Bearer t2"))).unwrap(),
            Role::User
        );
        assert_eq!(
            auth.caller(&headers(Some("Bearer root"))).unwrap(),
            Role::Admin
        );
        assert!(auth.caller(&headers(Some("Bearer t3"))).is_err());
    }
}
