//! The takeover margin over HTTP, on ZooKeeper and on the in-memory store: for
//! `--max-clock-skew-ms` after a lease's end the lock shows `expired` and cannot be taken
//! yet, and every answer about it says when it can (`takeover_at`), and a refusal says so too.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{encode, eventually, unique_root, waiting, zk, zk_args, Service};
use lockwarden::config::ServeArgs;
use reqwest::header::RETRY_AFTER;
use reqwest::StatusCode;
use serde_json::{json, Value};

/// Long enough that every step below runs within the margin, even on a loaded machine.
const SKEW_MS: u64 = 5000;
const LOCK: &str = "margin/job";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_zookeeper() {
    let mut args = zk_args(zk::shared(), &unique_root());
    args.max_clock_skew_ms = SKEW_MS;
    a_lease_in_its_margin_says_when_it_may_be_taken_over(Service::start(args).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_memory() {
    let mut args = ServeArgs::defaults();
    args.max_clock_skew_ms = SKEW_MS;
    a_lease_in_its_margin_says_when_it_may_be_taken_over(Service::start(args).await).await;
}

/// An RFC 3339 time of the API in unix ms.
fn unix_ms(text: &Value) -> i64 {
    let text = text
        .as_str()
        .unwrap_or_else(|| panic!("{text} is not a time"));
    let at = time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|e| panic!("{text}: {e}"));
    (at.unix_timestamp_nanos() / 1_000_000) as i64
}

/// An acquire by `owner` that does not wait: its status, `Retry-After` and body.
async fn try_acquire(svc: &Service, owner: &str) -> (StatusCode, Option<String>, Value) {
    let response = svc
        .http
        .post(format!("{}/v1/locks/{}/acquire", svc.base, encode(LOCK)))
        .json(&json!({"owner": owner, "lease_ms": 60_000}))
        .send()
        .await
        .unwrap();
    let status = response.status();
    let retry_after = response
        .headers()
        .get(RETRY_AFTER)
        .map(|v| v.to_str().unwrap().to_owned());
    (status, retry_after, response.json().await.unwrap())
}

/// A refusal within the margin of a lease that may be taken over at `takeover`:
/// `lock_held`, saying the lease has ended and naming that time; its `Retry-After` and
/// message.
async fn refused_in_margin(svc: &Service, takeover: i64) -> (Option<String>, String) {
    let (status, retry_after, refused) = try_acquire(svc, "caller").await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["error"]["code"], "lock_held");
    assert_eq!(unix_ms(&refused["lock"]["takeover_at"]), takeover);
    let message = refused["error"]["message"].as_str().unwrap().to_owned();
    assert!(message.contains("has ended"), "{message}");
    let at = refused["lock"]["takeover_at"].as_str().unwrap();
    assert!(message.contains(at), "{message}");
    (retry_after, message)
}

async fn a_lease_in_its_margin_says_when_it_may_be_taken_over(svc: Service) {
    let svc = Arc::new(svc);
    let held = svc.must_acquire(LOCK, "holder", 1000).await;
    assert!(held["lock"].get("takeover_at").is_none(), "live: {held}");
    let takeover = unix_ms(&held["lock"]["expires_at"]) + SKEW_MS as i64;

    // While the lease is live, a refusal says that it is held, and names no time.
    let (status, retry_after, live) = try_acquire(&svc, "early").await;
    if live["lock"]["state"] == "held" {
        assert_eq!(status, StatusCode::CONFLICT, "{live}");
        assert!(
            live["error"]["message"]
                .as_str()
                .unwrap()
                .contains("held by another caller"),
            "{live}"
        );
        assert!(live["lock"].get("takeover_at").is_none(), "{live}");
        assert_eq!(retry_after, None);
    }

    eventually(Duration::from_secs(10), "the lease ends", || async {
        svc.info(LOCK).await["state"] == "expired"
    })
    .await;
    let info = svc.info(LOCK).await;
    assert_eq!(unix_ms(&info["takeover_at"]), takeover, "GET: {info}");
    let (_, listed) = svc.get("/v1/locks?prefix=margin/").await;
    assert_eq!(
        unix_ms(&listed["locks"][0]["takeover_at"]),
        takeover,
        "list: {listed}"
    );

    // Nobody queued: the refusal names the time, and so does Retry-After.
    let (retry_after, message) = refused_in_margin(&svc, takeover).await;
    assert!(!message.contains("held by another caller"), "{message}");
    let secs: u64 = retry_after.expect("a Retry-After").parse().unwrap();
    assert!((1..=SKEW_MS.div_ceil(1000)).contains(&secs), "{secs}");

    // A caller queues: it takes the lock when the margin ends, so nobody is told to come back.
    let waiter = waiting::queued(&svc, LOCK, "waiter");
    svc.wait_for_waiters(LOCK, 1).await;
    let (retry_after, message) = refused_in_margin(&svc, takeover).await;
    assert!(message.contains("queued"), "{message}");
    assert_eq!(retry_after, None, "{message}");

    let taken = waiting::granted(waiter, "waiter").await;
    assert!(
        unix_ms(&taken["lock"]["acquired_at"]) >= takeover,
        "{taken}"
    );
    assert!(taken["lock"].get("takeover_at").is_none(), "{taken}");
}
