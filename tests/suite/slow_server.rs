//! A ZooKeeper server that answers every request, but each about 400 ms late: the pace of
//! the chaos rig's lagging follower (about 300 ms a request there). Each round of a call (a
//! read and a conditional write), and each attempt to join a queue, has a store timeout of
//! its own, so a call that needs three requests in a row is served instead of answered
//! `503` (the store timeout here is 1 s). Held to one store timeout for the whole call, both
//! calls below answered `503`, and in the chaos rig most requests that timed out were sent
//! with less than a quarter of the call's store timeout left.
//!
//! A call still ends: its rounds end within three store timeouts of its start, so a server
//! that answers reads but no write gets a `503` within four.
//!
//! And a renew sent shortly before its lease's end is decided after it, so a waiter may take
//! the lease first: that is the lazy expiry the service promises, never an early takeover.
//!
//! On a real ZooKeeper: instance `slow` reaches it through a proxy that delays every answer,
//! instance `quick` directly.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::proxy::{Mode, Proxy};
use common::{unique_root, zk, zk_args, zk_client, Service};
use reqwest::StatusCode;
use serde_json::{json, Value};
use zookeeper_client::{Acls, CreateMode};

const LATE: Duration = Duration::from_millis(400);

/// `(slow, quick)` on one lock root, each with a warm session.
async fn slow_and_quick(proxy: &Proxy) -> (Arc<Service>, Arc<Service>) {
    let root = unique_root();
    let quick = Service::start(zk_args(zk::shared(), &root)).await;
    let mut args = zk_args(zk::shared(), &root);
    args.zk = Some(proxy.addr().to_string());
    let slow = Service::start(args).await;
    quick.must_take_and_free("warm-up").await;
    slow.must_take_and_free("warm-up").await;
    (Arc::new(slow), Arc::new(quick))
}

fn proxy() -> Proxy {
    Proxy::start(format!("127.0.0.1:{}", zk::shared().port).parse().unwrap())
}

/// `slow` remembers the lock free at a version `quick` has since moved past: its write on
/// what it remembers is refused (one late answer), then it reads (another) and writes
/// again (a third).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_that_loses_its_first_race_is_served() {
    let proxy = proxy();
    let (slow, quick) = slow_and_quick(&proxy).await;
    slow.must_take_and_free("raced").await;
    quick.must_take_and_free("raced").await;
    proxy.set_mode(Mode::DelayReplies(LATE));
    let started = std::time::Instant::now();
    let (status, granted) = slow
        .acquire("raced", json!({"owner": "slow", "lease_ms": 60_000}))
        .await;
    assert_eq!(status, StatusCode::OK, "{granted}");
    eprintln!("granted after {:?}", started.elapsed());
    let info = quick.info("raced").await;
    assert_eq!(info["owner"], "slow", "{info}");
}

/// A caller that must wait, on a lock whose queue container is gone (no one queued for it
/// lately: the server deletes an empty container):
/// its create is refused for want of the container (one late answer), the container is
/// made (another), and the create is sent again (a third). It is then handed the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_queue_must_be_made_again_joins_and_is_served() {
    let proxy = proxy();
    let (slow, quick) = slow_and_quick(&proxy).await;
    // The state root exists, as on any instance that has queued a caller before.
    let zk = zk_client(zk::shared()).await;
    zk.mkdir(
        &format!("{}/state", quick.root),
        &CreateMode::Persistent.with_acls(Acls::anyone_all()),
    )
    .await
    .unwrap();
    let held = quick.must_acquire("remade", "holder", 60_000).await;
    proxy.set_mode(Mode::DelayReplies(LATE));
    let waiter = {
        let slow = slow.clone();
        tokio::spawn(async move {
            let body = json!({"owner": "slow", "lease_ms": 60_000, "waiting_ms": 20_000});
            slow.acquire("remade", body).await
        })
    };
    common::eventually(Duration::from_secs(10), "the waiter queued", || async {
        quick.info("remade").await["waiters"] == 1
    })
    .await;
    let (status, released) = quick
        .release("remade", held["lease_id"].as_str().unwrap())
        .await;
    assert_eq!(status, StatusCode::OK, "{released}");
    let (status, granted) = waiter.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{granted}");
    assert_eq!(quick.info("remade").await["owner"], "slow");
}

/// A server that answers reads and syncs but no write (`Mode::StallWrites`): each round's
/// write times out, and the read that settles it finds it did not land, so the call would go
/// round after round until its session was given up (a session timeout, 10 s here, after
/// which no new one can be made). The rounds of one call end within three store timeouts of
/// its start, so it answers `503` within four (1 s each here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_writes_go_unanswered_ends_within_four_store_timeouts() {
    let proxy = proxy();
    let svc = common::service_behind(proxy.addr(), 1000).await;
    proxy.set_mode(Mode::StallWrites);
    let started = std::time::Instant::now();
    let (status, body) = svc
        .acquire("unanswered", json!({"owner": "o", "lease_ms": 60_000}))
        .await;
    let took = started.elapsed();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(
        took < Duration::from_millis(4 * 1000 + 1000),
        "answered within four store timeouts (and a margin): took {took:?}"
    );
    eprintln!("503 after {took:?}");
}

fn unix_ms(rfc3339: &Value) -> i64 {
    let at = time::OffsetDateTime::parse(
        rfc3339.as_str().expect("a time"),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    (at.unix_timestamp_nanos() / 1_000_000) as i64
}

/// The race that CI's chaos run met (SlowReplies): a renew sent 300 ms before its lease's
/// end, through a server whose answers come 400 ms late, is decided after that end, when a
/// waiter on another instance has taken the expired lease. The renew is refused, and that is
/// lazy expiry doing its job: the taker was granted at or after the old end, never before.
/// (Should the renew win instead, the lease lives on and the waiter still waits.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renew_slowed_past_its_lease_s_end_loses_only_to_a_taker_after_that_end() {
    let proxy = proxy();
    let (slow, quick) = slow_and_quick(&proxy).await;
    let held = slow.must_acquire("edge", "holder", 5_000).await;
    let end = unix_ms(&held["lock"]["expires_at"]);
    let waiter = {
        let quick = quick.clone();
        tokio::spawn(async move {
            let body = json!({"owner": "taker", "lease_ms": 60_000, "waiting_ms": 20_000});
            quick.acquire("edge", body).await
        })
    };
    quick.wait_for_waiters("edge", 1).await;
    proxy.set_mode(Mode::DelayReplies(LATE));
    let renew_at = end - 300;
    let now = lockwarden::model::UnixMillis::now().0;
    assert!(now < renew_at, "set up {} ms too late", now - renew_at);
    tokio::time::sleep(Duration::from_millis((renew_at - now) as u64)).await;
    let body = json!({"lease_id": held["lease_id"], "lease_ms": 60_000});
    let (status, renewed) = slow.renew("edge", body).await;
    eprintln!("renew sent 300 ms before the end: {status} {renewed}");
    if status == StatusCode::OK {
        assert_eq!(quick.info("edge").await["owner"], "holder");
        waiter.abort();
        return;
    }
    assert_eq!(status, StatusCode::CONFLICT, "{renewed}");
    assert_eq!(renewed["error"]["code"], "not_owner", "{renewed}");
    let (status, taken) = waiter.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{taken}");
    let granted = unix_ms(&taken["lock"]["acquired_at"]);
    eprintln!("the taker was granted {} ms after the end", granted - end);
    assert!(
        granted >= end,
        "the taker was granted {} ms before the lease's end",
        end - granted
    );
}
