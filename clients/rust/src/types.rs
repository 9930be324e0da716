//! The values the API speaks in: identifiers (as newtypes, so that a lease id is never
//! passed where a request id belongs), a lock's state as `LockInfo`, and a list page.

use std::fmt;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

/// The secret handle of one grant: whoever presents it may renew or release that lease.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LeaseId(String);

impl LeaseId {
    pub fn new(id: impl Into<String>) -> LeaseId {
        LeaseId(id.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for LeaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The fencing token of a grant (the zxid of the write that granted it). A protected
/// resource refuses writes that carry a token lower than one it has already seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FencingToken(pub u64);

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The idempotency key of one acquire: every retry of that acquire carries the same one,
/// so the service answers a retry with the grant it already made instead of a second one.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct RequestId(String);

impl RequestId {
    pub fn random() -> RequestId {
        RequestId(uuid::Uuid::new_v4().to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Whether a lock is held, as the service judged it when it answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LockState {
    Free,
    Held,
    Expired,
    /// A state this client does not know (a newer service).
    #[serde(other)]
    Unknown,
}

impl fmt::Display for LockState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LockState::Free => "free",
            LockState::Held => "held",
            LockState::Expired => "expired",
            LockState::Unknown => "unknown",
        })
    }
}

/// The caller that asked the holder to clean up (a higher priority that waits).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Requestor {
    pub owner: String,
    pub priority: u32,
    #[serde(default)]
    pub waiting_ms: Option<u64>,
    #[serde(default)]
    pub forceful: bool,
    #[serde(default)]
    pub requested_at: Option<String>,
    /// RFC 3339: when the holder's cleanup window ends.
    #[serde(default)]
    pub cleanup_deadline: Option<String>,
}

impl Requestor {
    /// The cleanup deadline as a wall-clock time, when the service gave one.
    pub fn cleanup_deadline(&self) -> Option<SystemTime> {
        let text = self.cleanup_deadline.as_deref()?;
        let at = time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
            .ok()?;
        let nanos = at.unix_timestamp_nanos();
        let nanos = u64::try_from(nanos).ok()?;
        Some(SystemTime::UNIX_EPOCH + Duration::from_nanos(nanos))
    }
}

/// A lock as the service shows it (`GET /v1/locks/{name}` and inside most answers).
/// Fields the service adds later are ignored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LockInfo {
    pub name: String,
    pub state: LockState,
    #[serde(default)]
    pub owner: Option<String>,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub priority: u32,
    #[serde(default)]
    pub lease_ms: Option<u64>,
    #[serde(default)]
    pub acquired_at: Option<String>,
    #[serde(default)]
    pub expires_at: Option<String>,
    #[serde(default)]
    pub remaining_ms: Option<u64>,
    #[serde(default)]
    pub cleanup_ms: u64,
    #[serde(default)]
    pub waiting_ms: Option<u64>,
    #[serde(default)]
    pub forceful: bool,
    #[serde(default)]
    pub fencing_token: Option<FencingToken>,
    #[serde(default)]
    pub requestor: Option<Requestor>,
    #[serde(default)]
    pub waiters: u64,
    /// While the lease has ended but may not be taken over yet (the service's takeover
    /// margin, `--max-clock-skew-ms`): when it may be.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub takeover_at: Option<String>,
}

impl LockInfo {
    /// Whether this shows the lease granted with `token` as still held.
    pub fn held_with(&self, token: FencingToken) -> bool {
        self.state == LockState::Held && self.fencing_token == Some(token)
    }
}

/// The live leader of an election.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Leader {
    pub candidate: String,
    #[serde(default)]
    pub value: String,
    /// The fencing token of the win: terms only grow.
    #[serde(default)]
    pub term: Option<FencingToken>,
    #[serde(default)]
    pub priority: u32,
    #[serde(default)]
    pub elected_at: Option<String>,
    #[serde(default)]
    pub expires_at: Option<String>,
    #[serde(default)]
    pub remaining_ms: Option<u64>,
}

/// An election as the service shows it (`GET /v1/elections/{name}` and inside its answers):
/// `leader` is `None` while nobody leads (a lease past its end leads nothing).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ElectionInfo {
    pub name: String,
    #[serde(default)]
    pub leader: Option<Leader>,
    /// The campaigns waiting.
    #[serde(default)]
    pub candidates: u64,
    /// A candidate of higher priority that asked the leader to hand over.
    #[serde(default)]
    pub requestor: Option<Requestor>,
}

impl ElectionInfo {
    /// The lock this election amounts to, for judging a leadership as a lease: held with
    /// the leader's term while it leads, free otherwise.
    pub(crate) fn as_lock(&self) -> LockInfo {
        let mut lock = LockInfo {
            name: self.name.clone(),
            state: LockState::Free,
            owner: None,
            message: String::new(),
            priority: 0,
            lease_ms: None,
            acquired_at: None,
            expires_at: None,
            remaining_ms: None,
            cleanup_ms: 0,
            waiting_ms: None,
            forceful: false,
            fencing_token: None,
            requestor: None,
            waiters: self.candidates,
            takeover_at: None,
        };
        if let Some(leader) = &self.leader {
            lock.state = LockState::Held;
            lock.owner = Some(leader.candidate.clone());
            lock.message = leader.value.clone();
            lock.priority = leader.priority;
            lock.fencing_token = leader.term;
            lock.remaining_ms = leader.remaining_ms;
            lock.expires_at = leader.expires_at.clone();
            lock.requestor = self.requestor.clone();
        }
        lock
    }
}

/// One page of `GET /v1/elections`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ElectionPage {
    pub elections: Vec<ElectionInfo>,
    #[serde(default)]
    pub next_cursor: Option<String>,
}

/// One page of `GET /v1/locks`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LockPage {
    pub locks: Vec<LockInfo>,
    #[serde(default)]
    pub next_cursor: Option<String>,
}

/// The answer to a force release (`DELETE /v1/locks/{name}`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ForceReleased {
    /// The lock as the force release left it: free, or handed to the next waiter.
    pub lock: LockInfo,
    /// Nobody held the lock, so nothing was released. (False from a service too old to
    /// say.)
    #[serde(default)]
    pub already_free: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_info_reads_the_service_shape_and_ignores_new_fields() {
        let info: LockInfo = serde_json::from_str(
            r#"{"name":"a/b","state":"held","owner":"me","message":"","priority":3,
                "lease_ms":2000,"acquired_at":"2024-01-01T00:00:00Z","expires_at":null,
                "remaining_ms":1999,"cleanup_ms":0,"waiting_ms":null,"forceful":false,
                "fencing_token":42,"waiters":1,"is_owner":true,"something_new":1,
                "requestor":{"owner":"boss","priority":9,"waiting_ms":100,"forceful":false,
                  "requested_at":"2024-01-01T00:00:01Z","cleanup_deadline":"2024-01-01T00:00:06.5Z"}}"#,
        )
        .unwrap();
        assert!(info.held_with(FencingToken(42)));
        assert!(!info.held_with(FencingToken(41)));
        let deadline = info.requestor.unwrap().cleanup_deadline().unwrap();
        let since_epoch = deadline.duration_since(SystemTime::UNIX_EPOCH).unwrap();
        assert_eq!(since_epoch.as_millis(), 1_704_067_206_500);
    }

    #[test]
    fn an_election_reads_as_the_lock_it_amounts_to() {
        let led: ElectionInfo = serde_json::from_str(
            r#"{"name":"e","leader":{"candidate":"c","value":"v","term":9,"priority":1,
                "elected_at":null,"expires_at":null,"remaining_ms":500},"candidates":2}"#,
        )
        .unwrap();
        let lock = led.as_lock();
        assert!(lock.held_with(FencingToken(9)));
        assert_eq!((lock.remaining_ms, lock.waiters), (Some(500), 2));
        let none: ElectionInfo =
            serde_json::from_str(r#"{"name":"e","leader":null,"candidates":0}"#).unwrap();
        assert!(!none.as_lock().held_with(FencingToken(9)));
    }

    #[test]
    fn an_unknown_state_does_not_fail_the_answer() {
        let info: LockInfo = serde_json::from_str(r#"{"name":"a","state":"frozen"}"#).unwrap();
        assert_eq!(info.state, LockState::Unknown);
    }
}
