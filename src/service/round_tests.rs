use super::gives_up_in_trouble;
use std::time::Duration;

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
