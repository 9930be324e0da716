//! `LockStore::read_with_queue` on a real ZooKeeper: the record and the queue in one
//! read-only `multi` show exactly what the two separate reads show (a lock never written,
//! a held lock with waiters in service order, the empty parent of a nested name, a queue
//! container that was never made), it counts as one `multi_read` request, and when
//! ZooKeeper does not answer it fails as the reads do, within the deadline.

use crate::common;

use std::time::Duration;
use tokio::time::Instant;

use common::proxy::{Mode, Proxy};
use common::zk;
use lockwarden::metrics::{Format, Metrics};
use lockwarden::model::{LeaseId, LockName};
use lockwarden::record::LockRecord;
use lockwarden::store::zk::ZkStore;
use lockwarden::store::Reads;
use lockwarden::store::{Fresh, LockStore, RecordWrite, StoreError, WriteOutcome};
use lockwarden::waiter::Ticket;

const WAIT: Duration = Duration::from_secs(20);

async fn store(metrics: &Metrics) -> (Proxy, ZkStore) {
    let zk_addr = format!("127.0.0.1:{}", zk::shared().port).parse().unwrap();
    let proxy = Proxy::start(zk_addr);
    let store = zk::store_at(proxy.connect_string(), metrics, 4);
    store
        .ready(Instant::now() + WAIT)
        .await
        .expect("the store reaches ZooKeeper");
    (proxy, store)
}

fn name(raw: &str) -> LockName {
    LockName::parse(raw).unwrap()
}

fn ticket(key: &str, priority: u32) -> Ticket {
    Ticket {
        key: key.to_owned(),
        owner: key.to_owned(),
        lease_ms: 60_000,
        message: String::new(),
        priority,
        cleanup_ms: 0,
        waiting_ms: Some(60_000),
        forceful: false,
        notify_url: None,
        lease_id: LeaseId::random(),
        request_id: None,
        request_digest: None,
        wait_until: None,
        received_at: 0,
        limit: None,
        actor: Default::default(),
    }
}

/// Both ways of reading `lock` agree: the same record at the same version, the same queue.
async fn agree(store: &ZkStore, lock: &str) -> (Option<LockRecord>, Vec<String>) {
    let deadline = Instant::now() + WAIT;
    let lock = name(lock);
    let (together, queue) = store
        .read_with_queue(&lock, Fresh::Any, deadline)
        .await
        .unwrap();
    let apart = store.read(&lock, Fresh::Any, deadline).await.unwrap();
    let apart_queue = store.queue(&lock, deadline).await.unwrap();
    assert_eq!(
        together.as_ref().map(|s| (&s.record, s.version)),
        apart.as_ref().map(|s| (&s.record, s.version)),
        "{lock}: the record"
    );
    assert_eq!(queue, apart_queue, "{lock}: the queue");
    (
        together.map(|s| s.record),
        queue.into_iter().map(|w| w.key).collect(),
    )
}

fn count(metrics: &Metrics, operation: &str) -> u64 {
    let series =
        format!("lockwarden_zookeeper_request_duration_seconds_count{{operation=\"{operation}\"}}");
    common::metric_value(&metrics.render(Format::Classic), &series)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_record_and_queue_read_together_match_the_separate_reads() {
    let metrics = Metrics::new();
    let (_proxy, store) = store(&metrics).await;
    let deadline = Instant::now() + WAIT;

    assert_eq!(agree(&store, "never-written").await, (None, Vec::new()));

    let held = LockRecord {
        queued: Some(5),
        ..LockRecord::default()
    };
    let created = store
        .write(&name("held"), RecordWrite::Create(&held), deadline)
        .await;
    assert!(
        matches!(created, Ok(WriteOutcome::Written { .. })),
        "{created:?}"
    );
    // Without a queue container yet: no waiter.
    assert_eq!(
        agree(&store, "held").await,
        (Some(held.clone()), Vec::new())
    );
    for (key, priority) in [("first", 1), ("urgent", 5), ("second", 1)] {
        store
            .enqueue(&name("held"), &ticket(key, priority), deadline)
            .await
            .unwrap();
    }
    let (record, queue) = agree(&store, "held").await;
    assert_eq!(record.and_then(|r| r.queued), Some(5));
    assert_eq!(queue, ["urgent", "first", "second"], "service order");

    // A nested name makes its parent an empty container: no record, but a node.
    let child = store
        .write(
            &name("parent/child"),
            RecordWrite::Create(&LockRecord::default()),
            deadline,
        )
        .await;
    assert!(
        matches!(child, Ok(WriteOutcome::Written { .. })),
        "{child:?}"
    );
    let parent = store
        .read_with_queue(&name("parent"), Fresh::Any, deadline)
        .await
        .unwrap()
        .0
        .expect("the parent node exists");
    assert!(!parent.version.holds_record() && parent.version.has_nested());
    agree(&store, "parent").await;

    let before = count(&metrics, "multi_read");
    store
        .read_with_queue(&name("held"), Fresh::Any, deadline)
        .await
        .unwrap();
    assert_eq!(count(&metrics, "multi_read"), before + 1, "one request");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_read_together_fails_within_its_deadline() {
    let metrics = Metrics::new();
    let (proxy, store) = store(&metrics).await;
    proxy.set_mode(Mode::DelayReplies(Duration::from_secs(5)));
    let started = Instant::now();
    let read = store
        .read_with_queue(
            &name("slow"),
            Fresh::Any,
            started + Duration::from_millis(300),
        )
        .await;
    assert!(matches!(read, Err(StoreError::Unavailable(_))), "{read:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "kept to its deadline"
    );
    proxy.set_mode(Mode::Pass);
    common::eventually(WAIT, "ZooKeeper answers again", || async {
        store
            .read_with_queue(
                &name("slow"),
                Fresh::Any,
                Instant::now() + Duration::from_secs(2),
            )
            .await
            .is_ok()
    })
    .await;
}
