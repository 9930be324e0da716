//! The clock the lock rules judge takeovers by, and the takeover margin it defines: the
//! `max_skew_ms` after a lease's end during which the lease is over (its lock shows
//! `expired`, and validate says false) but nobody may take the lock yet.
//!
//! Keeps I1 (DESIGN.md, "Invariants"): a lease is taken over only once it has ended on every
//! instance's clock (`Clock::untakeable_holder`).

use crate::model::UnixMillis;
use crate::record::{Expiry, Holder, LockRecord};
use crate::waiter::Waiter;

/// The service's clock as the lock rules see it: the time now, and the most that the clocks
/// of two instances may disagree (`--max-clock-skew-ms`). A lease is judged over by its
/// holder (renew, validate) at its expiry, but is *taken over* only `max_skew_ms` later: by
/// then it has ended on every instance's clock, so no instance hands the lock on while
/// another still says that the holder holds it. This margin keeps I1 (DESIGN.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clock {
    pub now: UnixMillis,
    pub max_skew_ms: u64,
}

impl From<UnixMillis> for Clock {
    fn from(now: UnixMillis) -> Self {
        Clock {
            now,
            max_skew_ms: 0,
        }
    }
}

impl Clock {
    /// The holder, unless its lease has ended on every instance's clock.
    pub(crate) fn untakeable_holder<'a>(&self, record: &'a LockRecord) -> Option<&'a Holder> {
        record
            .holder
            .as_ref()
            .filter(|h| !h.expires.has_passed(self.now.minus(self.max_skew_ms)))
    }

    /// When `holder`'s lease may be taken over; `None` if never.
    pub(crate) fn takeover_at(&self, holder: &Holder) -> Option<UnixMillis> {
        match holder.expires {
            Expiry::Never => None,
            Expiry::At(at) => Some(at.plus(self.max_skew_ms)),
        }
    }

    /// When `record`'s lock may be taken over, while its lease is in the margin: ended on
    /// this clock, but perhaps not yet on another instance's. `None` outside the margin: the
    /// lock is free, its lease is live or never ends, or it may be taken over now.
    pub fn pending_takeover(&self, record: &LockRecord) -> Option<UnixMillis> {
        let holder = self.untakeable_holder(record)?;
        if !holder.expires.has_passed(self.now) {
            return None;
        }
        self.takeover_at(holder)
    }
}

/// When a caller refused the lock (`lock_held`) can expect to take it by asking again: the
/// end of the margin of a lease in its margin, if nobody is queued for the lock. Otherwise
/// `None`: a live lease may be renewed at any time, and a queued caller takes the lock
/// when the margin ends, before anyone who asks again.
pub fn retry_at(record: &LockRecord, queue: &[Waiter], clock: Clock) -> Option<UnixMillis> {
    if !queue.is_empty() {
        return None;
    }
    clock.pending_takeover(record)
}
