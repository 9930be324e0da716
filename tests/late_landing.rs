//! A write that lands after the read meant to settle its lost answer (`service::outcome`).
//!
//! That read is ordered after the write only on the write's own session. While the primary
//! session is disconnected the read goes out on the stand-in (or, later, on a new session),
//! and a write the old connection's server had already taken in can land after it. The read
//! then says "not landed"; what keeps the caller's answer true is that a later round
//! recognises the write when it finds it: an acquire that finds its own new lease holding
//! the lock is granted (`AcquireDecision::OwnGrantLanded`), and a release or force release
//! that finds the hold it ended gone is done (`let_go`). Before, the acquire was answered
//! `409 lock_held` while its own lease held the lock, the release `409 not_owner` after its
//! hand-off landed, and the force release went on to force the waiter it had handed the lock
//! to out as well.
//!
//! On a real ZooKeeper behind `common::late_write`: the first `multi` after arming is held
//! for `HOLD` while its client's connection is closed; the instance's stand-in reads the
//! record before the held write lands, and its own write reaches the server after it.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::framing::op;
use common::late_write::LateWrite;
use common::{service_behind, waiting, zk, Service, ADMIN_BEHIND};
use reqwest::StatusCode;
use serde_json::json;

/// How long the write is held: the stand-in connects and reads well within it.
const HOLD: Duration = Duration::from_millis(1500);
/// How late the stand-in's writes reach the server: after the held one.
const FRESH_DELAY: Duration = Duration::from_millis(2500);
/// How long the primary session cannot resume (within its 10-s timeout).
const WINDOW: Duration = Duration::from_millis(7000);
/// Longer than `FRESH_DELAY`, so the stand-in's write is answered in time.
const STORE_TIMEOUT_MS: u64 = 5000;

async fn behind_late_write() -> (LateWrite, Arc<Service>) {
    let target = format!("127.0.0.1:{}", zk::shared().port).parse().unwrap();
    let proxy = LateWrite::start(target, &[op::MULTI], HOLD, FRESH_DELAY, WINDOW);
    let svc = Arc::new(service_behind(proxy.addr(), STORE_TIMEOUT_MS).await);
    (proxy, svc)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_that_lands_after_its_read_back_is_the_callers() {
    let (proxy, svc) = behind_late_write().await;
    proxy.arm();
    let (status, granted) = svc
        .acquire("landed-late", json!({"owner": "late", "lease_ms": 60_000}))
        .await;
    assert!(proxy.delivered(), "the held write went to the server");
    assert!(
        proxy.read_first(),
        "the stand-in read the record before it landed"
    );
    assert_eq!(status, StatusCode::OK, "{granted}");
    let info = svc.info("landed-late").await;
    assert_eq!(info["owner"], "late", "{info}");
    assert_eq!(info["fencing_token"], granted["fencing_token"], "{info}");
    let lease = granted["lease_id"].as_str().unwrap();
    let (status, released) = svc.release("landed-late", lease).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the lease is the caller's: {released}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_off_that_lands_after_its_read_back_is_a_release() {
    let (proxy, svc) = behind_late_write().await;
    let held = svc.must_acquire("handed-late", "first", 60_000).await;
    let waiter = waiting::queued(&svc, "handed-late", "next");
    svc.wait_for_waiters("handed-late", 1).await;
    proxy.arm();
    let (status, released) = svc
        .release("handed-late", held["lease_id"].as_str().unwrap())
        .await;
    assert!(proxy.delivered(), "the held write went to the server");
    assert!(
        proxy.read_first(),
        "the stand-in read the record before it landed"
    );
    assert_eq!(status, StatusCode::OK, "{released}");
    let granted = waiting::granted(waiter, "next").await;
    let info = svc.info("handed-late").await;
    assert_eq!(info["owner"], "next", "{info}");
    assert_eq!(info["fencing_token"], granted["fencing_token"], "{info}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_hand_off_that_lands_after_its_read_back_ends_one_hold() {
    let (proxy, svc) = behind_late_write().await;
    svc.must_acquire("forced-late", "first", 60_000).await;
    let waiter = waiting::queued(&svc, "forced-late", "next");
    svc.wait_for_waiters("forced-late", 1).await;
    proxy.arm();
    let (status, forced) = svc
        .send("DELETE", "/v1/locks/forced-late", None, Some(ADMIN_BEHIND))
        .await;
    assert!(proxy.delivered(), "the held write went to the server");
    assert!(
        proxy.read_first(),
        "the stand-in read the record before it landed"
    );
    assert_eq!(status, StatusCode::OK, "{forced}");
    let granted = waiting::granted(waiter, "next").await;
    let info = svc.info("forced-late").await;
    assert_eq!(info["owner"], "next", "the waiter keeps the lock: {info}");
    assert_eq!(info["fencing_token"], granted["fencing_token"], "{info}");
}
