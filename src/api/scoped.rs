//! The one place where a `/v1` call meets its caller's scope: the extractors that
//! authenticate a call ([`Caller`]) and a call on a name ([`Named`]), and the checks of a
//! listing's prefix and of an acquire's priority. A call beyond its token's scope gets
//! `403 forbidden`, naming the limit it crossed. The admin token, an `--api-token` and a call
//! without a token on an open service are unscoped.
//!
//! Every route on a named resource takes [`Named`] (or, for a resource other than a lock,
//! calls [`Caller::may_use`] on its name), so no such route can forget the check.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use super::auth::{Caller, Role};
use super::error::{ApiError, ErrorCode};
use super::extract::LockPath;
use super::AppState;
use crate::audit::Actor;
use crate::model::{LockName, Priority};
use crate::scope::{Prefixes, Scope};

fn forbidden(message: String) -> ApiError {
    ApiError::new(ErrorCode::Forbidden, message)
}

impl Caller {
    /// The caller's scope; `None` when it has no limits.
    fn scope(&self) -> Option<&Scope> {
        let token = self.token.as_deref().filter(|_| self.role == Role::User)?;
        Some(&token.scope).filter(|scope| !scope.is_unlimited())
    }

    /// Whether the caller may make a call on `name`: one pass over its prefixes.
    pub fn may_use(&self, name: &str) -> Result<(), ApiError> {
        match self.scope().and_then(|s| s.prefixes.as_deref()) {
            Some(prefixes) if !prefixes.covers(name) => Err(forbidden(format!(
                "'{name}' is outside this token's prefixes ({prefixes})"
            ))),
            _ => Ok(()),
        }
    }

    /// Whether the caller may list (or follow) the names that start with `prefix`, and if
    /// so the prefixes a listing must keep to (`None`: every name). A prefix that no name
    /// in scope starts with is refused; a broader one (the empty prefix included) is
    /// answered with the names in scope only.
    pub fn may_list(&self, prefix: &str) -> Result<Option<Arc<Prefixes>>, ApiError> {
        match self.scope().and_then(|s| s.prefixes.as_ref()) {
            Some(prefixes) if !prefixes.reaches(prefix) => Err(forbidden(format!(
                "prefix '{prefix}' is outside this token's prefixes ({prefixes})"
            ))),
            within => Ok(within.cloned()),
        }
    }

    /// Whether the caller may acquire at `priority`.
    pub fn may_acquire_at(&self, priority: Priority) -> Result<(), ApiError> {
        match self.scope().and_then(|s| s.max_priority) {
            Some(max) if priority.get() > max => Err(forbidden(format!(
                "priority {} is above this token's max_priority ({max})",
                priority.get()
            ))),
            _ => Ok(()),
        }
    }

    /// The audit trail's name for the caller: the role, the token by a digest prefix (never
    /// the token), and the token's name from the token file.
    pub fn actor(&self, request_id: Option<String>) -> Actor {
        let role = match (self.role, &self.presented) {
            (Role::Admin, _) => "admin",
            (Role::User, Some(_)) => "api",
            (Role::User, None) => "none",
        };
        let name = self.token.as_ref().and_then(|t| t.name.clone());
        Actor::of_digest(role, self.presented.as_ref(), name, request_id)
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &AppState) -> Result<Self, ApiError> {
        app.auth.caller(&parts.headers)
    }
}

/// A call on one lock: the caller (authenticated first), and the lock's name (valid, and in
/// the caller's scope).
pub struct Named {
    pub caller: Caller,
    pub name: LockName,
}

impl FromRequestParts<AppState> for Named {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &AppState) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, app).await?;
        let LockPath(name) = LockPath::from_request_parts(parts, app).await?;
        caller.may_use(name.as_str())?;
        Ok(Named { caller, name })
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use axum::http::header::AUTHORIZATION;
    use axum::http::HeaderMap;

    use super::*;
    use crate::api::auth::Auth;

    const FILE: &str = r#"
[[token]]
name = "ci"
secret = "ci-secret"
prefixes = ["ci/", "builds"]
max_priority = 10
"#;

    fn auth_with_file(text: &str) -> (Auth, tempfile::NamedTempFile) {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(text.as_bytes()).unwrap();
        let auth = Auth::new(&["plain".into()], Some("root"))
            .with_token_file(file.path())
            .unwrap();
        (auth, file)
    }

    fn call(auth: &Auth, token: Option<&str>) -> Result<Caller, ApiError> {
        let mut headers = HeaderMap::new();
        if let Some(token) = token {
            let value = format!("Bearer {token}").parse().unwrap();
            headers.insert(AUTHORIZATION, value);
        }
        auth.caller(&headers)
    }

    fn refusal(result: Result<impl Sized, ApiError>) -> String {
        let error = result.err().expect("refused");
        assert_eq!(error.code, ErrorCode::Forbidden);
        error.message
    }

    #[test]
    fn a_scoped_token_is_held_to_its_prefixes_and_priority() {
        let (auth, _file) = auth_with_file(FILE);
        let ci = call(&auth, Some("ci-secret")).unwrap();
        assert!(ci.may_use("ci/x").is_ok() && ci.may_use("builds").is_ok());
        assert_eq!(
            refusal(ci.may_use("ci2/x")),
            "'ci2/x' is outside this token's prefixes (ci/, builds)"
        );
        assert!(ci.may_acquire_at(Priority::new(10).unwrap()).is_ok());
        assert_eq!(
            refusal(ci.may_acquire_at(Priority::new(11).unwrap())),
            "priority 11 is above this token's max_priority (10)"
        );
        assert!(ci.may_list("ci/").unwrap().is_some());
        assert!(ci.may_list("").unwrap().is_some(), "filtered to the scope");
        assert_eq!(
            refusal(ci.may_list("other")),
            "prefix 'other' is outside this token's prefixes (ci/, builds)"
        );
        let actor = ci.actor(Some("r1".into()));
        assert_eq!((actor.role, actor.token.as_deref()), ("api", Some("ci")));
        assert_eq!(
            actor.credential,
            Some(crate::audit::credential_id("ci-secret"))
        );
    }

    #[test]
    fn the_admin_and_flag_tokens_are_never_scoped() {
        let (auth, _file) = auth_with_file(FILE);
        for token in ["root", "plain"] {
            let caller = call(&auth, Some(token)).unwrap();
            assert!(caller.may_use("anything").is_ok());
            assert!(caller.may_list("x").unwrap().is_none());
            assert!(caller
                .may_acquire_at(Priority::new(2147483646).unwrap())
                .is_ok());
        }
        assert_eq!(call(&auth, Some("root")).unwrap().actor(None).role, "admin");
    }

    #[test]
    fn a_token_file_closes_the_service_even_while_it_lists_none() {
        let (auth, file) = auth_with_file("");
        assert_eq!(call(&auth, None).unwrap_err().code, ErrorCode::Unauthorized);
        assert!(call(&auth, Some("ci-secret")).is_err());
        std::fs::write(file.path(), FILE).unwrap();
        assert_eq!(auth.reload(), Some(Ok(1)));
        assert!(call(&auth, Some("ci-secret")).is_ok(), "reloaded");
        std::fs::write(file.path(), "[[token]]\nsecret = \"root\"\n").unwrap();
        let error = auth.reload().unwrap().unwrap_err();
        assert!(
            error.contains("line 1: this token is the admin token"),
            "{error}"
        );
        assert!(
            call(&auth, Some("ci-secret")).is_ok(),
            "the old tokens stay"
        );
        assert_eq!(auth.token_file().map(|(_, n)| n), Some(1));
        assert_eq!(Auth::new(&[], None).reload(), None);
    }
}
