//! The audit trail: who did what to which lock, written as one JSON object per line.
//!
//! This module owns the record's shape, the caller's identity as the trail names it
//! ([`Actor`]) and where the lines go ([`AuditLog`]): the `lockwarden::audit` tracing
//! target on stderr, or a file given with `--audit-log`. The API layer builds the actor;
//! the service decides what is worth a record.
//!
//! Keeps the audit trail of I6 (DESIGN.md, "Invariants"): every use of the admin's powers is
//! written here.

use crate::resource::Resource;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use serde::Serialize;
use sha2::{Digest, Sha256};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use tracing::{info, warn};

/// Who made a call, as the audit trail names it. Never holds a token: only the role and a
/// prefix of the token's SHA-256, enough to tell credentials apart and to match one an
/// operator holds, too short to be worth anything to a reader of the log.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Actor {
    /// `admin`, `api` (a caller with an API token, or any token on an open service) or
    /// `none` (no token).
    pub role: &'static str,
    /// `sha256:` and the first 12 hex digits of the token's digest; `None` without a token.
    pub credential: Option<String>,
    /// The `x-request-id` of the call, to find its log lines.
    pub request_id: Option<String>,
    /// The token's `name` in the token file (`--token-file`), when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

impl Actor {
    pub fn new(role: &'static str, token: Option<&str>, request_id: Option<String>) -> Self {
        let digest: Option<[u8; 32]> = token.map(|t| Sha256::digest(t.as_bytes()).into());
        Actor::of_digest(role, digest.as_ref(), None, request_id)
    }

    /// The actor whose token has the SHA-256 `digest` and, in the token file, `name`.
    pub fn of_digest(
        role: &'static str,
        digest: Option<&[u8; 32]>,
        name: Option<String>,
        request_id: Option<String>,
    ) -> Self {
        Actor {
            role,
            credential: digest.map(credential_of),
            request_id,
            token: name,
        }
    }
}

/// How the trail names a token: a short prefix of its digest.
pub fn credential_id(token: &str) -> String {
    credential_of(&Sha256::digest(token.as_bytes()).into())
}

fn credential_of(digest: &[u8; 32]) -> String {
    let hex: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The holder an action took the lock from.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Affected {
    pub owner: String,
    pub fencing_token: Option<u64>,
}

/// One line of the trail.
#[derive(Clone, Debug, Serialize)]
pub struct AuditRecord<'a> {
    /// `sre_override`, `force_release` or `preemption_takeover`.
    pub action: &'static str,
    pub lock: &'a str,
    /// `election` when `lock` names an election; absent for a lock.
    #[serde(skip_serializing_if = "Resource::is_lock")]
    pub resource: Resource,
    pub actor: &'a Actor,
    /// The owner the caller acquires for (absent for a force release).
    pub owner: Option<&'a str>,
    pub priority: Option<u32>,
    pub affected: Option<Affected>,
    /// The request's `message`.
    pub reason: Option<&'a str>,
    pub outcome: &'a str,
}

/// Where the trail goes.
pub enum AuditLog {
    /// The `lockwarden::audit` tracing target (stderr), at level info.
    Tracing,
    /// A file opened for append. Each line is one `write` on an unbuffered file, so it is
    /// flushed as it is written and lines from concurrent calls never interleave.
    File(Mutex<File>),
}

impl AuditLog {
    /// The trail in `path` (created if missing, appended to otherwise), or on stderr.
    pub fn open(path: Option<&Path>) -> Result<AuditLog, String> {
        let Some(path) = path else {
            return Ok(AuditLog::Tracing);
        };
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map(|file| AuditLog::File(Mutex::new(file)))
            .map_err(|e| format!("cannot open the audit log {}: {e}", path.display()))
    }

    pub fn record(&self, record: &AuditRecord) {
        let line = line_of(record, OffsetDateTime::now_utc());
        match self {
            AuditLog::Tracing => info!(target: "lockwarden::audit", audit = %line, "audit"),
            AuditLog::File(file) => {
                // A short blocking write: an audit record is rare (admin actions and
                // takeovers), and losing it to a full queue would defeat the trail.
                let mut file = file.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                if let Err(error) = file.write_all(format!("{line}\n").as_bytes()) {
                    warn!(%error, audit = %line, "could not write the audit log");
                }
            }
        }
    }
}

/// The record as one JSON line, with its time. serde_json escapes C0 control characters, so
/// no string of the caller's can end the line; every other character that JSON allows raw
/// but that could forge or hide text where the line is shown (DEL and C1 controls, U+2028
/// and U+2029, bidirectional-text controls: `model::is_unsafe_char`) is escaped as well.
fn line_of(record: &AuditRecord, at: OffsetDateTime) -> String {
    let time = at.format(&Rfc3339).unwrap_or_default();
    let mut value = serde_json::to_value(record).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        object.insert("time".into(), time.into());
    }
    let mut line = String::new();
    for c in value.to_string().chars() {
        if crate::model::is_unsafe_char(c) {
            line.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            line.push(c);
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_names_the_credential_by_digest_and_stays_one_line() {
        let actor = Actor::new("admin", Some("s3cret-token"), Some("req-1".into()));
        let record = AuditRecord {
            action: "force_release",
            lock: "a/b",
            resource: Resource::Lock,
            actor: &actor,
            owner: None,
            priority: None,
            affected: Some(Affected {
                owner: "w\"1".into(),
                fencing_token: Some(7),
            }),
            reason: Some("line\nbreak\u{2028}here"),
            outcome: "released",
        };
        let line = line_of(&record, OffsetDateTime::UNIX_EPOCH);
        assert!(!line.contains('\n') && !line.contains('\u{2028}'), "{line}");
        assert!(!line.contains("s3cret"), "{line}");
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(value["time"], "1970-01-01T00:00:00Z");
        assert_eq!(value["actor"]["credential"], credential_id("s3cret-token"));
        assert_eq!(value["affected"]["fencing_token"], 7);
        assert_eq!(value["reason"], "line\nbreak\u{2028}here");
        assert_eq!(credential_id("x").len(), "sha256:".len() + 12);
    }
}
