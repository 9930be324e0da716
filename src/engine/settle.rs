//! When a write whose answer was lost counts as landed: judged on a read made after it,
//! never guessed (the service's one write-and-settle path, `service::outcome`, asks this).
//!
//! Keeps I10 (DESIGN.md, "Invariants"): `landed` knows a write by what only it could have done,
//! and `hold_over` a release's end on the latest copy only.

use super::Basis;
use crate::record::LockRecord;

/// Whether a write of `written` over `before`, whose answer was lost, landed, judged on
/// `now` read after it (after a `sync`, so not from a follower that lags behind the write;
/// on one session the read also comes after the write, which ZooKeeper answers in order). A
/// write that gives the lock to a new lease landed if that lease holds the lock: lease ids
/// are unique, so nobody else wrote it, and later writes that kept the holder (a waiter's
/// queue mark, a requestor) do not hide it. A write that ended a lease landed if that lease
/// is gone. Any other write (a renewal, a mark) landed if the record is exactly as written.
/// This is I10's test (DESIGN.md).
pub fn landed(before: Option<&LockRecord>, written: &LockRecord, now: &LockRecord) -> bool {
    let lease = |record: Option<&LockRecord>| {
        record
            .and_then(|r| r.holder.as_ref())
            .and_then(|h| h.lease_id)
    };
    let (was, will) = (lease(before), lease(Some(written)));
    if will != was {
        return match will {
            Some(granted) => lease(Some(now)) == Some(granted),
            None => lease(Some(now)) != was,
        };
    }
    same_write(now, written)
}

/// Whether the hold that a release set out to end is over, as `now`, read on `basis`, shows.
/// `ending` is the record the release's write replaced, when that write's lost answer was
/// read back as not landed: that read may have gone out on another session than the write
/// (a stand-in, a new session), not ordered after it, so the write may land after all. Only
/// the latest copy can show the hold gone; then it has ended as the call asked, whoever ended
/// it, and deciding again would refuse the release (the lock held by the waiter it went to)
/// or force-release that waiter too.
pub fn hold_over(ending: &LockRecord, now: &LockRecord, basis: Basis) -> bool {
    let held_still = match (&ending.holder, &now.holder) {
        (Some(was), Some(holder)) => was.same_grant(holder),
        _ => false,
    };
    basis == Basis::Latest && !held_still
}

/// Equal apart from the fencing token, which a grant leaves for the store to fill in.
fn same_write(stored: &LockRecord, written: &LockRecord) -> bool {
    let strip = |record: &LockRecord| {
        let mut record = record.clone();
        if let Some(holder) = &mut record.holder {
            holder.fencing_token = None;
        }
        record
    };
    strip(stored) == strip(written)
}

#[cfg(test)]
mod tests {
    use super::{hold_over, landed};
    use crate::engine::tests::{granted, NOW};
    use crate::engine::Basis;
    use crate::record::LockRecord;

    #[test]
    fn a_grant_landed_when_its_lease_holds_the_lock_even_under_later_marks() {
        let (written, _) = granted("a", NOW);
        assert!(landed(None, &written, &written));
        let mut marked = written.clone();
        marked.queued = Some(3);
        assert!(
            landed(None, &written, &marked),
            "a later mark keeps the holder"
        );
        let (other, _) = granted("b", NOW);
        assert!(!landed(None, &written, &other), "another lease's grant");
        assert!(!landed(None, &written, &LockRecord::default()));
    }

    #[test]
    fn a_release_landed_when_its_lease_is_gone() {
        let (before, _) = granted("a", NOW);
        let freed = LockRecord::default();
        assert!(landed(Some(&before), &freed, &freed));
        let (next, _) = granted("b", NOW);
        assert!(
            landed(Some(&before), &freed, &next),
            "a later grant to another"
        );
        assert!(
            !landed(Some(&before), &freed, &before),
            "still held by the lease"
        );
    }

    #[test]
    fn a_renewal_landed_only_when_the_record_is_exactly_as_written() {
        let (before, _) = granted("a", NOW);
        let mut renewed = before.clone();
        renewed.holder.as_mut().unwrap().expires = crate::record::Expiry::At(NOW.plus(120_000));
        assert!(landed(Some(&before), &renewed, &renewed));
        assert!(!landed(Some(&before), &renewed, &before));
        // The fencing token, which the store fills in, does not count.
        let mut tokenless = renewed.clone();
        tokenless.holder.as_mut().unwrap().fencing_token = None;
        assert!(landed(Some(&before), &tokenless, &renewed));
    }

    #[test]
    fn a_hold_a_release_set_out_to_end_is_over_when_the_latest_copy_shows_it_gone() {
        let (ending, _) = granted("a", NOW);
        let (next, _) = granted("b", NOW);
        let free = LockRecord::default();
        let mut renewed = ending.clone();
        renewed.holder.as_mut().unwrap().expires = crate::record::Expiry::At(NOW.plus(9_000));
        // (record read, basis read on, over)
        let table = [
            (&free, Basis::Latest, true),
            (&next, Basis::Latest, true),
            (&ending, Basis::Latest, false),
            (&renewed, Basis::Latest, false),
            (&free, Basis::Read, false),
            (&next, Basis::Cached, false),
            (&free, Basis::Remembered, false),
        ];
        for (i, (now, basis, over)) in table.into_iter().enumerate() {
            assert_eq!(hold_over(&ending, now, basis), over, "row {i}");
        }
    }
}
