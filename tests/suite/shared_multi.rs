//! Shared multis (`store::zk::batch`): once `--zk-writes-in-flight` record writes wait for
//! ZooKeeper, further ones wait and go out together in one `multi`. On a real ZooKeeper,
//! with replies slowed by the fault proxy so that writes certainly queue: each write keeps
//! its own conditions (one lock is granted once), a caller that stops waiting is never
//! written for afterwards, and through the service every owner holds its own lock with
//! rising fencing tokens, also when the answer to a shared `multi` is lost.

use crate::common;

use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use common::framing::op;
use common::instance::{Instance, InstanceOptions};
use common::nemesis::instance_flags;
use common::proxy::{Mode, Proxy};
use common::{eventually, unique_root, zk, Service};
use lockwarden::metrics::{Format, Metrics};
use lockwarden::model::LockName;
use lockwarden::record::LockRecord;
use lockwarden::store::zk::ZkStore;
use lockwarden::store::Reads;
use lockwarden::store::{Fresh, LockStore, RecordWrite, StoreError, WriteOutcome};
use reqwest::StatusCode;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(20);

/// A store on the shared ZooKeeper through `proxy`, sharing multis past one write in flight.
fn store_via(proxy: &Proxy, metrics: &Metrics) -> ZkStore {
    zk::store_at(proxy.connect_string(), metrics, 1)
}

fn proxy() -> Proxy {
    let zk_addr = format!("127.0.0.1:{}", zk::shared().port).parse().unwrap();
    Proxy::start(zk_addr)
}

fn name(raw: &str) -> LockName {
    LockName::parse(raw).unwrap()
}

/// A free record told apart from others by its queue mark.
fn marked(mark: u32) -> LockRecord {
    LockRecord {
        queued: Some(mark),
        ..LockRecord::default()
    }
}

fn metric(metrics: &Metrics, series_name: &str) -> u64 {
    common::metric_value(&metrics.render(Format::Classic), series_name)
}

const ALONE: &str = "lockwarden_zookeeper_record_writes_total{how=\"alone\"}";
const SHARED: &str = "lockwarden_zookeeper_record_writes_total{how=\"shared\"}";
const WAITING: &str = "lockwarden_zookeeper_record_writes_waiting";

/// Starts a write that holds the one slot for as long as the proxy delays its answer, and
/// returns once it is in flight.
async fn occupy_the_slot(
    store: &Arc<ZkStore>,
    metrics: &Metrics,
    lock: &str,
) -> tokio::task::JoinHandle<Result<WriteOutcome, StoreError>> {
    let before = metric(metrics, ALONE);
    let (store2, lock) = (store.clone(), name(lock));
    let slow = tokio::spawn(async move {
        let deadline = Instant::now() + WAIT;
        store2
            .write(&lock, RecordWrite::Create(&marked(0)), deadline)
            .await
    });
    eventually(WAIT, "the first write is in flight", || async {
        metric(metrics, ALONE) > before
    })
    .await;
    slow
}

/// Once the store reaches ZooKeeper and its lock root exists (so that later creates need no
/// parents made first).
async fn ready(store: &ZkStore) {
    let deadline = Instant::now() + WAIT;
    store
        .ready(deadline)
        .await
        .expect("the store reaches ZooKeeper");
    let warm = store
        .write(&name("warm-up"), RecordWrite::Create(&marked(0)), deadline)
        .await;
    assert!(written(&warm), "{warm:?}");
}

/// A store through a fault proxy of its own, reaching ZooKeeper and with its lock root made.
async fn ready_store() -> (Proxy, Metrics, Arc<ZkStore>) {
    let proxy = proxy();
    let metrics = Metrics::new();
    let store = Arc::new(store_via(&proxy, &metrics));
    ready(&store).await;
    (proxy, metrics, store)
}

fn written(outcome: &Result<WriteOutcome, StoreError>) -> bool {
    matches!(outcome, Ok(WriteOutcome::Written { .. }))
}

/// Writes queued behind a slow one go out together; those of one lock, all planned on the
/// same state, grant it once, and every write of its own lock lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_queued_together_keep_their_own_conditions() {
    let (proxy, metrics, store) = ready_store().await;
    proxy.set_mode(Mode::DelayReplies(Duration::from_millis(300)));
    let slow = occupy_the_slot(&store, &metrics, "slot").await;
    let mut tasks = Vec::new();
    for i in 0..6u32 {
        for lock in ["contested".to_owned(), format!("own-{i}")] {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let deadline = Instant::now() + WAIT;
                let outcome = store
                    .write(&name(&lock), RecordWrite::Create(&marked(i + 1)), deadline)
                    .await;
                (lock, i + 1, outcome)
            }));
        }
    }
    eventually(WAIT, "the writes wait for the slot", || async {
        metric(&metrics, WAITING) > 0
    })
    .await;
    assert!(written(&slow.await.unwrap()));
    let mut winners = Vec::new();
    for task in tasks {
        let (lock, mark, outcome) = task.await.unwrap();
        if lock == "contested" {
            match outcome {
                Ok(WriteOutcome::Written { .. }) => winners.push(mark),
                Ok(WriteOutcome::Conflict) => {}
                other => panic!("{lock}: {other:?}"),
            }
        } else {
            assert!(written(&outcome), "{lock}: {outcome:?}");
            let stored = store
                .read(&name(&lock), Fresh::Any, Instant::now() + WAIT)
                .await;
            assert_eq!(stored.unwrap().unwrap().record.queued, Some(mark));
        }
    }
    assert_eq!(winners.len(), 1, "one lock, one create: {winners:?}");
    let stored = store
        .read(&name("contested"), Fresh::Any, Instant::now() + WAIT)
        .await;
    assert_eq!(stored.unwrap().unwrap().record.queued, Some(winners[0]));
    assert!(metric(&metrics, SHARED) > 0, "some writes shared a multi");

    // Conditional updates of one record, all planned on the version just read: one lands.
    let version = store
        .read(&name("contested"), Fresh::Any, Instant::now() + WAIT)
        .await
        .unwrap()
        .unwrap()
        .version;
    let slow = occupy_the_slot(&store, &metrics, "slot-2").await;
    let updates: Vec<_> = (10..16u32)
        .map(|mark| {
            let store = store.clone();
            tokio::spawn(async move {
                let deadline = Instant::now() + WAIT;
                let outcome = store
                    .write(
                        &name("contested"),
                        RecordWrite::Update(&marked(mark), version),
                        deadline,
                    )
                    .await;
                (mark, outcome)
            })
        })
        .collect();
    assert!(written(&slow.await.unwrap()));
    let mut landed = Vec::new();
    for update in updates {
        let (mark, outcome) = update.await.unwrap();
        match outcome {
            Ok(WriteOutcome::Written { .. }) => landed.push(mark),
            Ok(WriteOutcome::Conflict) => {}
            other => panic!("update {mark}: {other:?}"),
        }
    }
    assert_eq!(landed.len(), 1, "one version, one update: {landed:?}");
    let stored = store
        .read(&name("contested"), Fresh::Any, Instant::now() + WAIT)
        .await;
    assert_eq!(stored.unwrap().unwrap().record.queued, Some(landed[0]));
    proxy.set_mode(Mode::Pass);
}

/// A queued write whose caller stops waiting (its deadline passes, or its call is dropped)
/// is withdrawn and never sent: a write queued after it, which would go out in the same
/// multi or a later one, lands, and the withdrawn ones never do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_caller_stopped_waiting_is_never_sent() {
    let (proxy, metrics, store) = ready_store().await;
    // Long enough that the slot stays taken until both withdrawn writes are done with.
    proxy.set_mode(Mode::DelayReplies(Duration::from_millis(2_000)));
    let slow = occupy_the_slot(&store, &metrics, "slot").await;

    let soon = Instant::now() + Duration::from_millis(100);
    let expired = store
        .write(&name("expired"), RecordWrite::Create(&marked(1)), soon)
        .await;
    assert!(
        matches!(expired, Err(StoreError::OutcomeUnknown(_))),
        "{expired:?}"
    );
    let dropped = {
        let store = store.clone();
        tokio::spawn(async move {
            let deadline = Instant::now() + WAIT;
            store
                .write(&name("dropped"), RecordWrite::Create(&marked(2)), deadline)
                .await
        })
    };
    eventually(WAIT, "the dropped call's write waits", || async {
        metric(&metrics, WAITING) == 1
    })
    .await;
    dropped.abort();
    eventually(WAIT, "the dropped call's write is withdrawn", || async {
        metric(&metrics, WAITING) == 0
    })
    .await;
    let after = store
        .write(
            &name("after"),
            RecordWrite::Create(&marked(3)),
            Instant::now() + WAIT,
        )
        .await;
    assert!(written(&after), "{after:?}");
    assert!(written(&slow.await.unwrap()));
    proxy.set_mode(Mode::Pass);
    for gone in ["expired", "dropped"] {
        let found = store
            .read(&name(gone), Fresh::Any, Instant::now() + WAIT)
            .await
            .unwrap();
        assert!(found.is_none(), "{gone} was written: {found:?}");
    }
}

/// Through the service, many owners each cycle their own lock while writes share multis:
/// every acquire and release succeeds, each lock's fencing tokens rise, and nothing is left
/// held. Repeated until writes have shared a multi (whether they do depends on timing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owners_of_their_own_locks_each_hold_theirs_while_writes_share() {
    let svc = Arc::new(Service::zk_with(|a| a.zk_writes_in_flight = 1).await);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut round = 0;
    loop {
        round += 1;
        let owners: Vec<_> = (0..24)
            .map(|i| {
                let svc = svc.clone();
                tokio::spawn(async move {
                    let lock = format!("own-{i}");
                    let mut last_token = 0;
                    for _ in 0..4 {
                        let body = svc.must_acquire(&lock, &format!("o{i}"), 30_000).await;
                        let token = body["fencing_token"].as_u64().unwrap();
                        assert!(token > last_token, "{lock}: {token} after {last_token}");
                        last_token = token;
                        let info = svc.info(&lock).await;
                        assert_eq!(info["owner"], format!("o{i}"), "{info}");
                        let lease = body["lease_id"].as_str().unwrap();
                        let (status, answer) = svc.release(&lock, lease).await;
                        assert_eq!(status, StatusCode::OK, "{answer}");
                    }
                })
            })
            .collect();
        for owner in owners {
            owner.await.unwrap();
        }
        for i in 0..24 {
            let info = svc.info(&format!("own-{i}")).await;
            assert!(info["owner"].is_null(), "own-{i} left held: {info}");
        }
        let text = svc.metrics().await;
        if common::metric_value(&text, SHARED) > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no write shared a multi in {round} rounds"
        );
    }
}

/// The connection is cut right after a `multi` goes out while owners cycle their own
/// locks, so that most likely a shared one loses its answer. Every caller learns the
/// truth: a 200 means it holds the lock with the lease it was told, anything else leaves
/// the lock free (no lease granted to a caller who was told otherwise).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_answer_to_a_shared_multi_is_settled_for_each_write() {
    let root = unique_root();
    let proxy = proxy();
    let mut flags = instance_flags(&proxy.connect_string(), &root);
    flags.extend(["--zk-writes-in-flight".to_owned(), "1".to_owned()]);
    let instance = Arc::new(Instance::start(InstanceOptions::new(&flags)).await);
    // The lock root is made before the replies are slowed.
    let body = json!({"owner": "warm-up", "lease_ms": 60_000});
    let (status, warm) = instance.post("/v1/locks/warm-up/acquire", body).await;
    assert_eq!(status, StatusCode::OK, "{warm}");
    proxy.set_mode(Mode::DelayReplies(Duration::from_millis(100)));
    let acquire = |lock: String| {
        let instance = instance.clone();
        tokio::spawn(async move {
            let body = json!({"owner": lock.clone(), "lease_ms": 60_000});
            let (status, answer) = instance
                .post(&format!("/v1/locks/{lock}/acquire"), body)
                .await;
            (lock, status, answer)
        })
    };
    // One acquire's write holds the slot while the proxy delays its answer; the others queue.
    let tasks: Vec<_> = (0..8).map(|i| acquire(format!("lost-{i}"))).collect();
    eventually(WAIT, "several writes wait to share a multi", || async {
        common::metric_value(&instance.metrics().await, WAITING) >= 3
    })
    .await;
    proxy.set_mode(Mode::CutAfter {
        ops: vec![op::MULTI],
        refuse_for: Duration::from_millis(300),
    });
    let mut answers: Vec<(String, StatusCode, Value)> = Vec::new();
    for task in tasks {
        answers.push(task.await.unwrap());
    }
    assert_eq!(proxy.fired(), 1, "a multi's answer was cut off");
    for (lock, status, answer) in answers {
        let (_, info) = instance.get(&format!("/v1/locks/{lock}")).await;
        if status == StatusCode::OK {
            assert_eq!(info["owner"], lock, "{lock}: {info}");
            let lease = answer["lease_id"].as_str().unwrap();
            let (released, body) = instance
                .post(
                    &format!("/v1/locks/{lock}/release"),
                    json!({"lease_id": lease}),
                )
                .await;
            assert_eq!(released, StatusCode::OK, "{lock}: {body}");
        } else {
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{lock}: {answer}");
            // A grant whose answer was lost is undone by the service itself.
            eventually(WAIT, "the lock is free", || async {
                instance.get(&format!("/v1/locks/{lock}")).await.1["owner"].is_null()
            })
            .await;
        }
    }
    let text = instance.metrics().await;
    assert!(
        common::metric_value(&text, SHARED) > 0,
        "writes shared a multi"
    );
}

/// A write waiting for a slot when its session's connection drops is not sent into the
/// disconnected session (where it could land after its caller had given up and read the
/// outcome elsewhere): its caller is told of a conflict, and once the session is back the
/// record is still at the version that write was planned on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_write_is_not_sent_on_a_session_that_no_longer_serves() {
    let (proxy, metrics, store) = ready_store().await;
    let target = name("target");
    let created = store
        .write(
            &target,
            RecordWrite::Create(&marked(1)),
            Instant::now() + WAIT,
        )
        .await;
    assert!(written(&created), "{created:?}");
    let read = store.read(&target, Fresh::Any, Instant::now() + WAIT).await;
    let version = read.unwrap().unwrap().version;

    proxy.set_mode(Mode::DelayReplies(Duration::from_millis(2_000)));
    let slow = occupy_the_slot(&store, &metrics, "slot").await;
    let stranded = {
        let (store, target) = (store.clone(), target.clone());
        tokio::spawn(async move {
            let deadline = Instant::now() + Duration::from_secs(3);
            store
                .write(&target, RecordWrite::Update(&marked(2), version), deadline)
                .await
        })
    };
    eventually(WAIT, "the write waits for the slot", || async {
        metric(&metrics, WAITING) == 1
    })
    .await;
    // The connection drops: the write in flight loses its answer and frees the slot.
    proxy.set_mode(Mode::Refuse);
    let answer = stranded.await.unwrap();
    assert!(
        matches!(answer, Ok(WriteOutcome::Conflict)),
        "the waiting write is not sent: {answer:?}"
    );
    let _ = slow.await.unwrap();
    proxy.set_mode(Mode::Pass);
    // A write at the version the stranded one was planned on lands once the primary session
    // serves again (before that it conflicts, or waits): had the stranded write been left
    // in that session's outbox, it would have gone out first and moved the version on.
    eventually(WAIT, "a write at the old version lands", || async {
        let deadline = Instant::now() + Duration::from_secs(2);
        let again = store
            .write(&target, RecordWrite::Update(&marked(3), version), deadline)
            .await;
        written(&again)
    })
    .await;
    let now = store.read(&target, Fresh::Any, Instant::now() + WAIT).await;
    assert_eq!(now.unwrap().unwrap().record.queued, Some(3));
}
