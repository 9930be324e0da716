//! The token file (`serve --token-file`): API tokens, each with an optional name and scope,
//! in TOML. This module owns the format and its checks; `auth` reads the file at start and
//! again on SIGHUP.
//!
//! ```toml
//! [[token]]
//! name = "ci"                   # optional; the audit trail's actor.token
//! secret = "…"                  # the token as sent in Authorization: Bearer …
//! prefixes = ["ci/", "builds"]  # optional; the names it may use
//! max_priority = 10             # optional; the highest priority it may acquire at
//!
//! [[token]]
//! sha256 = "9f86d0…"            # instead of secret: the hex SHA-256 of the token
//! ```
//!
//! Every error names the line it is on. No token of the file may be the admin token or one
//! given with `--api-token` (it would have two scopes), nor appear twice, nor share a name.

use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use sha2::{Digest, Sha256};
use toml::Spanned;

use super::auth::ApiToken;
use crate::model::Priority;
use crate::scope::{NamePrefix, Prefixes, Scope};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    token: Vec<Spanned<Entry>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: Option<Spanned<String>>,
    secret: Option<Spanned<String>>,
    sha256: Option<Spanned<String>>,
    prefixes: Option<Spanned<Vec<Spanned<String>>>>,
    max_priority: Option<Spanned<i64>>,
}

/// A token the file may not repeat, with what to call it in the message.
pub struct Reserved<'a> {
    pub digest: [u8; 32],
    pub what: &'a str,
}

/// An error at a byte offset of the file's text.
type AtOffset = (usize, String);

/// Reads and checks the file at `path`; an error names the file and the line.
pub fn load(path: &Path, reserved: &[Reserved]) -> Result<Vec<Arc<ApiToken>>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the token file {}: {e}", path.display()))?;
    parse(&text, reserved).map_err(|(offset, why)| {
        let line = text[..offset.min(text.len())].matches('\n').count() + 1;
        format!("token file {}, line {line}: {why}", path.display())
    })
}

fn parse(text: &str, reserved: &[Reserved]) -> Result<Vec<Arc<ApiToken>>, AtOffset> {
    let file: File = toml::from_str(text).map_err(|e| {
        let at = e.span().map_or(0, |span| span.start);
        (at, e.message().trim_end().to_owned())
    })?;
    let mut tokens: Vec<Arc<ApiToken>> = Vec::with_capacity(file.token.len());
    for entry in file.token {
        let at = entry.span().start;
        let token = entry.into_inner().check(at)?;
        if let Some(taken) = reserved.iter().find(|r| r.digest == token.digest) {
            return Err((at, format!("this token is {}", taken.what)));
        }
        if tokens.iter().any(|t| t.digest == token.digest) {
            return Err((at, "this token is listed twice".into()));
        }
        if token.name.is_some() && tokens.iter().any(|t| t.name == token.name) {
            return Err((at, "another token has this name".into()));
        }
        tokens.push(Arc::new(token));
    }
    Ok(tokens)
}

impl Entry {
    /// The token, or what is wrong with it; `at` is where its table starts.
    fn check(self, at: usize) -> Result<ApiToken, AtOffset> {
        let digest = match (self.secret, self.sha256) {
            (Some(secret), None) => {
                let start = secret.span().start;
                check_secret(secret.get_ref()).map_err(|why| (start, why))?;
                Sha256::digest(secret.get_ref().as_bytes()).into()
            }
            (None, Some(hex)) => {
                let start = hex.span().start;
                parse_digest(hex.get_ref()).ok_or_else(|| {
                    (
                        start,
                        "sha256 must be 64 hex digits: the token's SHA-256".into(),
                    )
                })?
            }
            (Some(_), Some(_)) => return Err((at, "give secret or sha256, not both".into())),
            (None, None) => return Err((at, "a token needs secret or sha256".into())),
        };
        let name = match self.name {
            Some(name) => {
                let start = name.span().start;
                let name = name.into_inner();
                check_name(&name).map_err(|why| (start, why))?;
                Some(name)
            }
            None => None,
        };
        let prefixes = match self.prefixes {
            Some(list) => {
                let start = list.span().start;
                let parsed = list
                    .into_inner()
                    .into_iter()
                    .map(|p| {
                        let start = p.span().start;
                        NamePrefix::parse(p.get_ref()).map_err(|why| (start, why))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Some(Arc::new(Prefixes::new(parsed).map_err(|why| (start, why))?))
            }
            None => None,
        };
        let max_priority = match self.max_priority {
            Some(max) => {
                let value = *max.get_ref();
                let ok = Priority::new(value)
                    .ok()
                    .filter(|p| *p != Priority::OVERRIDE);
                Some(ok.map(Priority::get).ok_or_else(|| {
                    (
                        max.span().start,
                        format!(
                            "max_priority {value} is not between 0 and 2147483646 (2147483647, \
                             the SRE override, needs the admin token)"
                        ),
                    )
                })?)
            }
            None => None,
        };
        Ok(ApiToken {
            digest,
            name,
            scope: Scope {
                prefixes,
                max_priority,
            },
        })
    }
}

/// A secret must be sendable as it is in `Authorization: Bearer …`, which is trimmed.
fn check_secret(secret: &str) -> Result<(), String> {
    if secret.trim().is_empty() {
        return Err("secret is empty".into());
    }
    if secret.trim() != secret {
        return Err("secret starts or ends with white space, which a bearer token cannot".into());
    }
    if !secret.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
        return Err("secret must be printable ASCII, as a bearer token is".into());
    }
    Ok(())
}

fn parse_digest(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut digest = [0u8; 32];
    for (byte, at) in digest.iter_mut().zip((0..64).step_by(2)) {
        *byte = u8::from_str_radix(&hex[at..at + 2], 16).ok()?;
    }
    Some(digest)
}

fn check_name(name: &str) -> Result<(), String> {
    let ok = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "name {name:?} must be 1 to 64 characters of letters, digits, '.', '_' and '-'"
        ))
    }
}

#[cfg(test)]
#[path = "token_file_tests.rs"]
mod tests;
