use super::*;

fn waiter(priority: u32, key: &str, seq: u64) -> Waiter {
    let id = format!("{}{seq:010}", Waiter::id_prefix(priority, key));
    Waiter::parse(&id).unwrap()
}

fn ticket(priority: u32, key: &str) -> Ticket {
    Ticket {
        key: key.to_owned(),
        owner: key.to_owned(),
        lease_ms: 1_000,
        message: String::new(),
        priority,
        cleanup_ms: 0,
        waiting_ms: Some(1_000),
        forceful: false,
        notify_url: None,
        lease_id: crate::model::LeaseId::random(),
        request_id: None,
        request_digest: None,
        wait_until: None,
        received_at: 0,
        limit: None,
        actor: Default::default(),
    }
}

#[test]
fn the_nearest_local_waiter_ahead_is_found_in_service_order() {
    let local = LocalWaiters::new(true);
    let lock = LockName::parse("order").unwrap();
    let other = LockName::parse("other").unwrap();
    let (high, low_early, mid_early, mid_late, me) = (
        waiter(9, "high", 30),
        waiter(1, "low", 1),
        waiter(5, "mid1", 10),
        waiter(5, "mid2", 20),
        waiter(5, "me", 25),
    );
    let elsewhere = waiter(5, "elsewhere", 24);
    let _guards: Vec<_> = [&high, &low_early, &mid_early, &mid_late]
        .into_iter()
        .map(|w| local.register(&lock, w, &ticket(w.priority, &w.key)))
        .chain([local.register(&other, &elsewhere, &ticket(5, "elsewhere"))])
        .collect();
    let ahead = |w: &Waiter| local.nearest_ahead(&lock, w).map(|a| a.key);
    // Same priority, earlier arrival; not the lower priority that arrived first, nor a
    // waiter of another lock.
    assert_eq!(ahead(&me).as_deref(), Some("mid2"));
    assert_eq!(ahead(&mid_early).as_deref(), Some("high"));
    assert_eq!(ahead(&high), None, "nobody here comes before the highest");
    assert_eq!(ahead(&low_early).as_deref(), Some("mid2"));
    drop(_guards);
    assert_eq!(ahead(&me), None, "gone with their registrations");
}

#[test]
fn a_waiter_told_it_was_handed_the_lock_stays_told() {
    let local = LocalWaiters::new(true);
    let lock = LockName::parse("told").unwrap();
    let me = waiter(5, "me", 1);
    let (handed, _registered) = local.register(&lock, &me, &ticket(5, "me"));
    local.handed(&lock, &me.id, &LockRecord::default(), &[]);
    // Another release here plans a write on a copy older than that hand-off, and it
    // does not land: the waiter must not be told the lock was not handed to it.
    drop(local.pending(&lock, &me.id));
    assert!(
        matches!(*handed.borrow(), Notice::Handed(_)),
        "still handed"
    );
    // Without a hand-off before it, a write that did not land leaves the waiter idle.
    let other = waiter(5, "other", 2);
    let (theirs, _registered_too) = local.register(&lock, &other, &ticket(5, "other"));
    let pending = local.pending(&lock, &other.id);
    assert!(matches!(*theirs.borrow(), Notice::Pending));
    drop(pending);
    assert!(matches!(*theirs.borrow(), Notice::Idle));
}

#[test]
fn at_most_the_limit_of_a_locks_waiters_go_uncounted() {
    let local = LocalWaiters::new(true);
    let (a, b) = (LockName::parse("a").unwrap(), LockName::parse("b").unwrap());
    let first = local.uncounted(&a, 2).expect("below the limit");
    let second = local.uncounted(&a, 2).expect("below the limit");
    assert!(local.uncounted(&a, 2).is_none(), "at the limit");
    assert!(local.uncounted(&b, 2).is_some(), "per lock");
    assert!(local.uncounted(&b, 0).is_none(), "a limit of 0 lets none");
    drop(first);
    assert!(
        local.uncounted(&a, 2).is_some(),
        "room again once one is counted"
    );
    drop(second);
}
