//! Rule-by-rule tests of how a waiting call ends other than by taking the lock.

use std::time::Duration;

use super::*;
use crate::engine::handed_to;
use crate::engine::tests::{granted, NOW};
use crate::engine::waiting_tests::ticket;

const STORE_TIMEOUT: Duration = Duration::from_millis(1000);
const SESSION: Duration = Duration::from_millis(3000);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn a_waiter_rides_out_trouble_while_its_entry_may_last_and_it_still_waits() {
    // Never before the store timeout, even with the wait run out.
    assert!(!gives_up_in_trouble(ms(999), STORE_TIMEOUT, SESSION, true));
    assert!(gives_up_in_trouble(ms(1000), STORE_TIMEOUT, SESSION, true));
    // Still waiting: on until the entry has most likely gone with its session.
    assert!(!gives_up_in_trouble(
        ms(1000),
        STORE_TIMEOUT,
        SESSION,
        false
    ));
    assert!(!gives_up_in_trouble(
        ms(2999),
        STORE_TIMEOUT,
        SESSION,
        false
    ));
    assert!(gives_up_in_trouble(ms(3000), STORE_TIMEOUT, SESSION, false));
    // A store whose entries never outlive contact (in memory): the store timeout alone.
    assert!(!gives_up_in_trouble(
        ms(999),
        STORE_TIMEOUT,
        Duration::ZERO,
        false
    ));
    assert!(gives_up_in_trouble(
        ms(1000),
        STORE_TIMEOUT,
        Duration::ZERO,
        false
    ));
    // A session shorter than the store timeout: the store timeout still holds.
    assert!(!gives_up_in_trouble(ms(999), STORE_TIMEOUT, ms(500), false));
}

#[test]
fn a_vanished_entry_means_an_ended_grant_only_when_its_session_kept_it() {
    assert_eq!(vanished(true), Vanished::GrantEnded);
    assert_eq!(vanished(false), Vanished::WithSession);
}

#[test]
fn a_caller_giving_up_takes_a_lock_handed_to_it_only_if_its_entry_was_gone() {
    let me = ticket("p", 1, Some(1000), false);
    let handed = handed_to(&LockRecord::default(), &me, "w", None, NOW.into(), None);
    let (other, _) = granted("h", NOW);
    // (own delete removed the entry, record read after, basis read on, takes the lock)
    let table = [
        (true, &handed, Basis::Read, false),
        (true, &other, Basis::Read, false),
        (false, &handed, Basis::Latest, true),
        (false, &other, Basis::Latest, false),
    ];
    for (i, (left, record, basis, takes)) in table.into_iter().enumerate() {
        assert_eq!(giving_up_reads_on(left), basis, "row {i}");
        assert_eq!(
            gave_up_holding(left, record, &me.lease_id),
            takes,
            "row {i}"
        );
    }
}
