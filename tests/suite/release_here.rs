//! A waiter at the head of a lock whose holder is likely to release on the same instance
//! first waits for that release there, in process, before it watches the record in
//! ZooKeeper (`await_release_here` in `service::joining`, `--head-grace-ms`). On a real
//! ZooKeeper, with two instances on one lock root and a grace long enough that a change
//! through the other instance always lands inside it: a release, a renewal and a force
//! release made elsewhere still reach the waiter (when the grace ends), and such a miss
//! turns the grace off for that lock on that instance; a busy lock handed over on one
//! instance sets no watch at all, and does with the grace off.

use crate::common;

use std::sync::Arc;

use common::waiting::{granted, queued};
use common::{unique_root, zk, zk_args, Service};
use reqwest::StatusCode;
use serde_json::json;

const ADMIN: &str = "admin-secret";
/// Longer than any test step takes, so that a change made through the other instance always
/// lands inside the grace.
const LONG_GRACE_MS: u64 = 3_000;

/// Instance A, with the head's grace `grace_ms`, and instance B, which accepts `ADMIN`, on
/// one lock root of the shared ZooKeeper.
async fn two_instances(grace_ms: u64) -> (Arc<Service>, Service) {
    let root = unique_root();
    let mut a_args = zk_args(zk::shared(), &root);
    a_args.head_grace_ms = grace_ms;
    let mut b_args = zk_args(zk::shared(), &root);
    b_args.admin_token = Some(ADMIN.into());
    let a = Service::start(a_args).await;
    let b = Service::start(b_args).await;
    (Arc::new(a), b)
}

async fn graces(svc: &Service, outcome: &str) -> u64 {
    svc.metric(&format!(
        "lockwarden_head_graces_total{{outcome=\"{outcome}\"}}"
    ))
    .await
}

async fn exists_requests(svc: &Service) -> u64 {
    let series = "lockwarden_zookeeper_request_duration_seconds_count{operation=\"exists\"}";
    svc.metric(series).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_made_elsewhere_reaches_a_waiter_in_its_grace_and_ends_the_grace_for_the_lock() {
    let (a, b) = two_instances(LONG_GRACE_MS).await;
    for round in 0..2 {
        let held = a.must_acquire("elsewhere", "holder", 60_000).await;
        let next = queued(&a, "elsewhere", "next");
        a.wait_for_waiters("elsewhere", 1).await;
        let (status, released) = b
            .release("elsewhere", held["lease_id"].as_str().unwrap())
            .await;
        assert_eq!(status, StatusCode::OK, "{released}");
        assert_eq!(released["lock"]["owner"], "next", "B hands the lock over");
        let grant = granted(next, "next").await;
        assert!(grant["fencing_token"].as_u64() > held["fencing_token"].as_u64());
        // The first time, `next` heard only when its grace ran out; from then on the lock
        // gets no grace on A, and the second `next` watched at once.
        assert_eq!(graces(&a, "ran_out").await, 1, "round {round}");
        assert_eq!(graces(&a, "missed").await, 1, "round {round}");
        let (status, _) = a
            .release("elsewhere", grant["lease_id"].as_str().unwrap())
            .await;
        assert_eq!(status, StatusCode::OK);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_and_a_release_made_elsewhere_reach_a_waiter_behind_a_local_hand_off() {
    let (a, b) = two_instances(LONG_GRACE_MS).await;
    let held = a.must_acquire("renewed", "holder", 60_000).await;
    let first = queued(&a, "renewed", "first");
    a.wait_for_waiters("renewed", 1).await;
    let second = queued(&a, "renewed", "second");
    a.wait_for_waiters("renewed", 2).await;
    // A hands the lock to its own `first`, in `first`'s grace: `second` then heads the
    // queue behind a holder granted here, and waits in a grace of its own.
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
    assert_eq!(graces(&a, "missed").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_force_release_made_elsewhere_reaches_a_waiter_in_its_grace() {
    let (a, b) = two_instances(LONG_GRACE_MS).await;
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
    assert_eq!(graces(&a, "missed").await, 1);
}

/// Six waiters take a lock in turn on one instance, each holder letting go as soon as it
/// hears; returns how many `exists` requests the instance sent meanwhile.
async fn watches_for_a_busy_lock(grace_ms: u64) -> u64 {
    let a = Arc::new(Service::zk_with(|args| args.head_grace_ms = grace_ms).await);
    let held = a.must_acquire("busy", "holder", 60_000).await;
    let before = exists_requests(&a).await;
    let mut waiters = Vec::new();
    for i in 0..6 {
        let who = format!("w{i}");
        waiters.push((queued(&a, "busy", &who), who));
        a.wait_for_waiters("busy", i + 1).await;
    }
    let mut lease = held["lease_id"].as_str().unwrap().to_owned();
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
    assert_eq!(graces(&a, "missed").await, 0);
    exists_requests(&a).await - before
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_lock_handed_over_on_one_instance_sets_no_watch_within_the_grace() {
    assert_eq!(watches_for_a_busy_lock(10_000).await, 0);
    assert!(
        watches_for_a_busy_lock(0).await >= 1,
        "with the grace off, each head watches the record"
    );
}
