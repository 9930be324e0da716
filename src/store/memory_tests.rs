//! The in-memory store's own rules; the behaviour it shares with ZooKeeper is tested
//! through the service on both stores (`on_both_stores!`).

use super::*;
use crate::record::Holder;
use crate::store::Reads;

fn name(s: &str) -> LockName {
    LockName::parse(s).unwrap()
}

fn held() -> LockRecord {
    LockRecord::held_by(Holder::minimal("o"))
}

fn ticket(key: &str) -> Ticket {
    let request = crate::engine::AcquireRequest {
        owner: crate::model::Owner::parse("o").unwrap(),
        lease_ms: 1000,
        message: String::new(),
        priority: crate::model::Priority::default(),
        cleanup_ms: 0,
        waiting_ms: None,
        forceful: false,
        notify_url: None,
        request_id: None,
        request_digest: String::new(),
        lease_id: None,
        limit: None,
        actor: Default::default(),
    };
    let lease = crate::model::LeaseId::random();
    request.ticket(key.into(), lease, crate::model::UnixMillis(0))
}

/// Joining callers carried by a hand-off queue behind everyone, in their order, only
/// when the hand-off lands.
#[tokio::test]
async fn a_hand_off_makes_the_entries_of_the_callers_joining_with_it() {
    let store = MemoryStore::new();
    let deadline = Instant::now() + std::time::Duration::from_secs(1);
    let lock = name("l");
    store
        .write(&lock, RecordWrite::Create(&held()), deadline)
        .await
        .unwrap();
    let stored = store
        .read(&lock, Fresh::Any, deadline)
        .await
        .unwrap()
        .unwrap();
    let first = store.enqueue(&lock, &ticket("w1"), deadline).await.unwrap();
    let second = store.enqueue(&lock, &ticket("w2"), deadline).await.unwrap();
    let riders = [ticket("r1"), ticket("r2")];
    let stale = Version::plain(stored.version.number + 7);
    let refused = store
        .hand_off(&lock, &held(), Some(stale), &first, &riders, deadline)
        .await
        .unwrap();
    assert_eq!(refused.outcome, WriteOutcome::Conflict);
    assert_eq!(
        refused.joined,
        Joined::NotCarried,
        "no entry without the hand-off"
    );
    assert_eq!(store.queue(&lock, deadline).await.unwrap().len(), 2);
    let handed = store
        .hand_off(
            &lock,
            &held(),
            Some(stored.version),
            &first,
            &riders,
            deadline,
        )
        .await
        .unwrap();
    assert!(matches!(handed.outcome, WriteOutcome::Written { .. }));
    let Joined::Carried(made) = handed.joined else {
        panic!("carried: {:?}", handed.joined)
    };
    let keys: Vec<&str> = made.iter().map(|w| w.key.as_str()).collect();
    assert_eq!(keys, ["r1", "r2"]);
    let queue = store.queue(&lock, deadline).await.unwrap();
    let ids: Vec<&str> = queue.iter().map(|w| w.id.as_str()).collect();
    assert_eq!(ids, [&second.id, &made[0].id, &made[1].id]);
}

#[tokio::test]
async fn a_parent_name_cannot_be_created_while_nested_locks_exist() {
    let store = MemoryStore::new();
    let deadline = Instant::now() + std::time::Duration::from_secs(1);
    let written =
        |o: Result<WriteOutcome, StoreError>| matches!(o, Ok(WriteOutcome::Written { .. }));
    assert!(written(
        store
            .write(&name("a/b"), RecordWrite::Create(&held()), deadline)
            .await
    ));
    assert_eq!(
        store
            .write(&name("a"), RecordWrite::Create(&held()), deadline)
            .await
            .unwrap(),
        WriteOutcome::NestedLocks
    );
    assert!(written(
        store
            .write(&name("a-b"), RecordWrite::Create(&held()), deadline)
            .await
    ));
    assert!(written(
        store
            .write(&name("a/b/c"), RecordWrite::Create(&held()), deadline)
            .await
    ));
}
