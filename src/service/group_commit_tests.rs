use super::*;
use crate::model::LeaseId;

fn ticket(key: &str, request_id: Option<&str>) -> Ticket {
    Ticket {
        key: key.into(),
        owner: "o".into(),
        lease_ms: 1000,
        message: String::new(),
        priority: 0,
        cleanup_ms: 0,
        waiting_ms: None,
        forceful: false,
        notify_url: None,
        lease_id: LeaseId::random(),
        request_id: request_id.map(Into::into),
        request_digest: None,
        wait_until: None,
        received_at: 0,
        limit: None,
        actor: Default::default(),
    }
}

fn lock(name: &str) -> LockName {
    LockName::parse(name).unwrap()
}

#[test]
fn only_a_lock_handed_over_here_lately_offers_a_seat() {
    let batches = JoinBatches::new(Duration::from_secs(60));
    assert!(
        batches.offer(&lock("l"), &ticket("a", None)).is_none(),
        "never handed"
    );
    batches.board(&lock("l"), None);
    assert!(
        batches.offer(&lock("l"), &ticket("a", None)).is_none(),
        "only freed"
    );
    batches.board(&lock("l"), Some(Some(0)));
    assert!(batches.offer(&lock("l"), &ticket("a", None)).is_some());
    assert!(
        batches.offer(&lock("m"), &ticket("a", None)).is_none(),
        "another lock"
    );
    assert!(
        batches
            .offer(&lock("l"), &ticket("a", Some("r1")))
            .is_none(),
        "a retryable call joins on its own"
    );
    let mut higher = ticket("h", None);
    higher.priority = 1;
    assert!(
        batches.offer(&lock("l"), &higher).is_none(),
        "it would come before the waiter next in line (priority 0)"
    );
    batches.board(&lock("l"), Some(None));
    assert!(
        batches.offer(&lock("l"), &ticket("a", None)).is_none(),
        "nobody known to be next in line"
    );
    let off = JoinBatches::new(Duration::ZERO);
    off.board(&lock("l"), Some(Some(0)));
    assert!(
        off.offer(&lock("l"), &ticket("a", None)).is_none(),
        "turned off"
    );
}

#[test]
fn a_hand_off_boards_the_seated_in_arrival_order_and_a_dropped_seat_leaves() {
    let batches = JoinBatches::new(Duration::from_secs(60));
    let name = lock("l");
    batches.board(&name, Some(Some(0)));
    let first = batches.offer(&name, &ticket("a", None)).unwrap();
    let gone = batches.offer(&name, &ticket("b", None)).unwrap();
    let third = batches.offer(&name, &ticket("c", None)).unwrap();
    assert_eq!(batches.seated(), 3);
    drop(gone);
    assert_eq!(batches.seated(), 2);
    let riders = batches.board(&name, Some(Some(0)));
    let keys: Vec<&str> = riders.iter().map(|r| r.ticket.key.as_str()).collect();
    assert_eq!(keys, ["a", "c"]);
    assert_eq!(batches.seated(), 0);
    assert!(
        batches.board(&name, Some(Some(0))).is_empty(),
        "boarded once"
    );
    drop((first, third));
}

#[test]
fn a_hand_off_carries_at_most_max_riders_and_the_rest_wait_for_the_next() {
    let batches = JoinBatches::new(Duration::from_secs(60));
    let name = lock("l");
    batches.board(&name, Some(Some(0)));
    let seats: Vec<Seat<'_>> = (0..MAX_RIDERS + 5)
        .map(|i| {
            batches
                .offer(&name, &ticket(&format!("k{i}"), None))
                .unwrap()
        })
        .collect();
    let first = batches.board(&name, Some(Some(0)));
    assert_eq!(first.len(), MAX_RIDERS);
    assert_eq!(first[0].ticket.key, "k0");
    let rest = batches.board(&name, Some(Some(0)));
    let keys: Vec<&str> = rest.iter().map(|r| r.ticket.key.as_str()).collect();
    let want: Vec<String> = (MAX_RIDERS..MAX_RIDERS + 5)
        .map(|i| format!("k{i}"))
        .collect();
    assert_eq!(keys, want);
    drop(seats);
}

#[tokio::test]
async fn a_seat_hears_what_came_of_its_hand_off_or_leaves_when_none_comes() {
    let batches = JoinBatches::new(Duration::from_millis(20));
    let name = lock("l");
    batches.board(&name, Some(Some(0)));
    let seat = batches.offer(&name, &ticket("a", None)).unwrap();
    let riders = batches.board(&name, Some(Some(0)));
    let waiter = Waiter::parse("2147483647-a-0000000007").unwrap();
    for rider in riders {
        assert!(rider.tell(Carried::Joined(waiter.clone())).is_ok());
    }
    assert!(matches!(seat.wait().await, Carried::Joined(w) if w == waiter));
    let seat = batches.offer(&name, &ticket("b", None)).unwrap();
    assert!(
        matches!(seat.wait().await, Carried::Not),
        "the window ran out"
    );
    assert_eq!(batches.seated(), 0);
    assert!(
        batches.board(&name, Some(Some(0))).is_empty(),
        "it left the batch"
    );
    let seat = batches.offer(&name, &ticket("c", None)).unwrap();
    drop(batches.board(&name, Some(Some(0))));
    assert!(
        matches!(seat.wait().await, Carried::Unknown),
        "the hand-off that took it was dropped"
    );
}
