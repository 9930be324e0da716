//! What a guard holds: a lock, the leadership of an election, or a permit of a semaphore.
//! All are kept the same way (an acquire retried with one `request_id`, renewals, the event
//! stream); they differ in their paths, their field names, and how an
//! answer shows the holder. An answer about an election or a semaphore is judged through the
//! lock view it amounts to (`ElectionInfo::as_lock`, `SemaphoreInfo::as_lock` of the
//! guard's own permit).

use serde_json::Value;

use crate::call::encode;
use crate::events::Event;
use crate::permit::SemaphoreInfo;
use crate::types::{ElectionInfo, FencingToken, LockInfo};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Lock,
    Election,
    /// A permit of a semaphore of this many.
    Semaphore(u32),
}

impl Kind {
    /// The path of `action` on `name` (`""`: the resource itself).
    pub fn path(self, name: &str, action: &str) -> String {
        let root = match self {
            Kind::Lock => "/v1/locks",
            Kind::Election => "/v1/elections",
            Kind::Semaphore(_) => "/v1/semaphores",
        };
        match action {
            "" => format!("{root}/{}", encode(name)),
            _ => format!("{root}/{}/{action}", encode(name)),
        }
    }

    /// The action that acquires, and the one that lets go.
    pub fn acquire(self) -> &'static str {
        match self {
            Kind::Lock | Kind::Semaphore(_) => "acquire",
            Kind::Election => "campaign",
        }
    }

    pub fn release(self) -> &'static str {
        match self {
            Kind::Lock | Kind::Semaphore(_) => "release",
            Kind::Election => "resign",
        }
    }

    /// The acquire body's names for the owner and its message.
    pub fn owner_and_message(self) -> (&'static str, &'static str) {
        match self {
            Kind::Lock | Kind::Semaphore(_) => ("owner", "message"),
            Kind::Election => ("candidate", "value"),
        }
    }

    /// The grant's name for its fencing token.
    pub fn token_field(self) -> &'static str {
        match self {
            Kind::Lock | Kind::Semaphore(_) => "fencing_token",
            Kind::Election => "term",
        }
    }

    /// A semaphore's limit, which its acquire sends.
    pub fn limit(self) -> Option<u32> {
        match self {
            Kind::Semaphore(limit) => Some(limit),
            _ => None,
        }
    }

    /// The grant of `token` as a stream's event shows it (the event has parsed it already).
    pub fn view_of_event(self, event: &Event, token: FencingToken) -> Option<LockInfo> {
        match self {
            Kind::Lock => event.lock.clone(),
            Kind::Election => event.election.as_ref().map(ElectionInfo::as_lock),
            Kind::Semaphore(_) => event.semaphore.as_ref().map(|s| s.as_lock(token)),
        }
    }

    /// What an answer shows of the grant of `token` (a lock's or an election's holder).
    pub fn view(self, body: &Value, token: FencingToken) -> Option<LockInfo> {
        match self {
            Kind::Lock => serde_json::from_value(body.get("lock")?.clone()).ok(),
            Kind::Election => {
                let election: ElectionInfo =
                    serde_json::from_value(body.get("election")?.clone()).ok()?;
                Some(election.as_lock())
            }
            Kind::Semaphore(_) => {
                let semaphore: SemaphoreInfo =
                    serde_json::from_value(body.get("semaphore")?.clone()).ok()?;
                Some(semaphore.as_lock(token))
            }
        }
    }
}
