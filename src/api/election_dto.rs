//! The JSON shapes of elections: the campaign and proclaim bodies, the Election a reader
//! sees, and what an election's event stream makes of a lock stream's events.
//!
//! An election is a lock whose holder is the leader: the candidate is the owner, the value
//! is the holder's message, the term is the fencing token. Only a live leader is shown: a
//! lease past its end is no leader, takeover margin or not (I17).

use serde::{Deserialize, Serialize};

use super::dto::{digest_of, rfc3339, AcquireBody, Limits};
use super::error::ApiError;
use super::json_int::{integer, optional_integer};
use crate::engine::{self, AcquireRequest};
use crate::record::{Expiry, RequestorInfo};
use crate::service::feed::EventType;
use crate::service::LockSnapshot;

/// The longest value a leader may proclaim, in characters, as a lock's message is counted
/// (JSON Schema's `maxLength` counts so too): 16 KiB of UTF-8 at most.
pub const MAX_VALUE_CHARS: usize = 4096;

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CampaignBody {
    pub candidate: String,
    #[serde(default)]
    pub value: String,
    #[serde(deserialize_with = "integer")]
    pub lease_ms: i64,
    #[serde(default, deserialize_with = "integer")]
    pub priority: i64,
    #[serde(default, deserialize_with = "integer")]
    pub cleanup_ms: i64,
    #[serde(default, deserialize_with = "optional_integer")]
    pub waiting_ms: Option<i64>,
    #[serde(default)]
    pub forceful: bool,
    #[serde(default)]
    pub notify_url: Option<String>,
    #[serde(default)]
    pub request_id: Option<String>,
    #[serde(default)]
    pub lease_id: Option<String>,
}

/// Every campaign field, in the order the contract lists them.
pub const CAMPAIGN_FIELDS: [&str; 10] = [
    "candidate",
    "value",
    "lease_ms",
    "priority",
    "cleanup_ms",
    "waiting_ms",
    "forceful",
    "notify_url",
    "request_id",
    "lease_id",
];

pub fn check_value(value: &str) -> Result<(), ApiError> {
    if value.chars().count() > MAX_VALUE_CHARS {
        return Err(ApiError::invalid(format!(
            "value is longer than {MAX_VALUE_CHARS} characters"
        )));
    }
    Ok(())
}

impl CampaignBody {
    /// The lock acquire this campaign is: the candidate as the owner, the value as the
    /// message. The request digest is this body's, so a `request_id` sent again with
    /// another value is caught.
    pub fn validate(&self, limits: Limits) -> Result<AcquireRequest, ApiError> {
        check_value(&self.value)?;
        let body = AcquireBody {
            owner: self.candidate.clone(),
            lease_ms: self.lease_ms,
            message: self.value.clone(),
            priority: self.priority,
            cleanup_ms: self.cleanup_ms,
            waiting_ms: self.waiting_ms,
            forceful: self.forceful,
            notify_url: self.notify_url.clone(),
            request_id: self.request_id.clone(),
            lease_id: self.lease_id.clone(),
        };
        // The owner's rules are the candidate's: a message about the one names the other.
        body.request(limits, digest_of(self))
            .map_err(|e| match e.message.strip_prefix("owner") {
                Some(rest) => ApiError::invalid(format!("candidate{rest}")),
                None => e,
            })
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProclaimBody {
    pub lease_id: String,
    pub value: String,
}

#[derive(Debug, Deserialize)]
pub struct TermQuery {
    pub term: Option<String>,
}

/// The leader, as a reader sees it.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct LeaderInfo {
    pub candidate: String,
    pub value: String,
    pub term: Option<u64>,
    pub priority: u32,
    pub elected_at: Option<String>,
    pub expires_at: Option<String>,
    pub remaining_ms: Option<u64>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ElectionInfo {
    pub name: String,
    pub leader: Option<LeaderInfo>,
    /// The campaigns still waiting.
    pub candidates: u64,
    /// A candidate of higher priority that asked the leader to hand over (as a lock shows
    /// its requestor): the leader's cue to finish and resign within its cleanup window.
    pub requestor: Option<RequestorInfo>,
}

impl ElectionInfo {
    pub fn of(election: &LockSnapshot) -> ElectionInfo {
        let now = election.read_at;
        let leader = engine::live_holder(&election.record, now).map(|h| LeaderInfo {
            candidate: h.owner.clone(),
            value: h.message.clone(),
            term: h.fencing_token.map(|t| t.0),
            priority: h.priority,
            elected_at: h.acquired_at.and_then(rfc3339),
            expires_at: match h.expires {
                Expiry::Never => None,
                Expiry::At(at) => rfc3339(at),
            },
            remaining_ms: engine::remaining_ms(&election.record, now),
        });
        ElectionInfo {
            name: election.name.to_string(),
            requestor: leader
                .as_ref()
                .and(election.record.requestor.as_ref())
                .map(RequestorInfo::of),
            leader,
            candidates: election.waiters,
        }
    }
}

/// The answer to a campaign that won.
#[derive(Debug, Serialize)]
pub struct Elected {
    pub elected: bool,
    pub lease_id: String,
    pub term: u64,
    pub election: ElectionInfo,
}

/// What an election's stream says of one of its lock stream's events, given the leader
/// (term and value) it said last; `None` when the event says nothing an observer needs
/// (a renewal that kept the value, the queue). A renewal that finds no
/// leader told (after `no_leader`, see I17's window, or a stream that resumed) says
/// `elected`: the observer learns who leads again.
pub fn election_event(
    kind: EventType,
    after: &ElectionInfo,
    told: Option<&LeaderInfo>,
) -> Option<&'static str> {
    use EventType::*;
    let same_term = |a: &LeaderInfo, b: &LeaderInfo| a.term == b.term;
    match (kind, &after.leader) {
        (Snapshot, _) => Some("snapshot"),
        (Acquired | HandedOff | Revoked, Some(_)) => Some("elected"),
        (Renewed, Some(now)) => match told {
            Some(was) if same_term(was, now) && was.value == now.value => None,
            Some(was) if same_term(was, now) => Some("proclaimed"),
            _ => Some("elected"),
        },
        (Released | Expired | ForceReleased, None) => Some("no_leader"),
        // A preferred candidate asks the leader to hand over, or stops asking.
        (CleanupRequested, Some(_)) => Some("cleanup_requested"),
        (CleanupCancelled, Some(_)) => Some("cleanup_cancelled"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leader(term: u64, value: &str) -> LeaderInfo {
        LeaderInfo {
            candidate: "c".into(),
            value: value.into(),
            term: Some(term),
            priority: 0,
            elected_at: None,
            expires_at: None,
            remaining_ms: Some(1),
        }
    }

    fn election(leader: Option<LeaderInfo>) -> ElectionInfo {
        ElectionInfo {
            name: "e".into(),
            leader,
            candidates: 0,
            requestor: None,
        }
    }

    #[test]
    fn a_lock_event_becomes_what_an_observer_needs() {
        use EventType::*;
        let one = leader(5, "a");
        let led = election(Some(one.clone()));
        let none = election(None);
        assert_eq!(election_event(Snapshot, &none, None), Some("snapshot"));
        for kind in [Acquired, HandedOff, Revoked] {
            assert_eq!(election_event(kind, &led, None), Some("elected"));
        }
        for kind in [Released, Expired, ForceReleased] {
            assert_eq!(election_event(kind, &none, Some(&one)), Some("no_leader"));
            // A force release or release that handed over: the next event says `elected`.
            assert_eq!(election_event(kind, &led, Some(&one)), None);
        }
        assert_eq!(
            election_event(Renewed, &led, Some(&one)),
            None,
            "same value"
        );
        let new_value = election(Some(leader(5, "b")));
        assert_eq!(
            election_event(Renewed, &new_value, Some(&one)),
            Some("proclaimed")
        );
        assert_eq!(
            election_event(Renewed, &led, None),
            Some("elected"),
            "after no_leader (or a resume), the leader is told again"
        );
        assert_eq!(election_event(Queue, &led, Some(&one)), None);
        for (kind, said) in [
            (CleanupRequested, "cleanup_requested"),
            (CleanupCancelled, "cleanup_cancelled"),
        ] {
            assert_eq!(election_event(kind, &led, Some(&one)), Some(said));
            assert_eq!(election_event(kind, &none, Some(&one)), None);
        }
    }
}
