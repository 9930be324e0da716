//! A waiter whose predecessor in the queue waits on the same instance waits for that call to
//! end in process, instead of watching its node in ZooKeeper (`behind_waiter_here` in
//! `service::joining`). On a real ZooKeeper: a chain of waiters on one instance sets one
//! `exists` watch per waiter at the head instead of one per waiter per move, and goes on
//! when a waiter in the middle disconnects; and a waiter behind a local one goes on when a
//! release on another instance hands the lock to the one ahead.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::waiting::{granted, queued};
use common::{unique_root, zk, zk_args, Service};
use reqwest::StatusCode;
use serde_json::{json, Value};

async fn exists_requests(svc: &Service) -> u64 {
    let series = "lockwarden_zookeeper_request_duration_seconds_count{operation=\"exists\"}";
    svc.metric(series).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_of_local_waiters_watches_only_at_its_head_and_survives_a_leaver() {
    let svc = Arc::new(Service::zk().await);
    let held = svc.must_acquire("chain", "holder", 60_000).await;
    let before = exists_requests(&svc).await;
    let first = queued(&svc, "chain", "first");
    svc.wait_for_waiters("chain", 1).await;
    // This one's client gives up while it waits behind `first`.
    let impatient = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_millis(700))
        .build()
        .unwrap();
    let leaver = impatient
        .post(format!("{}/v1/locks/chain/acquire", svc.base))
        .json(&json!({"owner": "leaver", "lease_ms": 60_000, "waiting_ms": 30_000}))
        .send();
    let leaver = tokio::spawn(leaver);
    svc.wait_for_waiters("chain", 2).await;
    let third = queued(&svc, "chain", "third");
    svc.wait_for_waiters("chain", 3).await;
    let fourth = queued(&svc, "chain", "fourth");
    svc.wait_for_waiters("chain", 4).await;
    assert!(
        leaver.await.unwrap().is_err(),
        "the leaver's client gave up"
    );
    svc.wait_for_waiters("chain", 3).await;

    svc.release("chain", held["lease_id"].as_str().unwrap())
        .await;
    let lease = lease_of(granted(first, "first").await);
    svc.release("chain", &lease).await;
    let lease = lease_of(granted(third, "third").await);
    svc.release("chain", &lease).await;
    let lease = lease_of(granted(fourth, "fourth").await);
    svc.release("chain", &lease).await;

    // Each waiter watched the record once it headed the queue; watching each predecessor's
    // node as well (and again after the leaver went) would have made about twice as many.
    let watches = exists_requests(&svc).await - before;
    assert!(
        (1..=4).contains(&watches),
        "{watches} exists requests for the three waiters of a chain"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_behind_a_local_one_goes_on_after_a_hand_off_made_elsewhere() {
    let root = unique_root();
    let a = Arc::new(Service::start(zk_args(zk::shared(), &root)).await);
    let b = Service::start(zk_args(zk::shared(), &root)).await;
    let held = b.must_acquire("across", "holder", 60_000).await;
    let first = queued(&a, "across", "first");
    a.wait_for_waiters("across", 1).await;
    let second = queued(&a, "across", "second");
    a.wait_for_waiters("across", 2).await;

    // B hands the lock to A's first waiter, which learns it through its own watch; the
    // second, waiting on it in process, goes on when its call ends.
    let (status, released) = b
        .release("across", held["lease_id"].as_str().unwrap())
        .await;
    assert_eq!(status, StatusCode::OK, "{released}");
    assert_eq!(released["lock"]["owner"], "first");
    let lease = lease_of(granted(first, "first").await);
    let (status, released) = b.release("across", &lease).await;
    assert_eq!(status, StatusCode::OK, "{released}");
    assert_eq!(released["lock"]["owner"], "second");
    granted(second, "second").await;
}

fn lease_of(grant: Value) -> String {
    grant["lease_id"].as_str().unwrap().to_owned()
}
