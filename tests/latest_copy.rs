//! Answers that would leave a lease as it was are decided on the latest copy of the record
//! (`service::reading`). An instance connected only to a lagging follower sees a lock another
//! instance granted a moment ago as free, and a lock released a moment ago as held. Before the
//! fix it answered a release of the live lease `200` and left it held, refused its renewal
//! with `not_owner`, and refused an acquire of the free lock with `lock_held`. Each answer is
//! now made after a sync, on the copy the leader has.

mod common;

use std::time::Duration;

use common::ensemble::{Ensemble, EnsembleOptions};
use common::instance::{flags, Instance, InstanceOptions};
use common::unique_root;
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
async fn a_lagging_follower_never_decides_a_release_renew_or_refusal() {
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
