//! When a write whose answer was lost counts as landed: judged on a read made after it,
//! never guessed (the service's one write-and-settle path, `service::outcome`, asks this).
//!
//! Keeps I10 (DESIGN.md, "Invariants"): `landed` knows a write by what only it could have done,
//! and `hold_over` a release's end on the latest copy only.

use super::Basis;
use crate::model::LeaseId;
use crate::record::{Holder, LockRecord};

/// Whether a write of `written` over `before`, whose answer was lost, landed, judged on
/// `now` read after it (after a `sync`, so not from a follower that lags behind the write;
/// on one session the read also comes after the write, which ZooKeeper answers in order). A
/// write that gives the lock to a new lease landed if that lease holds the lock: lease ids
/// are unique, so nobody else wrote it, and later writes that kept the holder (a waiter's
/// queue mark, a requestor) do not hide it. A write that ended a lease landed if that lease
/// is gone; one that did both, if both show (of a semaphore, another release may have
/// handed a permit to the same waiter). Any other write (a renewal, a mark) landed if the
/// record is exactly as written. This is I10's test (DESIGN.md).
pub fn landed(before: Option<&LockRecord>, written: &LockRecord, now: &LockRecord) -> bool {
    let leases = |record: Option<&LockRecord>| -> Vec<LeaseId> {
        record
            .map(|r| r.holders.iter().filter_map(|h| h.lease_id).collect())
            .unwrap_or_default()
    };
    let (was, will, is) = (leases(before), leases(Some(written)), leases(Some(now)));
    // One write grants at most one lease, and ends at most one. Both must show: two
    // releases of a semaphore's permits may each hand one to the same waiter, so its lease
    // alone does not say which write landed.
    let granted = will.iter().find(|l| !was.contains(l));
    let ended = was.iter().find(|l| !will.contains(l));
    if granted.is_some() || ended.is_some() {
        return granted.is_none_or(|l| is.contains(l)) && ended.is_none_or(|l| !is.contains(l));
    }
    same_write(now, written)
}

/// Whether the hold of `ending`, which a release (or force release) set out to end, is over,
/// as `now` read on `basis` shows: only a copy no follower holds back can show it gone
/// (I10), and a copy that shows it still there says it is not over yet.
pub fn hold_over(ending: &Holder, now: &LockRecord, basis: Basis) -> bool {
    let held_still = now.holders.iter().any(|h| ending.same_grant(h));
    basis == Basis::Latest && !held_still
}

fn same_write(stored: &LockRecord, written: &LockRecord) -> bool {
    let strip = |record: &LockRecord| {
        let mut record = record.clone();
        for holder in &mut record.holders {
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
    use crate::model::LeaseId;
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
    fn a_semaphores_hand_off_landed_only_when_its_release_shows_too() {
        let permits = |names: &[&str]| LockRecord {
            holders: names
                .iter()
                .map(|n| crate::record::Holder {
                    lease_id: Some(LeaseId::from_random_bytes([n.as_bytes()[0]; 16])),
                    ..crate::record::Holder::minimal(n)
                })
                .collect(),
            limit: Some(2),
            ..LockRecord::default()
        };
        // Both holders release; each hands its permit to waiter w. The first landed.
        let (before, written) = (permits(&["a", "b"]), permits(&["a", "w"]));
        assert!(!landed(Some(&before), &written, &permits(&["b", "w"])));
        assert!(landed(Some(&before), &written, &permits(&["a", "w"])));
        assert!(landed(Some(&before), &written, &permits(&["w"])));
    }

    #[test]
    fn a_renewal_landed_only_when_the_record_is_exactly_as_written() {
        let (before, _) = granted("a", NOW);
        let mut renewed = before.clone();
        renewed.holder_mut().unwrap().expires = crate::record::Expiry::At(NOW.plus(120_000));
        assert!(landed(Some(&before), &renewed, &renewed));
        assert!(!landed(Some(&before), &renewed, &before));
        // The fencing token, which the store fills in, does not count.
        let mut tokenless = renewed.clone();
        tokenless.holder_mut().unwrap().fencing_token = None;
        assert!(landed(Some(&before), &tokenless, &renewed));
    }

    #[test]
    fn a_hold_a_release_set_out_to_end_is_over_when_the_latest_copy_shows_it_gone() {
        let (ending, _) = granted("a", NOW);
        let (next, _) = granted("b", NOW);
        let free = LockRecord::default();
        let mut renewed = ending.clone();
        renewed.holder_mut().unwrap().expires = crate::record::Expiry::At(NOW.plus(9_000));
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
            let ending = ending.holder().unwrap();
            assert_eq!(hold_over(ending, now, basis), over, "row {i}");
        }
    }
}
