//! A queue entry whose create's answer is lost. The join settles it by listing the queue on
//! the very client the create went out on (`join_queue` in src/store/zk/queue.rs): that
//! client sends the listing after the create, a reconnection or not, so the listing shows the
//! entry if the create landed. The caller then keeps that one entry: the join makes no second
//! one (with the listing's find turned off, it made two, which the caller's waiting cleared
//! up later), the caller is handed the lock in its turn, and nothing is left queued after it.
//!
//! On a real ZooKeeper behind `common::late_write`: the entry's create is held for 200 ms
//! while its client's connection is closed, then reaches the server, which applies it; the
//! session cannot resume for a second, so the listing goes out on a new connection after it.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::framing::op;
use common::late_write::LateWrite;
use common::{eventually, service_behind, waiting, zk};
use reqwest::StatusCode;

/// Answered ZooKeeper creates (their answer an error or not).
const CREATES: &str = "lockwarden_zookeeper_request_duration_seconds_count{operation=\"create\"}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_answer_to_a_queue_entry_create_leaves_one_entry() {
    let target = format!("127.0.0.1:{}", zk::shared().port).parse().unwrap();
    let hold = Duration::from_millis(200);
    let window = Duration::from_millis(1000);
    let proxy = LateWrite::start(target, &[op::CREATE, op::CREATE2], hold, hold, window);
    // Long enough for the session to resume before the listing that settles the create runs
    // out of time.
    let svc = Arc::new(service_behind(proxy.addr(), 5000).await);
    // A waiter ahead keeps the lock's queue (an emptied container is soon removed), so that
    // the only create of the join below is its entry's.
    let first = svc.must_acquire("entry", "first", 60_000).await;
    let ahead = waiting::queued(&svc, "entry", "ahead");
    svc.wait_for_waiters("entry", 1).await;
    // Record writes are `multi`s, and a queue's container is made with another request type.
    let creates_before = svc.metric(CREATES).await;
    proxy.arm();
    let waiter = waiting::queued(&svc, "entry", "next");
    eventually(
        Duration::from_secs(10),
        "the held create is sent on",
        || async { proxy.delivered() },
    )
    .await;
    // The listing that settles the create goes out once the session resumes, and the join
    // ends there; a lock handed on before that would not show which entry the caller kept.
    eventually(Duration::from_secs(10), "the session resumes", || async {
        proxy.resumed()
    })
    .await;
    // The join may not have ended yet (its settling listing waits for the session).
    eventually(Duration::from_secs(10), "the caller is queued", || async {
        let (status, info) = svc.get("/v1/locks/entry").await;
        status == StatusCode::OK && info["waiters"] == 2
    })
    .await;
    assert_eq!(
        svc.metric(CREATES).await - creates_before,
        1,
        "the join made one entry: the one whose answer was lost"
    );
    let release = |lease: &serde_json::Value| {
        let lease = lease["lease_id"].as_str().unwrap().to_owned();
        let svc = svc.clone();
        async move {
            let (status, released) = svc.release("entry", &lease).await;
            assert_eq!(status, StatusCode::OK, "{released}");
        }
    };
    release(&first).await;
    release(&waiting::granted(ahead, "ahead").await).await;
    let granted = waiting::granted(waiter, "next").await;
    let info = svc.info("entry").await;
    assert_eq!(info["waiters"], 0, "no second entry is left: {info}");
    assert_eq!(info["fencing_token"], granted["fencing_token"], "{info}");
}
