//! Bearer-token authentication: API tokens (from `--api-token`, unscoped, and from
//! `--token-file`, each with its scope), the admin role, and the `/metrics` token.
//!
//! Tokens are compared through their SHA-256 digests with a constant-time equality, and every
//! configured token is compared on every call, so timing reveals neither a token nor which
//! one matched. The token file's tokens are swapped as a whole on reload, so a call sees one
//! version of the file or the next, never a mix.
//!
//! Keeps I6 (DESIGN.md, "Invariants"): only the admin token makes a caller admin (`require_admin`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use axum::http::header::AUTHORIZATION;
use axum::http::HeaderMap;
use sha2::{Digest, Sha256};
use subtle::{ConditionallySelectable, ConstantTimeEq};

use super::error::{ApiError, ErrorCode};
use super::token_file::{self, Reserved};
use crate::scope::Scope;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    User,
    Admin,
}

/// One API token: its digest, the name it was given in the token file, and its scope.
#[derive(Debug, PartialEq, Eq)]
pub struct ApiToken {
    pub digest: [u8; 32],
    pub name: Option<String>,
    pub scope: Scope,
}

/// Who is calling: the role, the API token that matched (none for the admin token, or
/// without a token on an open service), and the digest of the token presented.
#[derive(Clone, Debug)]
pub struct Caller {
    pub role: Role,
    pub token: Option<Arc<ApiToken>>,
    pub presented: Option<[u8; 32]>,
}

type Tokens = Arc<[Arc<ApiToken>]>;

/// The token file and its tokens as last read.
struct TokenFile {
    path: PathBuf,
    tokens: RwLock<Tokens>,
}

#[derive(Clone, Default)]
pub struct Auth {
    /// `--api-token`: unscoped.
    flags: Tokens,
    /// `--token-file`: with it, every call needs a token, even while the file lists none.
    file: Option<Arc<TokenFile>>,
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
        let flags = api_tokens.iter().map(|t| {
            Arc::new(ApiToken {
                digest: digest(t),
                name: None,
                scope: Scope::default(),
            })
        });
        Auth {
            flags: flags.collect(),
            file: None,
            admin_token: admin_token.map(digest),
            metrics_token: None,
        }
    }

    /// With a token, `/metrics` needs it; without one, `/metrics` is open.
    pub fn with_metrics_token(mut self, token: Option<&str>) -> Self {
        self.metrics_token = token.map(digest);
        self
    }

    /// Adds the tokens of the token file at `path`; an error names the file and the line.
    pub fn with_token_file(mut self, path: &Path) -> Result<Self, String> {
        let tokens = token_file::load(path, &self.reserved())?;
        self.file = Some(Arc::new(TokenFile {
            path: path.to_owned(),
            tokens: RwLock::new(tokens.into()),
        }));
        Ok(self)
    }

    /// Reads the token file again: on success its tokens replace the old ones, and the answer
    /// is how many there are; on an error the old ones stay. `None` without a token file.
    pub fn reload(&self) -> Option<Result<usize, String>> {
        let file = self.file.as_ref()?;
        Some(
            token_file::load(&file.path, &self.reserved()).map(|tokens| {
                let count = tokens.len();
                *file.tokens.write().unwrap_or_else(|p| p.into_inner()) = tokens.into();
                count
            }),
        )
    }

    /// The token file's path and how many tokens it holds now.
    pub fn token_file(&self) -> Option<(&Path, usize)> {
        self.file
            .as_ref()
            .map(|f| (f.path.as_path(), f.current().len()))
    }

    /// The tokens that the file may not hold.
    fn reserved(&self) -> Vec<Reserved<'static>> {
        let admin = self.admin_token.map(|digest| Reserved {
            digest,
            what: "the admin token (--admin-token), which cannot be scoped",
        });
        let flags = self.flags.iter().map(|t| Reserved {
            digest: t.digest,
            what: "also given with --api-token",
        });
        admin.into_iter().chain(flags).collect()
    }

    /// With a token, `/metrics` needs it; without one, `/metrics` is open. Only the metrics
    /// token opens it (not the API or admin tokens): a scraper's credential should open
    /// nothing else, and vice versa.
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

    /// Who is calling. Without API tokens configured (and no token file), a call without a
    /// token is an ordinary caller; a token that is presented must be a known one.
    pub fn caller(&self, headers: &HeaderMap) -> Result<Caller, ApiError> {
        let Some(token) = bearer(headers)? else {
            return if self.flags.is_empty() && self.file.is_none() {
                Ok(Caller {
                    role: Role::User,
                    token: None,
                    presented: None,
                })
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
        let from_file = self.file.as_ref().map(|f| f.current());
        let known = || {
            self.flags
                .iter()
                .chain(from_file.iter().flat_map(|t| t.iter()))
        };
        // Which token matched, chosen without a branch on any comparison.
        let mut matched = u32::MAX;
        for (i, token) in known().enumerate() {
            matched.conditional_assign(&(i as u32), token.digest.ct_eq(&presented));
        }
        let token = (matched != u32::MAX)
            .then(|| known().nth(matched as usize).cloned())
            .flatten();
        let role = match (is_admin, &token) {
            (true, _) => Role::Admin,
            (false, Some(_)) => Role::User,
            (false, None) => return Err(unauthorized("unknown token")),
        };
        Ok(Caller {
            role,
            token: token.filter(|_| role == Role::User),
            presented: Some(presented),
        })
    }
}

impl TokenFile {
    fn current(&self) -> Tokens {
        self.tokens
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
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
        assert_eq!(auth.caller(&headers(None)).unwrap().role, Role::User);
        assert_eq!(
            auth.caller(&headers(Some("Bearer root"))).unwrap().role,
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
            auth.caller(&headers(Some("Bearer t2"))).unwrap().role,
            Role::User
        );
        assert_eq!(
            auth.caller(&headers(Some("Bearer root"))).unwrap().role,
            Role::Admin
        );
        assert!(auth.caller(&headers(Some("Bearer t3"))).is_err());
    }
}
