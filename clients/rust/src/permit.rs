//! What the service shows of a semaphore: its holders (one per permit) out of its limit,
//! and its queue; and a permit as the lock view its guard judges (`SemaphoreInfo::as_lock`).

use serde::{Deserialize, Serialize};

use crate::types::{FencingToken, LockInfo, LockState, Requestor};

/// One permit's holder of a semaphore.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Permit {
    pub owner: String,
    #[serde(default)]
    pub priority: u32,
    #[serde(default)]
    pub fencing_token: Option<FencingToken>,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub acquired_at: Option<String>,
    #[serde(default)]
    pub expires_at: Option<String>,
    #[serde(default)]
    pub remaining_ms: Option<u64>,
    /// Set while a higher-priority caller asks this holder to give up its permit.
    #[serde(default)]
    pub cleanup_remaining_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub takeover_at: Option<String>,
}

/// A counting semaphore: its holders out of its limit, and its queue.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SemaphoreInfo {
    pub name: String,
    /// `None` while the semaphore has no holder and no waiter.
    #[serde(default)]
    pub limit: Option<u32>,
    /// The live permits.
    #[serde(default)]
    pub held: u64,
    #[serde(default)]
    pub holders: Vec<Permit>,
    #[serde(default)]
    pub requestor: Option<Requestor>,
    #[serde(default)]
    pub waiters: u64,
}

impl SemaphoreInfo {
    /// The permit of `token` as a lock's view: held while it is live, with the requestor
    /// when it is the holder asked to give way; free when the permit is gone.
    pub(crate) fn as_lock(&self, token: FencingToken) -> LockInfo {
        let mine = self.holders.iter().find(|p| p.fencing_token == Some(token));
        let live = mine.is_some_and(|p| p.remaining_ms != Some(0));
        LockInfo {
            name: self.name.clone(),
            state: match (mine, live) {
                (None, _) => LockState::Free,
                (Some(_), true) => LockState::Held,
                (Some(_), false) => LockState::Expired,
            },
            owner: mine.map(|p| p.owner.clone()),
            message: mine.map(|p| p.message.clone()).unwrap_or_default(),
            priority: mine.map_or(0, |p| p.priority),
            lease_ms: None,
            acquired_at: mine.and_then(|p| p.acquired_at.clone()),
            expires_at: mine.and_then(|p| p.expires_at.clone()),
            remaining_ms: mine.and_then(|p| p.remaining_ms),
            cleanup_ms: 0,
            waiting_ms: None,
            forceful: false,
            fencing_token: mine.and_then(|p| p.fencing_token),
            requestor: self
                .requestor
                .clone()
                .filter(|_| mine.is_some_and(|p| p.cleanup_remaining_ms.is_some())),
            waiters: self.waiters,
            takeover_at: mine.and_then(|p| p.takeover_at.clone()),
        }
    }
}

/// One page of `GET /v1/semaphores`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SemaphorePage {
    pub semaphores: Vec<SemaphoreInfo>,
    #[serde(default)]
    pub next_cursor: Option<String>,
}
