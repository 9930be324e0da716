//! One instance as the workload's clients call it: [`Endpoint::perform`] makes an HTTP call
//! and records it as an [`Op`], and [`parse_outcome`] reads the fields that matter from an
//! answer.
//!
//! A history's names are locks, semaphores or elections ([`Kinds`]). An election is called
//! by the lock's words: an acquire is a campaign (the owner the candidate, the term the
//! fencing token), a renewal is strict (I17), a release is a resignation. Elections have
//! no admin `DELETE`, so no force release.

use std::time::Duration;

use serde_json::{json, Value};

use super::{now_ceil_ms, now_floor_ms, parse_time_ms, Call, Op, Outcome};

/// One instance, as a client sees it: where it is and how to call it.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub http: reqwest::Client,
    pub base: String,
    pub instance: usize,
    /// The client-side limit of one call; past it the outcome is unknown.
    pub timeout: Duration,
    /// Sent as `Authorization: Bearer` (an API token, or the admin token).
    pub token: Option<String>,
    /// Which names are semaphores and elections; the others are locks.
    pub kinds: std::sync::Arc<Kinds>,
}

/// Which of a history's names are semaphores (called under `/v1/semaphores`) and which are
/// elections (under `/v1/elections`); every other name is a lock's.
#[derive(Clone, Debug, Default)]
pub struct Kinds {
    pub semaphores: Vec<String>,
    pub elections: Vec<String>,
}

impl Kinds {
    pub fn is_semaphore(&self, name: &str) -> bool {
        self.semaphores.iter().any(|s| s == name)
    }

    pub fn is_election(&self, name: &str) -> bool {
        self.elections.iter().any(|e| e == name)
    }
}

impl Endpoint {
    /// Makes `call` on `lock` and records it as an op of `client`.
    pub async fn perform(&self, client: usize, lock: &str, call: Call) -> Op {
        let election = self.kinds.is_election(lock);
        let root = if election {
            "elections"
        } else if self.kinds.is_semaphore(lock) {
            "semaphores"
        } else {
            "locks"
        };
        let path = format!("{}/v1/{root}/{}", self.base, lock.replace('/', "%2F"));
        let (acquire, release, token) = match election {
            true => ("campaign", "resign", "term"),
            false => ("acquire", "release", "fencing_token"),
        };
        let request = match &call {
            Call::Acquire {
                owner,
                priority,
                lease_ms,
                waiting_ms,
                forceful,
                cleanup_ms,
                request_id,
                lease_id,
                limit,
            } => {
                let who = if election { "candidate" } else { "owner" };
                let mut body = json!({who: owner, "lease_ms": lease_ms, "priority": priority,
                    "cleanup_ms": cleanup_ms, "waiting_ms": waiting_ms, "forceful": forceful});
                if let Some(id) = request_id {
                    body["request_id"] = json!(id);
                }
                if let Some(id) = lease_id {
                    body["lease_id"] = json!(id);
                }
                if let Some(limit) = limit {
                    assert!(!election, "an election has one leader, no limit");
                    body["limit"] = json!(limit);
                }
                self.http.post(format!("{path}/{acquire}")).json(&body)
            }
            Call::Renew {
                lease_id,
                lease_ms,
                strict,
            } => {
                // The history must say which renewals are strict: the checker judges those
                // by I17 (`lapsed_leader`).
                assert_eq!(
                    *strict, election,
                    "an election's renewals are strict, and only an election's: {lock}"
                );
                let mut body = json!({"lease_id": lease_id});
                if let Some(ms) = lease_ms {
                    body["lease_ms"] = json!(ms);
                }
                self.http.post(format!("{path}/renew")).json(&body)
            }
            Call::Release { lease_id } => self
                .http
                .post(format!("{path}/{release}"))
                .json(&json!({"lease_id": lease_id})),
            Call::Validate { fencing_token } => self
                .http
                .get(format!("{path}/validate?{token}={fencing_token}")),
            Call::ForceRelease => {
                assert!(!election, "elections have no admin DELETE: {lock}");
                self.http.delete(path)
            }
        };
        let mut request = request.timeout(self.timeout);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let invoke_ms = now_floor_ms();
        let answer = async {
            let response = request.send().await?;
            let status = response.status().as_u16();
            let text = response.text().await?;
            Ok::<_, reqwest::Error>((status, text))
        }
        .await;
        let complete_ms = now_ceil_ms();
        let outcome = match answer {
            Ok((status, text)) => parse_outcome(status, &text),
            Err(e) => Outcome {
                error: Some(if e.is_timeout() {
                    "timeout".to_owned()
                } else {
                    format!("transport: {e}")
                }),
                ..Outcome::default()
            },
        };
        Op {
            id: 0,
            client,
            instance: self.instance,
            lock: lock.to_owned(),
            call,
            invoke_ms,
            complete_ms,
            outcome,
        }
    }
}

/// The fields that matter of an answer with `status` and body `text`: a lock's, a
/// semaphore's or an election's. An election's answer says `elected` for `acquired`, `term`
/// for the fencing token and `elected_at` for `acquired_at`, and shows its live leader,
/// which after a campaign won or a renewal acknowledged is the caller.
pub fn parse_outcome(status: u16, text: &str) -> Outcome {
    let body: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    // A semaphore's answer shows the caller's permit: the one renewed, or the one granted.
    let granted = |h: &&Value| h["fencing_token"] == body["fencing_token"];
    let permit = match &body["permit"] {
        Value::Object(_) => Some(&body["permit"]),
        _ => body["semaphore"]["holders"]
            .as_array()
            .and_then(|h| h.iter().find(granted)),
    };
    let leader = match &body["election"]["leader"] {
        Value::Object(_) => Some(&body["election"]["leader"]),
        _ => None,
    };
    let lock = permit.or(leader).unwrap_or(&body["lock"]);
    let either = |a: &str, b: &str| match &lock[a] {
        Value::Null => &lock[b],
        found => found,
    };
    let time = |v: &Value| v.as_str().and_then(parse_time_ms);
    Outcome {
        status: Some(status),
        error: body["error"]["code"]
            .as_str()
            .map(str::to_owned)
            .or_else(|| {
                (status != 200 && body.is_null()).then(|| format!("unparsable body: {text:.80}"))
            }),
        acquired: body["acquired"]
            .as_bool()
            .or_else(|| body["elected"].as_bool()),
        lease_id: body["lease_id"].as_str().map(str::to_owned),
        fencing_token: body["fencing_token"]
            .as_u64()
            .or_else(|| body["term"].as_u64())
            .or_else(|| either("fencing_token", "term").as_u64()),
        expires_at: time(&lock["expires_at"]),
        acquired_at: time(either("acquired_at", "elected_at")),
        priority: lock["priority"].as_u64().map(|p| p as u32),
        current: body["current"].as_bool(),
    }
}
