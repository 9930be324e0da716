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
//! A hand-off found landed that way is told to its waiter on the instance, as a landed one
//! is: the waiter's watch is on the session the write was lost on.
//!
//! A call that does not get to see its write land (its caller left, or its rounds ran out)
//! has its possible grant undone by a guard, which must keep looking for as long as the
//! write may still land (`service::leaving::UndoGrant`); a release's possible hand-off is
//! told to its waiter here by a guard of the same kind (`service::unsettled`).
//!
//! On a real ZooKeeper behind `common::late_write`: the first `multi` after arming is held
//! for `HOLD` while its client's connection is closed; the instance's stand-in reads the
//! record before the held write lands, and its own write reaches the server after it.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::framing::op;
use common::late_write::LateWrite;
use common::{service_behind, waiting, zk, Service, ADMIN_BEHIND};
use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

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

/// Runs `call` with the proxy armed: its first write is held, and lands after the stand-in
/// read the record.
async fn landing_late<F>(proxy: &LateWrite, call: F) -> (StatusCode, Value)
where
    F: std::future::Future<Output = (StatusCode, Value)>,
{
    proxy.arm();
    let answer = call.await;
    assert!(proxy.delivered(), "the held write went to the server");
    assert!(
        proxy.read_first(),
        "the stand-in read the record before it landed"
    );
    answer
}

/// `name` held by "first" (its grant returned), and "next" queued for it.
async fn held_with_a_waiter(
    svc: &Arc<Service>,
    name: &str,
) -> (Value, JoinHandle<(StatusCode, Value)>) {
    let held = svc.must_acquire(name, "first", 60_000).await;
    let waiter = waiting::queued(svc, name, "next");
    svc.wait_for_waiters(name, 1).await;
    (held, waiter)
}

/// The waiter was handed the lock, and holds it. It hears so from the release here: its
/// watch is on the session the hand-off was lost on, and no session has resumed through the
/// proxy when its grant arrives (before, it heard only when that session came back and
/// found itself expired, 13 s in, and sometimes only `503`).
async fn the_waiter_holds(
    proxy: &LateWrite,
    svc: &Service,
    name: &str,
    waiter: JoinHandle<(StatusCode, Value)>,
) {
    let granted = waiting::granted(waiter, "next").await;
    assert!(
        !proxy.resumed(),
        "the waiter heard of its grant only once a session resumed"
    );
    let info = svc.info(name).await;
    assert_eq!(info["owner"], "next", "the waiter keeps the lock: {info}");
    assert_eq!(info["fencing_token"], granted["fencing_token"], "{info}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_that_lands_after_its_read_back_is_the_callers() {
    let (proxy, svc) = behind_late_write().await;
    let body = json!({"owner": "late", "lease_ms": 60_000});
    let (status, granted) = landing_late(&proxy, svc.acquire("landed-late", body)).await;
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
    let (held, waiter) = held_with_a_waiter(&svc, "handed-late").await;
    let lease = held["lease_id"].as_str().unwrap();
    let (status, released) = landing_late(&proxy, svc.release("handed-late", lease)).await;
    assert_eq!(status, StatusCode::OK, "{released}");
    the_waiter_holds(&proxy, &svc, "handed-late", waiter).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_hand_off_that_lands_after_its_read_back_ends_one_hold() {
    let (proxy, svc) = behind_late_write().await;
    let (_, waiter) = held_with_a_waiter(&svc, "forced-late").await;
    let force = svc.send("DELETE", "/v1/locks/forced-late", None, Some(ADMIN_BEHIND));
    let (status, forced) = landing_late(&proxy, force).await;
    assert_eq!(status, StatusCode::OK, "{forced}");
    the_waiter_holds(&proxy, &svc, "forced-late", waiter).await;
}

/// A release whose caller goes away while its hand-off is on its way (no session serves the
/// instance until then, so the call learns nothing), and the write lands later: the waiter
/// here hears of its grant from what the release left behind (`service::unsettled`), before
/// any session resumes through the proxy. Before, it sat on its watch of the session the
/// write was lost on until that session came back or ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_off_that_lands_after_its_releaser_left_is_told_to_its_waiter() {
    let (proxy, svc) = behind_late_write().await;
    let (held, waiter) = held_with_a_waiter(&svc, "left-late").await;
    let lease = held["lease_id"].as_str().unwrap().to_owned();
    proxy.refuse_fresh_for(Duration::from_millis(800));
    proxy.arm();
    let call = {
        let svc = svc.clone();
        tokio::spawn(async move { svc.release("left-late", &lease).await })
    };
    common::eventually(Duration::from_secs(5), "the hand-off held", || async {
        proxy.fired()
    })
    .await;
    call.abort();
    assert!(
        !proxy.delivered(),
        "the caller left before its hand-off landed"
    );
    the_waiter_holds(&proxy, &svc, "left-late", waiter).await;
}

/// A caller that goes away while its grant is on its way: the call's guard undoes whatever
/// it may have granted. No session serves the instance until the caller has gone (so the
/// call writes nothing more), and the grant lands after the guard's first read: the guard
/// must look again until no write of the call can still land, or the lock sits held by a
/// lease nobody knows until it runs out (60 s here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_that_lands_after_its_caller_left_is_undone() {
    let (proxy, svc) = behind_late_write().await;
    proxy.refuse_fresh_for(Duration::from_millis(800));
    proxy.arm();
    let call = {
        let svc = svc.clone();
        tokio::spawn(async move {
            let body = json!({"owner": "gone", "lease_ms": 60_000});
            svc.acquire("undone-late", body).await
        })
    };
    common::eventually(Duration::from_secs(5), "the grant held", || async {
        proxy.fired()
    })
    .await;
    // The caller leaves: its connection closes, and the service drops the call.
    call.abort();
    assert!(
        !proxy.delivered(),
        "the caller left before its grant landed"
    );
    common::eventually(Duration::from_secs(10), "the held write landed", || async {
        proxy.delivered()
    })
    .await;
    assert!(
        proxy.read_first(),
        "the guard read the lock before the grant landed"
    );
    // The grant created the record; it is there, and free again long before the lease ends.
    let zk = common::zk_client(zk::shared()).await;
    let path = format!("{}/locks/undone-late", svc.root);
    common::eventually(Duration::from_secs(14), "the late grant undone", || async {
        let exists = zk.check_stat(&path).await.unwrap().is_some();
        let (status, info) = svc.get("/v1/locks/undone-late").await;
        exists && status == StatusCode::OK && info["state"] == "free"
    })
    .await;
}
