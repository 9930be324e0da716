//! Bearer-token authentication and the admin role.
//!
//! Tokens are compared through their SHA-256 digests with a constant-time equality, and every
//! configured token is compared on every call, so timing reveals neither a token nor which
//! one matched.

use axum::http::header::AUTHORIZATION;
use axum::http::HeaderMap;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::error::{ApiError, ErrorCode};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    User,
    Admin,
}

#[derive(Clone, Default)]
pub struct Auth {
    api_tokens: Vec<[u8; 32]>,
    admin_token: Option<[u8; 32]>,
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
        }
    }

    /// Who is calling. Without API tokens configured, a call without a token is an ordinary
    /// caller; a token that is presented must be a known one.
    pub fn caller(&self, headers: &HeaderMap) -> Result<Role, ApiError> {
        let Some(value) = headers.get(AUTHORIZATION) else {
            return if self.api_tokens.is_empty() {
                Ok(Role::User)
            } else {
                Err(unauthorized(
                    "this call needs an Authorization: Bearer token",
                ))
            };
        };
        let token = value
            .to_str()
            .ok()
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| unauthorized("the Authorization header must be 'Bearer <token>'"))?;
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
