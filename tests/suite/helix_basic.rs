//! Apache Helix's eight basic-lock tests (TestZKHelixNonblockingLock), translated to HTTP.
//! Records are seeded straight into ZooKeeper as raw ZNRecords, as Helix's tests do.

use crate::common;

use common::{seed_record, zk, zk_client, Service};
use reqwest::StatusCode;
use serde_json::{json, Value};

const LOCK: &str = "TestZKHelixNonblockingLock/LOCK/CLUSTER/TestZKHelixNonblockingLock";

fn znode(svc: &Service) -> String {
    format!("{}/locks/{LOCK}", svc.root)
}

async fn is_owner(svc: &Service, owner: &str) -> bool {
    let (status, body) = svc
        .get(&format!("/v1/locks/{}?owner={owner}", common::encode(LOCK)))
        .await;
    assert_eq!(status, StatusCode::OK);
    body["is_owner"].as_bool().unwrap()
}

fn helix_acquire(user: &str) -> Value {
    json!({"owner": user, "lease_ms": 3_600_000, "message": "Test", "priority": 0})
}

fn far_future_owner(other: &str) -> Value {
    json!({"OWNER": other, "TIMEOUT": i64::MAX.to_string(), "PRIORITY": "0"})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_acquire_lock() {
    let svc = Service::zk().await;
    let zk = zk_client(zk::shared()).await;
    let user = uuid::Uuid::new_v4().to_string();
    let (status, body) = svc.acquire(LOCK, helix_acquire(&user)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        zk.check_stat(&znode(&svc)).await.unwrap().is_some(),
        "the znode exists"
    );
    let info = svc.info(LOCK).await;
    assert_eq!(info["owner"], user.as_str());
    assert_eq!(info["message"], "Test");
    assert!(is_owner(&svc, &user).await);
    let (status, _) = svc.release(LOCK, body["lease_id"].as_str().unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(!is_owner(&svc, &user).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_acquire_lock_when_existing_lock_not_expired() {
    let svc = Service::zk().await;
    let zk = zk_client(zk::shared()).await;
    let other = uuid::Uuid::new_v4().to_string();
    seed_record(&zk, &znode(&svc), far_future_owner(&other)).await;
    let user = uuid::Uuid::new_v4().to_string();
    assert!(!is_owner(&svc, &user).await);
    let (status, body) = svc.acquire(LOCK, helix_acquire(&user)).await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "equal priority never preempts"
    );
    assert_eq!(body["error"]["code"], "lock_held");
    assert!(!is_owner(&svc, &user).await);
    let (status, body) = svc.release(LOCK, &uuid::Uuid::new_v4().to_string()).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body["error"]["code"], "not_owner");
    let info = svc.info(LOCK).await;
    assert_eq!(info["owner"], other.as_str());
    assert_eq!(
        info["expires_at"],
        Value::Null,
        "a Long.MAX_VALUE lease never expires"
    );
    assert_eq!(info["remaining_ms"], Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_acquire_lock_when_existing_lock_expired() {
    let svc = Service::zk().await;
    let zk = zk_client(zk::shared()).await;
    let past = lockwarden::model::UnixMillis::now().0 - 1000;
    seed_record(
        &zk,
        &znode(&svc),
        json!({"OWNER": "someone", "TIMEOUT": past.to_string(), "PRIORITY": "0"}),
    )
    .await;
    assert_eq!(svc.info(LOCK).await["state"], "expired");
    let user = uuid::Uuid::new_v4().to_string();
    let (status, body) = svc.acquire(LOCK, helix_acquire(&user)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(is_owner(&svc, &user).await);
    let (status, _) = svc.release(LOCK, body["lease_id"].as_str().unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(!is_owner(&svc, &user).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_non_lock_owner_unlock_no_priority_lock() {
    let svc = Service::zk().await;
    let zk = zk_client(zk::shared()).await;
    // A record from an older Helix, with no PRIORITY field: it must read as priority 0.
    seed_record(
        &zk,
        &znode(&svc),
        json!({"OWNER": "old-client", "TIMEOUT": i64::MAX.to_string()}),
    )
    .await;
    let user = uuid::Uuid::new_v4().to_string();
    assert!(!is_owner(&svc, &user).await);
    assert_eq!(svc.info(LOCK).await["priority"], 0);
    let (status, _) = svc.acquire(LOCK, helix_acquire(&user)).await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "a priority-0 caller does not preempt a record without PRIORITY"
    );
    let (status, _) = svc.release(LOCK, &uuid::Uuid::new_v4().to_string()).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(svc.info(LOCK).await["owner"], "old-client");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_non_lock_owner_unlock_no_priority_lock_fail() {
    let svc = Service::zk().await;
    let zk = zk_client(zk::shared()).await;
    seed_record(
        &zk,
        &znode(&svc),
        json!({"OWNER": "old-client", "TIMEOUT": i64::MAX.to_string()}),
    )
    .await;
    assert!(!is_owner(&svc, "user1").await);
    // A higher priority does not let a non-owner release someone else's lock.
    let (status, body) = svc.release(LOCK, &uuid::Uuid::new_v4().to_string()).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body["error"]["code"], "not_owner");
    assert_eq!(svc.info(LOCK).await["owner"], "old-client");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_simultaneous_acquire() {
    let svc = Service::zk().await;
    let (a, b) = tokio::join!(
        svc.acquire(
            LOCK,
            json!({"owner": uuid::Uuid::new_v4().to_string(), "lease_ms": 3_600_000})
        ),
        svc.acquire(
            LOCK,
            json!({"owner": uuid::Uuid::new_v4().to_string(), "lease_ms": 3_600_000})
        ),
    );
    let mut statuses = [a.0, b.0];
    statuses.sort();
    assert_eq!(statuses, [StatusCode::OK, StatusCode::CONFLICT]);
}

/// Helix: close() refuses while the caller holds the lock, and the caller stays owner.
/// Over HTTP a lease is not tied to a connection: the holder's client going away changes
/// nothing, and the lease still renews and releases from a new connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_close_locked_lock() {
    let svc = Service::zk().await;
    let user = uuid::Uuid::new_v4().to_string();
    let first_client = common::http_client();
    let (status, body) = common::send(
        &first_client,
        &svc.base,
        "POST",
        &format!("/v1/locks/{}/acquire", common::encode(LOCK)),
        Some(helix_acquire(&user)),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    drop(first_client);
    assert!(is_owner(&svc, &user).await);
    let lease = body["lease_id"].as_str().unwrap();
    let (status, _) = svc.renew(LOCK, json!({"lease_id": lease})).await;
    assert_eq!(status, StatusCode::OK);
    assert!(is_owner(&svc, &user).await);
}

/// Helix: after close(), calls on the closed handle fail with a defined error. Over HTTP the
/// handle is the lease: once released, it renews and releases nothing, with a clear answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_close_unlocked_lock() {
    let svc = Service::zk().await;
    let body = svc.must_acquire(LOCK, "closer", 60_000).await;
    let lease = body["lease_id"].as_str().unwrap();
    svc.release(LOCK, lease).await;
    let (status, refused) = svc.renew(LOCK, json!({"lease_id": lease})).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(refused["error"]["code"], "not_owner");
    assert_eq!(refused["lock"]["state"], "free");
    let info = svc.info(LOCK).await;
    assert_eq!(
        info["state"], "free",
        "an absent record reads as all defaults"
    );
}
