//! A ZooKeeper server whose copy of a record contradicts the leader's (`store::zk::contradiction`),
//! played by a fault proxy that answers the instance's reads of one record from a copy kept
//! when the fault began, while its writes still reach the real server. Seen once in CI after a
//! leader kill: one instance's every write to one record was refused for 30 s. Without
//! the contradiction check the instance answered 503 ("the lock changed too often") for as
//! long as the fault lasted; with it, it gives the session up, and the new session (a new
//! connection, which the proxy passes untouched) serves the record as it is.

use crate::common;

use std::time::Duration;

use common::proxy::{Mode, Proxy};
use common::{eventually, unique_root, zk, zk_args, Service};
use reqwest::StatusCode;
use serde_json::json;

const GIVEN_UP: &str = "lockwarden_zookeeper_contradicting_copies_total";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_whose_server_keeps_a_stale_copy_of_a_record_moves_its_session() {
    let target = format!("127.0.0.1:{}", zk::shared().port).parse().unwrap();
    let proxy = Proxy::start(target);
    let root = unique_root();
    let mut args = zk_args(zk::shared(), &root);
    args.zk = Some(proxy.connect_string());
    let stale = Service::start(args).await;
    let other = Service::start(zk_args(zk::shared(), &root)).await;

    // The record exists and is free.
    let first = stale.must_acquire("l", "first", 60_000).await;
    let lease = first["lease_id"].as_str().unwrap();
    assert_eq!(stale.release("l", lease).await.0, StatusCode::OK);

    // From its next read on, the instance's server shows the record as it is now: free.
    proxy.set_mode(Mode::StaleCopy {
        path: format!("{root}/locks/l"),
    });
    let (status, seen) = stale.get("/v1/locks/l").await;
    assert_eq!(
        (status, seen["state"].as_str()),
        (StatusCode::OK, Some("free"))
    );

    // Another instance takes the lock through the real record.
    let held = other.must_acquire("l", "holder", 60_000).await;
    let (_, seen) = stale.get("/v1/locks/l").await;
    assert_eq!(seen["state"], "free", "the fault is in place: {seen}");

    // Every write the instance plans on its copy is refused; it gives that session up, and on
    // the new one sees the holder. It never grants the lock over the holder.
    eventually(
        Duration::from_secs(20),
        "the instance sees the holder",
        || async {
            let body = json!({"owner": "late", "lease_ms": 60000});
            let (status, answer) = stale.acquire("l", body).await;
            assert_ne!(
                status,
                StatusCode::OK,
                "granted over a live holder: {answer}"
            );
            status == StatusCode::CONFLICT && answer["error"]["code"] == "lock_held"
        },
    )
    .await;
    assert_eq!(stale.metric(GIVEN_UP).await, 1, "one session given up");
    assert_eq!(other.metric(GIVEN_UP).await, 0);

    // The holder's lease is intact, and the instance serves the lock again once it is free.
    let lease = held["lease_id"].as_str().unwrap();
    assert_eq!(other.release("l", lease).await.0, StatusCode::OK);
    let (status, body) = stale
        .acquire("l", json!({"owner": "after", "lease_ms": 60000}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(stale.metric(GIVEN_UP).await, 1, "the new session is kept");
}
