//! A read in flight when its connection drops: a look at a lock, a validate, an acquire's
//! read before it refuses, a listing. A read changes nothing, so the store sends it once more, on
//! whichever session serves by then (here the stand-in), within the call's store timeout.
//! Before, the call answered `503` though a stand-in was ready within milliseconds:
//! `lost_entry`'s look at the lock met that.
//!
//! On a real ZooKeeper behind the fault proxy: `Mode::CutAfter` forwards the read, sends
//! nothing more back, closes the connection and refuses new ones for a moment.

use crate::common;

use std::time::Duration;

use common::framing::op;
use common::proxy::{Mode, Proxy};
use common::{service_behind, zk, Service};
use reqwest::StatusCode;

const REFUSED: Duration = Duration::from_millis(300);

/// An instance behind the proxy (2-s store timeout), and a lock it holds for "holder".
async fn holding(name: &str) -> (Proxy, Service, serde_json::Value) {
    let proxy = Proxy::start(format!("127.0.0.1:{}", zk::shared().port).parse().unwrap());
    let svc = service_behind(proxy.addr(), 2000).await;
    let held = svc.must_acquire(name, "holder", 60_000).await;
    (proxy, svc, held)
}

fn cut_after(request: i32) -> Mode {
    Mode::CutAfter {
        ops: vec![request],
        refuse_for: REFUSED,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_look_at_a_lock_whose_read_is_cut_is_answered() {
    let (proxy, svc, _) = holding("cut-look").await;
    proxy.set_mode(cut_after(op::GET_DATA));
    let (status, info) = svc.get("/v1/locks/cut-look").await;
    assert_eq!(proxy.fired(), 1, "the read was cut");
    assert_eq!(status, StatusCode::OK, "{info}");
    assert_eq!(info["owner"], "holder", "{info}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_validate_whose_sync_is_cut_is_answered() {
    let (proxy, svc, held) = holding("cut-validate").await;
    let token = held["fencing_token"].as_u64().unwrap();
    proxy.set_mode(cut_after(op::SYNC));
    let path = format!("/v1/locks/cut-validate/validate?fencing_token={token}");
    let (status, answer) = svc.get(&path).await;
    assert_eq!(proxy.fired(), 1, "the sync was cut");
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["current"], true, "{answer}");
}

/// An acquire that finds the lock held in what this instance remembers reads the latest
/// copy before it refuses: a `sync` and the read of record and queue, sent together. The
/// read is cut (its sync may or may not have been answered), and the pair is sent again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_whose_read_is_cut_is_answered() {
    let (proxy, svc, _) = holding("cut-acquire").await;
    proxy.set_mode(cut_after(op::MULTI_READ));
    let (status, refused) = svc
        .acquire(
            "cut-acquire",
            serde_json::json!({"owner": "o", "lease_ms": 60_000}),
        )
        .await;
    assert_eq!(proxy.fired(), 1, "the read was cut");
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["error"]["code"], "lock_held", "{refused}");
    assert_eq!(refused["lock"]["owner"], "holder", "{refused}");
}

/// A listing walks the lock tree: its first `getChildren` is cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_whose_read_is_cut_is_answered() {
    let (proxy, svc, _) = holding("cut-listed").await;
    proxy.set_mode(cut_after(op::GET_CHILDREN));
    let (status, listed) = svc.get("/v1/locks").await;
    assert_eq!(proxy.fired(), 1, "the read was cut");
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert!(listed.to_string().contains("cut-listed"), "{listed}");
}
