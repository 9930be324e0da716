//! A waiting caller: its place in a lock's queue, the ticket it will be granted with, and
//! what it watches while it waits (the engine decides which; the store sets the watch).
//!
//! A waiter's id is the name of its queue node, `{inverted priority}-{key}-{sequence}`, so
//! the queue orders by (priority descending, arrival) from the names alone, and a caller that
//! lost its connection can find the node it created by its key.
//!
//! Keeps I7 (DESIGN.md, "Invariants"): the names give the order (`sort_queue`).

use serde::{Deserialize, Serialize};

use crate::model::{LeaseId, UnixMillis};

/// What a waiter watches while it waits, besides its timers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Watch {
    /// The lock record: only the queue's head and the requestor watch it.
    Record,
    /// The waiter just ahead: everyone else, so a release wakes one waiter, not all.
    Predecessor(String),
}

/// One entry of a lock's queue, as its id describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiter {
    pub id: String,
    pub priority: u32,
    pub key: String,
    pub seq: u64,
}

impl Waiter {
    /// The id without its sequence number; the store appends a strictly increasing one.
    pub fn id_prefix(priority: u32, key: &str) -> String {
        format!(
            "{:010}-{key}-",
            i32::MAX as u32 - priority.min(i32::MAX as u32)
        )
    }

    pub fn parse(id: &str) -> Option<Waiter> {
        let mut parts = id.splitn(3, '-');
        let inverted: u32 = parts.next()?.parse().ok()?;
        let key = parts.next()?.to_owned();
        let seq: u64 = parts.next()?.parse().ok()?;
        Some(Waiter {
            id: id.to_owned(),
            priority: (i32::MAX as u32).checked_sub(inverted)?,
            key,
            seq,
        })
    }
}

/// Sorts a queue into service order: higher priority first, then earlier arrival.
pub fn sort_queue(queue: &mut [Waiter]) {
    queue.sort_by(|a, b| b.priority.cmp(&a.priority).then(a.seq.cmp(&b.seq)));
}

/// Everything needed to grant the lock to a waiter, stored in its queue node, so that any
/// instance can hand the lock over.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ticket {
    pub key: String,
    pub owner: String,
    pub lease_ms: u64,
    pub message: String,
    pub priority: u32,
    pub cleanup_ms: u64,
    pub waiting_ms: Option<u64>,
    pub forceful: bool,
    pub notify_url: Option<String>,
    pub lease_id: LeaseId,
    pub request_id: Option<String>,
    pub request_digest: Option<String>,
    /// When the caller stops waiting (epoch ms); `None` for a preemptor that waits as long
    /// as the holder's cleanup window.
    pub wait_until: Option<i64>,
    /// When the service received the call (epoch ms).
    #[serde(default)]
    pub received_at: i64,
    /// A semaphore's number of permits, as the caller asked; absent for a lock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Who made the call, for the audit trail of a takeover. Only the waiting call's own
    /// task needs it, so it is not stored with the queue node.
    #[serde(skip)]
    pub actor: crate::audit::Actor,
}

impl Ticket {
    pub fn wait_until(&self) -> Option<UnixMillis> {
        self.wait_until.map(UnixMillis)
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a ticket always serialises")
    }

    pub fn decode(data: &[u8]) -> Option<Ticket> {
        serde_json::from_slice(data).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_sort_by_priority_then_arrival() {
        let id =
            |priority, key: &str, seq| format!("{}{seq:010}", Waiter::id_prefix(priority, key));
        let mut queue: Vec<Waiter> = [
            id(1, "a", 3),
            id(5, "b", 4),
            id(1, "c", 1),
            id(2147483647, "d", 9),
        ]
        .iter()
        .map(|i| Waiter::parse(i).unwrap())
        .collect();
        sort_queue(&mut queue);
        let keys: Vec<&str> = queue.iter().map(|w| w.key.as_str()).collect();
        assert_eq!(keys, ["d", "b", "c", "a"]);
        assert_eq!(queue[0].priority, 2147483647);
        assert!(Waiter::parse("junk").is_none());
    }
}
