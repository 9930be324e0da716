//! A waiting caller whose entry is gone when it looks again, on a real ZooKeeper and across
//! two instances. The waiter's instance is paused (SIGSTOP) while the lock changes hands, so
//! it cannot hear of anything until it is resumed:
//! - the lock was handed to it and taken from it at once (its `cleanup_ms` is 0): it is told
//!   its grant ended, `409 lease_ended`, with the lock as it is now. Its store is fine;
//! - its entry vanished with its instance's expired session: `503 store_unavailable`;
//! - the first case for a call with a `request_id`, whose queue key other calls with that
//!   id share: the record remembers its lease as the hold that ended last, so it is told
//!   `409 lease_ended` too.
//!
//! Either way nothing is left queued, and the lock goes on as if the caller had never come.

use crate::common;

use std::time::Duration;

use common::instance::{Instance, InstanceOptions};
use common::{eventually, send, unique_root, zk, zk_args, zk_flags, Service};
use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

const WAIT: Duration = Duration::from_secs(20);

/// `a` runs in process, `b` as a child process that can be paused; both on one lock root.
/// `b`'s ZooKeeper session lasts `session_ms`. A holder takes `lock` through `a`, then a
/// caller waits for it through `b` (priority 0, `cleanup_ms` 0, with `request_id` if given).
/// Returns once `a` sees the waiter queued.
async fn a_waiter_on_b(
    lock: &str,
    session_ms: u64,
    request_id: Option<&str>,
) -> (Service, Instance, String, JoinHandle<(StatusCode, Value)>) {
    let root = unique_root();
    let a = Service::start(zk_args(zk::shared(), &root)).await;
    let mut flags = zk_flags(zk::shared(), &root, &[]);
    // The collector's delay must cover a session's length (the service checks it).
    for (flag, value) in [
        ("--zk-session-timeout-ms", session_ms),
        ("--gc-delay-ms", 2_000 + session_ms * 2),
    ] {
        let at = flags.iter().position(|f| f == flag).unwrap();
        flags[at + 1] = value.to_string();
    }
    let b = Instance::start(InstanceOptions::new(&flags)).await;
    let held = a.must_acquire(lock, "holder", 60_000).await;
    let lease = held["lease_id"].as_str().unwrap().to_owned();
    let (base, path) = (b.base().to_owned(), format!("/v1/locks/{lock}/acquire"));
    let mut body = json!({"owner": "w", "lease_ms": 60_000, "waiting_ms": 30_000, "cleanup_ms": 0});
    if let Some(id) = request_id {
        body["request_id"] = json!(id);
    }
    let waiter = tokio::spawn(async move {
        let http = common::http_client();
        send(&http, &base, "POST", &path, Some(body), None).await
    });
    eventually(WAIT, "the waiter queued", || async {
        a.info(lock).await["waiters"] == 1
    })
    .await;
    (a, b, lease, waiter)
}

async fn answer(waiter: JoinHandle<(StatusCode, Value)>) -> (StatusCode, Value) {
    tokio::time::timeout(WAIT, waiter)
        .await
        .expect("the waiter is answered")
        .unwrap()
}

/// Pauses `b` while `a` hands `lock` to b's waiter and a priority-2 caller takes it from
/// it at once; resumes `b` and returns the preemptor's grant. b's session must outlive the
/// pause, so the tests that call this give it 15 s.
async fn hand_over_and_preempt(a: &Service, b: &Instance, lock: &str, lease: &str) -> Value {
    b.pause();
    let (status, released) = a.release(lock, lease).await;
    assert_eq!(status, StatusCode::OK, "{released}");
    let info = a.info(lock).await;
    assert_eq!(info["owner"], "w", "the release handed the lock on: {info}");
    let token_of_w = info["fencing_token"].as_u64().unwrap();
    let (status, preemptor) = a
        .acquire(
            lock,
            json!({"owner": "p", "lease_ms": 60_000, "priority": 2}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "w's cleanup_ms is 0: {preemptor}");
    assert!(preemptor["fencing_token"].as_u64().unwrap() > token_of_w);
    b.resume();
    preemptor
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_handed_the_lock_and_preempted_before_it_heard_is_told_its_grant_ended() {
    let (a, b, lease, waiter) = a_waiter_on_b("handed", 15_000, None).await;
    let preemptor = hand_over_and_preempt(&a, &b, "handed", &lease).await;

    let (status, body) = answer(waiter).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "lease_ended", "{body}");
    assert_eq!(body["lock"]["owner"], "p", "the lock as it is: {body}");
    assert_eq!(a.info("handed").await["waiters"], 0);
    let (status, released) = a
        .release("handed", preemptor["lease_id"].as_str().unwrap())
        .await;
    assert_eq!(status, StatusCode::OK, "{released}");
    assert_eq!(released["lock"]["state"], "free", "{released}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_entry_vanished_with_its_session_gets_store_unavailable() {
    let (a, b, lease, waiter) = a_waiter_on_b("expired", 4_000, None).await;
    b.pause();
    // Paused past its 4 s session timeout: ZooKeeper expires the session, and the entry goes.
    eventually(WAIT, "the paused instance's entry vanished", || async {
        a.info("expired").await["waiters"] == 0
    })
    .await;
    b.resume();

    let (status, body) = answer(waiter).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"]["code"], "store_unavailable", "{body}");
    let info = a.info("expired").await;
    assert_eq!(info["owner"], "holder", "the holder kept the lock: {info}");
    let (status, released) = a.release("expired", &lease).await;
    assert_eq!(status, StatusCode::OK, "{released}");
    assert_eq!(released["lock"]["state"], "free", "{released}");
}

/// Calls that share a `request_id` share a queue key, and one may remove an entry another
/// made or adopted, so a vanished entry alone does not tell such a call it was handed the
/// lock. The record does: it remembers the lease whose hold ended last, so the call is told
/// its grant ended, as its retry would be.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_request_id_the_same_loss_answers_lease_ended_too() {
    let (a, b, lease, waiter) = a_waiter_on_b("keyed", 15_000, Some("r-1")).await;
    let preemptor = hand_over_and_preempt(&a, &b, "keyed", &lease).await;

    let (status, body) = answer(waiter).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "lease_ended", "{body}");
    assert_eq!(a.info("keyed").await["owner"], "p");
    let (status, released) = a
        .release("keyed", preemptor["lease_id"].as_str().unwrap())
        .await;
    assert_eq!(status, StatusCode::OK, "{released}");
    assert_eq!(released["lock"]["state"], "free", "{released}");
}
