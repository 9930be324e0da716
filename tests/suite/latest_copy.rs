//! Answers that would leave a lease as it was are decided on the latest copy of the record
//! (`service::reading`). An instance connected only to a lagging follower sees a lock another
//! instance granted a moment ago as free, and a lock released a moment ago as held. Before the
//! fix it answered a release of the live lease `200` and left it held, refused its renewal
//! with `not_owner`, refused an acquire of the free lock with `lock_held`, and told the
//! lease's owner asking `GET ?owner=` that it did not own the lock. Each answer is now made
//! after a sync, on the copy the leader has.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::ensemble::{Ensemble, EnsembleOptions};
use common::instance::{flags, Instance, InstanceOptions};
use common::waiting::{granted, queued};
use common::{unique_root, zk, zk_args, Service};
use reqwest::StatusCode;
use serde_json::{json, Value};

/// Node 1 sees every write this long after it is made.
const LAG: Duration = Duration::from_millis(1000);

/// Creating a session and syncing through the lagging follower wait for the leader over
/// its slow links (twice the lag), so an instance's requests are given time for that.
const PATIENT: [&str; 8] = [
    "--store-timeout-ms",
    "6000",
    "--zk-session-timeout-ms",
    "6000",
    "--gc-delay-ms",
    "25000",
    "--max-clock-skew-ms",
    "100",
];

async fn post(on: &Instance, name: &str, verb: &str, body: Value) -> (StatusCode, Value) {
    on.post(&format!("/v1/locks/{name}/{verb}"), body).await
}

/// An acquire by `owner` that does not wait (`waiting_ms` null): a held lock is refused.
fn ask(owner: &str) -> Value {
    json!({"owner": owner, "lease_ms": 60000})
}

fn lease(body: &Value) -> Value {
    body["lease_id"].clone()
}

/// Two instances under one root: `fresh` on the up-to-date nodes, `behind` on the lagging one.
async fn instances(ensemble: &Ensemble) -> (Instance, Instance) {
    let root = unique_root();
    let up_to_date = format!(
        "{},{}",
        ensemble.client_connect(2),
        ensemble.client_connect(3)
    );
    let fresh = Instance::start(InstanceOptions::new(&flags(&up_to_date, &root, &PATIENT))).await;
    let behind = Instance::start(InstanceOptions::new(&flags(
        &ensemble.client_connect(1),
        &root,
        &PATIENT,
    )))
    .await;
    (fresh, behind)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_follower_never_decides_a_release_renew_refusal_or_ownership() {
    let ensemble = Ensemble::start(EnsembleOptions {
        lagging: Some((1, LAG)),
    })
    .await;
    ensemble.make_follower(1).await;
    let (fresh, behind) = instances(&ensemble).await;
    // Both instances have their sessions and the lock root before the clock starts.
    for (on, name) in [(&fresh, "warm-fresh"), (&behind, "warm-behind")] {
        let (status, body) = post(on, name, "acquire", ask("w")).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let release = json!({"lease_id": lease(&body)});
        assert_eq!(post(on, name, "release", release).await.0, StatusCode::OK);
    }

    // A release through the lagging node, of a lease granted a moment ago, ends it.
    let (status, held) = post(&fresh, "rel", "acquire", ask("a")).await;
    assert_eq!(status, StatusCode::OK, "{held}");
    let release = json!({"lease_id": lease(&held)});
    let (status, body) = post(&behind, "rel", "release", release).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["released"], true, "{body}");
    let (_, seen) = fresh.get("/v1/locks/rel").await;
    assert_eq!(
        seen["state"], "free",
        "the release left the lease held: {seen}"
    );
    let (status, body) = post(&fresh, "rel", "acquire", ask("b")).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // A renewal through the lagging node, of a lease granted a moment ago, extends it.
    let (status, held) = post(&fresh, "ren", "acquire", ask("a")).await;
    assert_eq!(status, StatusCode::OK, "{held}");
    let renew = json!({"lease_id": lease(&held)});
    let (status, renewed) = post(&behind, "ren", "renew", renew).await;
    assert_eq!(status, StatusCode::OK, "{renewed}");
    assert_eq!(renewed["lock"]["fencing_token"], held["fencing_token"]);
    assert_eq!(renewed["lock"]["owner"], "a");

    // Asked through the lagging node right after the grant, the owner is told it owns it.
    let (status, held) = post(&fresh, "own", "acquire", ask("a")).await;
    assert_eq!(status, StatusCode::OK, "{held}");
    let (status, seen) = behind.get("/v1/locks/own?owner=a").await;
    assert_eq!(status, StatusCode::OK, "{seen}");
    assert_eq!(seen["is_owner"], true, "{seen}");
    assert_eq!(seen["fencing_token"], held["fencing_token"]);

    // An acquire through the lagging node, of a lock released a moment ago, gets it. The
    // lagging node's instance granted the lock itself, so it remembers a holder; the release
    // is made through the other instance.
    let (status, held) = post(&behind, "acq", "acquire", ask("a")).await;
    assert_eq!(status, StatusCode::OK, "{held}");
    let release = json!({"lease_id": lease(&held)});
    assert_eq!(
        post(&fresh, "acq", "release", release).await.0,
        StatusCode::OK
    );
    let (status, body) = post(&behind, "acq", "acquire", ask("c")).await;
    assert_eq!(status, StatusCode::OK, "refused a free lock: {body}");
    assert_eq!(body["lock"]["owner"], "c");
    assert!(body["fencing_token"].as_u64() > held["fencing_token"].as_u64());
}

/// A release decided on the latest copy may still write: when the caller turns out to hold
/// the lock, it is handed to the next waiter, so that read takes the queue too. Instance A
/// remembers the record it wrote last (held by `x`), while the lock went on through B to
/// `y`, with `z` queued behind; `y` releases through A.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_through_an_instance_that_remembers_an_older_holder_hands_the_lock_on() {
    let root = unique_root();
    let a = Service::start(zk_args(zk::shared(), &root)).await;
    let b = Arc::new(Service::start(zk_args(zk::shared(), &root)).await);
    let x = a.must_acquire("line", "x", 60_000).await;
    let y = queued(&b, "line", "y");
    b.wait_for_waiters("line", 1).await;
    let z = queued(&b, "line", "z");
    b.wait_for_waiters("line", 2).await;
    let (status, released) = b.release("line", x["lease_id"].as_str().unwrap()).await;
    assert_eq!(status, StatusCode::OK, "{released}");
    let y = granted(y, "y").await;
    let (status, released) = a.release("line", y["lease_id"].as_str().unwrap()).await;
    assert_eq!(status, StatusCode::OK, "{released}");
    assert_eq!(released["lock"]["owner"], "z", "not handed on: {released}");
    granted(z, "z").await;
}

/// The ZooKeeper requests `svc` has sent so far: multi (record writes), get_data,
/// get_children, sync, multi_read.
async fn requests_sent(svc: &Service) -> Vec<u64> {
    let mut counts = Vec::new();
    for op in ["multi", "get_data", "get_children", "sync", "multi_read"] {
        let series =
            format!("lockwarden_zookeeper_request_duration_seconds_count{{operation=\"{op}\"}}");
        counts.push(svc.metric(&series).await);
    }
    counts
}

/// What a refusal costs ZooKeeper: a try-lock on a lock held through the same instance is
/// decided on one read of the latest copy (a `sync` and a read of record and queue, sent
/// together), with no optimistic write or plain read before it, also once what the instance
/// remembers of the lock is too old to write on (older than the store timeout).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_is_one_read_of_the_latest_copy() {
    let root = unique_root();
    let mut args = zk_args(zk::shared(), &root);
    args.store_timeout_ms = 1000;
    let a = Service::start(args).await;
    a.must_acquire("busy", "x", 60_000).await;
    let refuse_three = || async {
        let before = requests_sent(&a).await;
        for _ in 0..3 {
            let (status, refused) = a
                .acquire("busy", json!({"owner": "y", "lease_ms": 1000}))
                .await;
            assert_eq!(status, StatusCode::CONFLICT, "{refused}");
            assert_eq!(refused["error"]["code"], "lock_held", "{refused}");
            assert_eq!(refused["lock"]["owner"], "x", "{refused}");
        }
        let after = requests_sent(&a).await;
        after
            .iter()
            .zip(&before)
            .map(|(a, b)| a - b)
            .collect::<Vec<u64>>()
    };
    let what = "multi, get_data, get_children, sync, multi_read sent for 3 refusals";
    assert_eq!(refuse_three().await, [0, 0, 0, 3, 3], "{what}");
    // Not waiting for an outcome: letting the instance's memory of the grant age past the
    // store timeout, after which it no longer writes on it.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(refuse_three().await, [0, 0, 0, 3, 3], "{what}, later");
}
