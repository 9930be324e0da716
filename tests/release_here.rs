//! A waiter at the head of a lock whose holder got its grant on the same instance first
//! waits a few milliseconds for that holder's release there, in process, before it watches
//! the record in ZooKeeper (`release_here` in `service::joining`). The grace may delay such a
//! waiter, never strand it: on a real ZooKeeper, with two instances on one lock root, a
//! release, a renewal and a force release made through the other instance all reach it,
//! whether they land during the grace or after it, and a release through its own instance
//! still hands it the lock.

mod common;

use std::sync::Arc;

use common::waiting::{granted, queued};
use common::{unique_root, zk, zk_args, Service};
use reqwest::StatusCode;
use serde_json::json;

const ADMIN: &str = "admin-secret";

/// Two instances on one lock root of the shared ZooKeeper; the second accepts `ADMIN`.
async fn two_instances() -> (Arc<Service>, Service) {
    let root = unique_root();
    let a = Service::start(zk_args(zk::shared(), &root)).await;
    let mut b_args = zk_args(zk::shared(), &root);
    b_args.admin_token = Some(ADMIN.into());
    let b = Service::start(b_args).await;
    (Arc::new(a), b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_made_elsewhere_reaches_a_waiter_behind_a_holder_granted_here() {
    let (a, b) = two_instances().await;
    for round in 0..5 {
        let lock = &format!("elsewhere-{round}");
        let held = a.must_acquire(lock, "holder", 60_000).await;
        let next = queued(&a, lock, "next");
        a.wait_for_waiters(lock, 1).await;
        // At once: most likely while `next` is still in its grace.
        let (status, released) = b.release(lock, held["lease_id"].as_str().unwrap()).await;
        assert_eq!(status, StatusCode::OK, "{released}");
        assert_eq!(released["lock"]["owner"], "next", "B hands the lock over");
        let grant = granted(next, "next").await;
        assert!(grant["fencing_token"].as_u64() > held["fencing_token"].as_u64());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_and_a_release_made_elsewhere_reach_a_waiter_behind_a_local_hand_off() {
    let (a, b) = two_instances().await;
    let held = a.must_acquire("renewed", "holder", 60_000).await;
    let first = queued(&a, "renewed", "first");
    a.wait_for_waiters("renewed", 1).await;
    let second = queued(&a, "renewed", "second");
    a.wait_for_waiters("renewed", 2).await;
    // A hands the lock to its own `first`: `second` heads the queue behind a holder
    // granted here.
    let (status, released) = a
        .release("renewed", held["lease_id"].as_str().unwrap())
        .await;
    assert_eq!(status, StatusCode::OK, "{released}");
    let first = granted(first, "first").await;
    let lease = first["lease_id"].as_str().unwrap();
    let (status, renewed) = b
        .renew("renewed", json!({"lease_id": lease, "lease_ms": 60_000}))
        .await;
    assert_eq!(status, StatusCode::OK, "{renewed}");
    let (status, released) = b.release("renewed", lease).await;
    assert_eq!(status, StatusCode::OK, "{released}");
    assert_eq!(released["lock"]["owner"], "second");
    granted(second, "second").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_force_release_made_elsewhere_reaches_a_waiter_behind_a_holder_granted_here() {
    let (a, b) = two_instances().await;
    let held = a.must_acquire("forced", "stuck-job", 3_600_000).await;
    let next = queued(&a, "forced", "next");
    a.wait_for_waiters("forced", 1).await;
    let (status, reply) = b
        .send("DELETE", "/v1/locks/forced", None, Some(ADMIN))
        .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(reply["released"], true);
    granted(next, "next").await;
    assert!(
        !a.validate("forced", held["fencing_token"].as_u64().unwrap())
            .await,
        "the forced-out holder's token is fenced"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_lock_handed_over_here_goes_round_its_waiters_in_order() {
    let (a, _b) = two_instances().await;
    let held = a.must_acquire("busy", "holder", 60_000).await;
    let mut waiters = Vec::new();
    for i in 0..6 {
        let who = format!("w{i}");
        waiters.push((queued(&a, "busy", &who), who));
        a.wait_for_waiters("busy", i + 1).await;
    }
    let mut lease = held["lease_id"].as_str().unwrap().to_owned();
    // Each holder lets go as soon as it hears: the waiter behind it, in its grace, is
    // handed the lock in process.
    for (task, who) in waiters {
        let (status, released) = a.release("busy", &lease).await;
        assert_eq!(status, StatusCode::OK, "{released}");
        assert_eq!(released["lock"]["owner"], who.as_str(), "FIFO");
        lease = granted(task, &who).await["lease_id"]
            .as_str()
            .unwrap()
            .to_owned();
    }
    let (status, released) = a.release("busy", &lease).await;
    assert_eq!(status, StatusCode::OK, "{released}");
    assert_eq!(released["lock"]["state"], "free");
}
