//! What a guard holds: a lock, or the leadership of an election. Both are kept the same way
//! (an acquire retried with one `request_id`, renewals, the event stream); they differ in
//! their paths, their field names, and how an answer shows the holder. An answer about an
//! election is judged through the lock view it amounts to (`ElectionInfo::as_lock`).

use serde_json::Value;

use crate::call::encode;
use crate::events::Event;
use crate::types::{ElectionInfo, LockInfo};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Lock,
    Election,
}

impl Kind {
    /// The path of `action` on `name` (`""`: the resource itself).
    pub fn path(self, name: &str, action: &str) -> String {
        let root = match self {
            Kind::Lock => "/v1/locks",
            Kind::Election => "/v1/elections",
        };
        match action {
            "" => format!("{root}/{}", encode(name)),
            _ => format!("{root}/{}/{action}", encode(name)),
        }
    }

    /// The action that acquires, and the one that lets go.
    pub fn acquire(self) -> &'static str {
        match self {
            Kind::Lock => "acquire",
            Kind::Election => "campaign",
        }
    }

    pub fn release(self) -> &'static str {
        match self {
            Kind::Lock => "release",
            Kind::Election => "resign",
        }
    }

    /// The acquire body's names for the owner and its message.
    pub fn owner_and_message(self) -> (&'static str, &'static str) {
        match self {
            Kind::Lock => ("owner", "message"),
            Kind::Election => ("candidate", "value"),
        }
    }

    /// The grant's name for its fencing token.
    pub fn token_field(self) -> &'static str {
        match self {
            Kind::Lock => "fencing_token",
            Kind::Election => "term",
        }
    }

    /// The holder as a stream's event shows it (the event has parsed it already).
    pub fn view_of_event(self, event: &Event) -> Option<LockInfo> {
        match self {
            Kind::Lock => event.lock.clone(),
            Kind::Election => event.election.as_ref().map(ElectionInfo::as_lock),
        }
    }

    /// The holder as an answer shows it.
    pub fn view(self, body: &Value) -> Option<LockInfo> {
        match self {
            Kind::Lock => serde_json::from_value(body.get("lock")?.clone()).ok(),
            Kind::Election => {
                let election: ElectionInfo =
                    serde_json::from_value(body.get("election")?.clone()).ok()?;
                Some(election.as_lock())
            }
        }
    }
}
