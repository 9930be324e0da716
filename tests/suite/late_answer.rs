//! A write whose answer comes after the call's store timeout: the instance settles its
//! outcome by reading the record back, and that read has a store timeout of its own
//! (`service::outcome::settle_by`). Held to what was left of the call's, it could never be
//! answered, since the write was given up at that very deadline: a grant that landed was
//! answered `503` (and undone afterwards), every time the server was slow, and a release
//! that landed was answered `503` too.
//!
//! On a real ZooKeeper behind a fault proxy: the proxy holds back every answer for 1.5 s
//! while the write goes out (store timeout 1 s), then passes again. Answers keep their
//! order, so the read-back's answers come just after the held one, within its own timeout.

use crate::common;

use std::time::Duration;

use common::proxy::{Mode, Proxy};
use common::{service_behind, zk};
use reqwest::StatusCode;
use serde_json::{json, Value};

/// Longer than the store timeout (1 s), well within half the session timeout (10 s), after
/// which zookeeper-client would call a silent connection lost.
const HELD: Duration = Duration::from_millis(1500);
/// Long enough for the write to be sent and answered by the server (its answer is then
/// held), short of the store timeout.
const WHILE_WRITING: Duration = Duration::from_millis(300);

/// Runs `call` while the proxy holds back answers for `HELD`.
async fn with_late_answers<F>(proxy: &Proxy, call: F) -> (StatusCode, Value)
where
    F: std::future::Future<Output = (StatusCode, Value)> + Send + 'static,
{
    proxy.set_mode(Mode::DelayReplies(HELD));
    let call = tokio::spawn(call);
    tokio::time::sleep(WHILE_WRITING).await;
    proxy.set_mode(Mode::Pass);
    call.await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_whose_answer_came_late_is_granted() {
    let proxy = Proxy::start(format!("127.0.0.1:{}", zk::shared().port).parse().unwrap());
    let svc = std::sync::Arc::new(service_behind(proxy.addr(), 1000).await);
    let caller = svc.clone();
    let (status, granted) = with_late_answers(&proxy, async move {
        caller
            .acquire("late-grant", json!({"owner": "slow", "lease_ms": 60_000}))
            .await
    })
    .await;
    assert_eq!(status, StatusCode::OK, "{granted}");
    let info = svc.info("late-grant").await;
    assert_eq!(info["owner"], "slow", "{info}");
    assert_eq!(info["fencing_token"], granted["fencing_token"], "{info}");
    let (status, released) = svc
        .release("late-grant", granted["lease_id"].as_str().unwrap())
        .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the lease was the caller's: {released}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_whose_answer_came_late_is_released() {
    let proxy = Proxy::start(format!("127.0.0.1:{}", zk::shared().port).parse().unwrap());
    let svc = std::sync::Arc::new(service_behind(proxy.addr(), 1000).await);
    let held = svc.must_acquire("late-release", "slow", 60_000).await;
    let lease = held["lease_id"].as_str().unwrap().to_owned();
    let caller = svc.clone();
    let (status, released) = with_late_answers(&proxy, async move {
        caller.release("late-release", &lease).await
    })
    .await;
    assert_eq!(status, StatusCode::OK, "{released}");
    let info = svc.info("late-release").await;
    assert_eq!(info["state"], "free", "{info}");
}
