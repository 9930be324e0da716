//! Event streams after leases run out with nobody touching them, on both stores: new lock
//! and prefix streams still open, the first stream still hears its lock, the hub reads
//! nothing while nothing changes, and SIGTERM ends an instance with streams open.

use crate::common;

use std::time::Duration;

use common::sse::SseStream;
use common::{unique_root, zk, zk_flags, Process, Service};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(10);
/// How soon a new stream must answer (headers and snapshot) whatever ran out before.
const ANSWER: Duration = Duration::from_secs(1);
const READS: &str = "lockwarden_event_hub_reads_total";

/// Opens a stream and reads its snapshot, within [`ANSWER`].
async fn opens_at_once(url: String) -> SseStream {
    let opening = async {
        let mut stream = SseStream::open(&url, None).await;
        stream.next_of("snapshot", ANSWER).await;
        stream
    };
    tokio::time::timeout(ANSWER, opening)
        .await
        .unwrap_or_else(|_| panic!("{url} gave no snapshot within {ANSWER:?}"))
}

/// A stream on `name` that has seen a lease of it run out with nobody touching the lock.
async fn seen_expire(svc: &Service, name: &str) -> SseStream {
    let mut stream = SseStream::open(&format!("{}/v1/locks/{name}/events", svc.base), None).await;
    stream.next_of("snapshot", WAIT).await;
    svc.must_acquire(name, "short", 300).await;
    stream.next_of("acquired", WAIT).await;
    let expired = stream.next_of("expired", WAIT).await;
    assert_eq!(expired.data["lock"]["state"], "expired");
    stream
}

async fn new_streams_answer_after_unattended_expiries(svc: Service) {
    let mut first = seen_expire(&svc, "a").await;
    // A second expiry, and one of a lock that only a prefix stream covers.
    let _prefix = opens_at_once(format!("{}/v1/events?prefix=p", svc.base)).await;
    svc.must_acquire("p1", "short", 300).await;
    seen_expire(&svc, "b").await;
    for path in [
        "/v1/locks/a/events",
        "/v1/locks/other/events",
        "/v1/events?prefix=",
        "/v1/events?prefix=a",
    ] {
        opens_at_once(format!("{}{path}", svc.base)).await;
    }

    // The first stream still hears its lock.
    let held = svc.must_acquire("a", "next", 60_000).await;
    let acquired = first.next_of("acquired", WAIT).await;
    assert_eq!(acquired.data["lock"]["owner"], "next");
    svc.release("a", held["lease_id"].as_str().unwrap()).await;
    first.next_of("released", WAIT).await;
}

async fn the_hub_reads_nothing_while_nothing_changes(svc: Service) {
    let _stream = seen_expire(&svc, "idle").await;
    // The stream's snapshot, the acquire and the lease's end: one read each. On ZooKeeper
    // the hub also reads what it follows when its watches are set (they may have missed a
    // change), and once per notification: an acquire changes more than one znode.
    let reads = svc.metric(READS).await;
    let zookeeper = svc.metrics().await.contains("lockwarden_zookeeper_");
    let most = if zookeeper { 6 } else { 3 };
    println!("hub reads for a snapshot, an acquire and an expiry: {reads}");
    assert!(
        (3..=most).contains(&reads),
        "{reads} reads for a snapshot, a change and an expiry"
    );
    // Nothing changes from here on: the count must stay put (a second, long enough for a
    // hub that reads in a loop to be seen doing it many times over).
    let deadline = std::time::Instant::now() + Duration::from_secs(1);
    while std::time::Instant::now() < deadline {
        assert_eq!(
            svc.metric(READS).await,
            reads,
            "the hub read with nothing changing"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

on_both_stores!(
    new_streams_answer_after_unattended_expiries,
    the_hub_reads_nothing_while_nothing_changes,
);

/// SIGTERM after an unattended expiry, with a lock stream and a prefix stream open: the
/// instance closes the streams and exits within its drain timeout.
async fn sigterm_closes_streams_and_exits(flags: Vec<String>) {
    let mut instance = Process::start(&flags).await;
    let http = common::http_client();
    let url = format!("{}/v1/locks/t/events", instance.base);
    let mut stream = SseStream::open(&url, None).await;
    stream.next_of("snapshot", WAIT).await;
    let (status, body) = common::send(
        &http,
        &instance.base,
        "POST",
        "/v1/locks/t/acquire",
        Some(json!({"owner": "o", "lease_ms": 300})),
        None,
    )
    .await;
    assert!(status.is_success(), "{body}");
    stream.next_of("expired", WAIT).await;
    let prefix = opens_at_once(format!("{}/v1/events?prefix=", instance.base)).await;

    let (status, took) = tokio::task::spawn_blocking(move || {
        let stopped = instance.terminate();
        (stopped, instance)
    })
    .await
    .map(|(stopped, _)| stopped.expect("the instance exits within its drain timeout"))
    .unwrap();
    assert!(status.success(), "exit status {status:?}");
    println!("SIGTERM → exit: {took:?}");
    // Open streams end at once instead of holding the drain (9 s) to its end.
    assert!(
        took < Duration::from_secs(5),
        "the streams held the drain up: {took:?}"
    );
    // The streams end (not merely stop): whatever heartbeats came first, then the end.
    for mut stream in [stream, prefix] {
        let deadline = std::time::Instant::now() + WAIT;
        while stream.next_item(WAIT).await.is_some() {
            assert!(
                std::time::Instant::now() < deadline,
                "the stream was not closed"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_an_instance_with_open_streams_in_memory() {
    sigterm_closes_streams_and_exits(vec!["--max-clock-skew-ms".into(), "0".into()]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_an_instance_with_open_streams_on_zookeeper() {
    sigterm_closes_streams_and_exits(zk_flags(zk::shared(), &unique_root(), &[])).await;
}
