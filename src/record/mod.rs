//! The lock record: who holds a lock (or the permits of a semaphore), who asked to preempt
//! a holder, whether callers wait in its queue, and whose hold ended last (I11). It is stored as Apache Helix's ZNRecord JSON (`znrecord`), so that a Helix
//! client and lockwarden read the same znode the same way.
//!
//! Keeps I2 (DESIGN.md, "Invariants"): a grant's token is its granting write's zxid
//! (`resolve_token`).

use crate::model::{FencingToken, LeaseId, UnixMillis};

mod znrecord;

/// When a lease runs out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    /// Helix's `TIMEOUT = Long.MAX_VALUE`: the lease never runs out.
    Never,
    At(UnixMillis),
}

impl Expiry {
    pub fn has_passed(self, now: UnixMillis) -> bool {
        match self {
            Expiry::Never => false,
            // Expired at the instant itself, so there is no moment at which a lease is neither
            // live nor expired (Helix bug B12).
            Expiry::At(at) => now >= at,
        }
    }
}

/// The current (possibly expired) holder of a lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    pub owner: String,
    pub message: String,
    pub expires: Expiry,
    pub priority: u32,
    pub waiting_ms: Option<u64>,
    pub cleanup_ms: u64,
    pub forceful: bool,
    /// The seal of the holder's lease id (see `crate::seal`); `None` for a record written
    /// by Helix, which has no leases.
    pub lease_id: Option<LeaseId>,
    pub lease_ms: Option<u64>,
    pub acquired_at: Option<UnixMillis>,
    /// Absent right after the granting write: the token is then that write's zxid, which the
    /// store fills in when it reads the record. Every later write that keeps the holder
    /// stores the token explicitly.
    pub fencing_token: Option<FencingToken>,
    pub notify_url: Option<String>,
    /// The seal of the idempotency key, and the body digest, of the acquire that created
    /// this grant.
    pub request_id: Option<String>,
    pub request_digest: Option<String>,
}

/// A pending higher-priority request (Helix's `REQUESTOR_*` fields, plus lockwarden's own).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requestor {
    pub owner: String,
    pub priority: u32,
    pub waiting_ms: Option<u64>,
    pub requested_at: UnixMillis,
    /// The id of the requestor's node in the lock's queue. `None` for a requestor written
    /// by Helix, which lockwarden cannot hand the lock to.
    pub waiter: Option<String>,
    pub forceful: bool,
    /// When the holder's cleanup window ends: fixed at the first request, kept when a
    /// higher requestor displaces a lower one.
    pub cleanup_deadline: Option<UnixMillis>,
}

/// A requestor as the API and the webhooks show it.
#[derive(Clone, Debug, serde::Serialize, PartialEq)]
pub struct RequestorInfo {
    pub owner: String,
    pub priority: u32,
    pub waiting_ms: Option<u64>,
    pub forceful: bool,
    pub requested_at: Option<String>,
    pub cleanup_deadline: Option<String>,
}

impl RequestorInfo {
    pub fn of(r: &Requestor) -> RequestorInfo {
        RequestorInfo {
            owner: r.owner.clone(),
            priority: r.priority,
            waiting_ms: r.waiting_ms,
            forceful: r.forceful,
            requested_at: r.requested_at.rfc3339(),
            cleanup_deadline: r.cleanup_deadline.and_then(UnixMillis::rfc3339),
        }
    }
}

/// How a write took the lock from a live holder who had not let go (`LW_FORCED`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Forced {
    /// An admin's force release (the lock is then free, or handed to the next waiter).
    Admin,
    /// A preemptor took the lock after the holder's cleanup window.
    Preemption,
}

impl Forced {
    fn as_str(self) -> &'static str {
        match self {
            Forced::Admin => "admin",
            Forced::Preemption => "preemption",
        }
    }
}

/// Everything stored about one lock, or one semaphore. The default is a free lock.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LockRecord {
    /// The current (possibly expired) holders, in grant order: at most one for a lock, at
    /// most `limit` for a semaphore (I18). Only the last may lack its stored token: one
    /// write grants at most one permit.
    pub holders: Vec<Holder>,
    /// A semaphore's number of permits, while it has holders or waiters; `None` for a lock,
    /// which has one.
    pub limit: Option<u32>,
    pub requestor: Option<Requestor>,
    /// `Some(p)`: callers may be waiting in the lock's queue, and `p` is the highest priority
    /// any of them had (a high-water mark, kept until the queue empties). A caller that joins
    /// writes the record when it is not queued or when the caller's priority is higher, so
    /// the record's version changes and a release cannot pass over it on what it knew.
    pub queued: Option<u32>,
    /// The write that made this record took the lock from a live holder who had not let go:
    /// an admin's force release, or a preemptor's takeover after the cleanup window. Event
    /// streams, on any instance, tell these from a release by it.
    pub forced: Option<Forced>,
    /// The lease (its seal, as [`Holder::lease_id`]) of the latest hold that ended: the one
    /// the current holder replaced, or on a free record the last one. A queue entry made
    /// under it is spent, never handed the lock (I11, `engine::spent_entry`); the engine
    /// sets it (`engine::succeeding`). `None` on a record written by Helix or by a reader
    /// that does not know the field, and on a record the collector has fenced (its fence
    /// writes a bare free record).
    pub ended_lease: Option<LeaseId>,
}

impl LockRecord {
    pub fn held_by(holder: Holder) -> Self {
        LockRecord {
            holders: vec![holder],
            limit: None,
            requestor: None,
            queued: None,
            forced: None,
            ended_lease: None,
        }
    }

    /// True when the record says nothing that a later caller needs: the znode can go.
    pub fn is_free(&self) -> bool {
        self.holders.is_empty() && self.requestor.is_none()
    }

    /// A lock's holder: its one holder (a semaphore's first permit).
    pub fn holder(&self) -> Option<&Holder> {
        self.holders.first()
    }

    /// A lock's holder, to change in a test.
    #[cfg(test)]
    pub fn holder_mut(&mut self) -> Option<&mut Holder> {
        self.holders.first_mut()
    }

    /// How many holders the record may have: a semaphore's limit, or a lock's one.
    pub fn permits(&self) -> usize {
        self.limit.map_or(1, |l| l as usize)
    }

    /// Fills in the token of a holder whose granting write was the last write (see
    /// [`Holder::fencing_token`]): the zxid I2 rests on.
    pub fn resolve_token(&mut self, last_write_zxid: i64) {
        for holder in &mut self.holders {
            if holder.fencing_token.is_none() {
                holder.fencing_token = Some(FencingToken(last_write_zxid.max(0) as u64));
            }
        }
    }
}

impl Holder {
    /// Whether `other` is the same grant: the same lease, or (for Helix's records, which
    /// have no leases) the same owner and fencing token. Renewals keep both.
    pub fn same_grant(&self, other: &Holder) -> bool {
        match (self.lease_id, other.lease_id) {
            (Some(x), Some(y)) => x == y,
            (None, None) => self.owner == other.owner && self.fencing_token == other.fencing_token,
            _ => false,
        }
    }
}

#[cfg(test)]
impl Holder {
    /// For tests: `owner` holding for ever, with every optional field empty.
    pub(crate) fn minimal(owner: &str) -> Holder {
        Holder {
            owner: owner.into(),
            message: String::new(),
            expires: Expiry::Never,
            priority: 0,
            waiting_ms: None,
            cleanup_ms: 0,
            forceful: false,
            lease_id: None,
            lease_ms: None,
            acquired_at: None,
            fencing_token: None,
            notify_url: None,
            request_id: None,
            request_digest: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_is_judged_at_the_instant() {
        let at = Expiry::At(UnixMillis(100));
        assert!(!at.has_passed(UnixMillis(99)));
        assert!(at.has_passed(UnixMillis(100)));
        assert!(!Expiry::Never.has_passed(UnixMillis(i64::MAX)));
    }
}
