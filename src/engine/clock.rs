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
    /// The holders whose leases have not ended on every instance's clock.
    fn untakeable<'a>(
        &self,
        record: &'a LockRecord,
    ) -> impl DoubleEndedIterator<Item = &'a Holder> {
        let edge = self.now.minus(self.max_skew_ms);
        record
            .holders
            .iter()
            .filter(move |h| !h.expires.has_passed(edge))
    }

    /// The holder that keeps a caller from a grant: `None` while a permit is free or
    /// takeable (a lock's: its holder, unless its lease has ended on every instance's clock).
    /// When every permit is untakeable, the one a preemptor would take: the lowest priority,
    /// the newest grant among equals (I18).
    pub(crate) fn untakeable_holder<'a>(&self, record: &'a LockRecord) -> Option<&'a Holder> {
        if self.free_permits(record) > 0 {
            return None;
        }
        victim(record)
    }

    /// How many permits a grant may take now: those nobody holds, and those whose leases
    /// have ended on every instance's clock.
    pub(crate) fn free_permits(&self, record: &LockRecord) -> usize {
        record
            .permits()
            .saturating_sub(self.untakeable(record).count())
    }

    /// A holder whose lease has ended on every instance's clock (the earliest to end), whose
    /// permit a grant may take.
    pub(crate) fn takeable_holder<'a>(&self, record: &'a LockRecord) -> Option<&'a Holder> {
        let edge = self.now.minus(self.max_skew_ms);
        record
            .holders
            .iter()
            .filter(|h| h.expires.has_passed(edge))
            .min_by_key(|h| match h.expires {
                Expiry::At(at) => at,
                Expiry::Never => UnixMillis(i64::MAX),
            })
    }

    /// When a permit of `record` may next be taken over: the earliest takeover of its
    /// untakeable holders (a lock's: its holder's); `None` if never.
    pub(crate) fn next_takeover(&self, record: &LockRecord) -> Option<UnixMillis> {
        self.untakeable(record)
            .filter_map(|h| self.takeover_at(h))
            .min()
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
        self.untakeable_holder(record)?;
        self.untakeable(record)
            .filter(|h| h.expires.has_passed(self.now))
            .filter_map(|h| self.takeover_at(h))
            .min()
    }
}

/// The holder a preemption of `record` is about: the lowest priority, the newest grant among
/// equals (a lock's: its holder). When every permit is untakeable, every holder is (a record
/// has at most its limit of holders), and this is the one a preemptor takes (I18).
pub fn victim(record: &LockRecord) -> Option<&Holder> {
    record.holders.iter().rev().min_by_key(|h| h.priority)
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
