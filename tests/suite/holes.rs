//! Regression tests for the six holes of the fault-injection issue, each reproduced from the
//! outside the way it was found: two instances with different collector delays, a skewed
//! clock, a lost answer, a lagging follower, a stale retry, and a crash before collection.
//! Each failed on the code before its fix.

use crate::common;

use std::time::{Duration, Instant};

use common::ensemble::{Ensemble, EnsembleOptions};
use common::instance::{flags, Instance, InstanceOptions};
use common::proxy::{Mode, Proxy};
use common::{eventually, unique_root, zk, zk_client, znodes_under, Service};
use reqwest::StatusCode;
use serde_json::{json, Value};

async fn acquire(on: &Instance, name: &str, body: Value) -> (StatusCode, Value) {
    on.post(&format!("/v1/locks/{name}/acquire"), body).await
}

fn lease(body: &Value) -> String {
    body["lease_id"].as_str().expect("a lease_id").to_owned()
}

/// Hole 1: a collector item planned long ago must not fence a record that was deleted,
/// created anew and taken since (here by running two instances with different delays).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_collector_item_never_fences_a_live_record() {
    let root = unique_root();
    let connect = zk::shared().connect_string();
    let slow = Instance::start(InstanceOptions::new(&flags(
        &connect,
        &root,
        &["--gc-delay-ms", "16000"],
    )))
    .await;
    let quick = Instance::start(InstanceOptions::new(&flags(&connect, &root, &[]))).await;
    let names: Vec<String> = (0..4).map(|i| format!("late-{i}")).collect();
    for name in &names {
        let (status, body) = acquire(&slow, name, json!({"owner": "a", "lease_ms": 60000})).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let release = json!({"lease_id": lease(&body)});
        let path = format!("/v1/locks/{name}/release");
        assert_eq!(slow.post(&path, release).await.0, StatusCode::OK);
    }
    let released = Instant::now();
    for name in &names {
        let (_, body) = acquire(&quick, name, json!({"owner": "b", "lease_ms": 60000})).await;
        let path = format!("/v1/locks/{name}/release");
        let release = json!({"lease_id": lease(&body)});
        assert_eq!(quick.post(&path, release).await.0, StatusCode::OK);
    }
    let zk = zk_client(zk::shared()).await;
    eventually(
        Duration::from_secs(30),
        "the quick instance to collect",
        || {
            let (zk, dir) = (zk.clone(), format!("{root}/locks"));
            async move { znodes_under(&zk, &dir).await.is_empty() }
        },
    )
    .await;
    let mut holders = Vec::new();
    for name in &names {
        let (status, body) = acquire(&quick, name, json!({"owner": "x", "lease_ms": 60000})).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let path = format!("/v1/locks/{name}/renew");
        let renew = json!({"lease_id": lease(&body)});
        assert_eq!(quick.post(&path, renew).await.0, StatusCode::OK);
        holders.push(lease(&body));
    }
    // The slow instance's items fall due 16 s after its releases; give its loop time to run.
    let after_due = released + Duration::from_secs(19);
    tokio::time::sleep_until(after_due.into()).await;
    for (name, lease) in names.iter().zip(&holders) {
        let path = format!("/v1/locks/{name}/renew");
        let (status, body) = quick.post(&path, json!({"lease_id": lease})).await;
        assert_eq!(
            status,
            StatusCode::OK,
            "the live lease of {name} survives: {body}"
        );
        let (status, body) = acquire(&slow, name, json!({"owner": "y", "lease_ms": 1000})).await;
        assert_eq!(
            status,
            StatusCode::CONFLICT,
            "nobody else gets {name}: {body}"
        );
    }
}

/// Hole 2: an instance whose clock runs 5 s ahead must not hand a lock to its waiter while
/// the holder, renewing through an instance with the right time, still holds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_clock_on_one_instance_does_not_end_a_live_lease() {
    let root = unique_root();
    let connect = zk::shared().connect_string();
    let skew = ["--max-clock-skew-ms", "6000"];
    let right = Instance::start(InstanceOptions::new(&flags(&connect, &root, &skew))).await;
    let ahead =
        Instance::start(InstanceOptions::new(&flags(&connect, &root, &skew)).clock_offset_ms(5000))
            .await;
    let (status, body) = acquire(&right, "skew", json!({"owner": "x", "lease_ms": 3000})).await;
    assert_eq!(status, StatusCode::OK);
    let x = lease(&body);
    let waiter = tokio::spawn(async move {
        let body = json!({"owner": "y", "lease_ms": 1000, "waiting_ms": 20000});
        let answer = acquire(&ahead, "skew", body).await;
        (Instant::now(), answer)
    });
    // X renews every second for 6 s, three times its lease; every renewal must succeed.
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (status, body) = right
            .post("/v1/locks/skew/renew", json!({"lease_id": x}))
            .await;
        assert_eq!(status, StatusCode::OK, "X still holds: {body}");
        assert!(!waiter.is_finished(), "Y was granted while X renews");
    }
    let released = Instant::now();
    let (status, _) = right
        .post("/v1/locks/skew/release", json!({"lease_id": x}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (granted_at, (status, body)) = waiter.await.unwrap();
    assert_eq!(
        status,
        StatusCode::OK,
        "Y gets the lock once X lets go: {body}"
    );
    assert!(granted_at >= released);
}

/// Hole 3: when the answer to an inline grant is lost, the caller must not be told that its
/// own grant is someone else's lock, and the lease must not stay held by nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_answer_to_a_grant_leaves_no_orphaned_lease() {
    for refuse_ms in [1000, 3000] {
        let root = unique_root();
        let zk_addr = format!("127.0.0.1:{}", zk::shared().port).parse().unwrap();
        let proxy = Proxy::start(zk_addr);
        // The default request timeout (2 s): a refusal of 1 s lets the re-read after the
        // lost answer succeed (and see the other caller's queue mark), one of 3 s does not.
        let patient = ["--store-timeout-ms", "2000", "--gc-delay-ms", "10100"];
        let cut_off = Instance::start(InstanceOptions::new(&flags(
            &proxy.connect_string(),
            &root,
            &patient,
        )))
        .await;
        let other = Instance::start(InstanceOptions::new(&flags(
            &zk::shared().connect_string(),
            &root,
            &[],
        )))
        .await;
        // Warm up, so the parents exist and the next multi through the proxy is the grant.
        let (_, warm) = acquire(&cut_off, "warm", json!({"owner": "a", "lease_ms": 1000})).await;
        let release = json!({"lease_id": lease(&warm)});
        assert_eq!(
            cut_off.post("/v1/locks/warm/release", release).await.0,
            StatusCode::OK
        );
        proxy.set_mode(Mode::CutAfter {
            ops: vec![14],
            refuse_for: Duration::from_millis(refuse_ms),
        });
        let mine = acquire(&cut_off, "lost", json!({"owner": "a", "lease_ms": 15000}));
        let theirs = async {
            // Ask once the grant's answer is lost, while the instance is cut off.
            eventually(Duration::from_secs(5), "the cut", || async {
                proxy.fired() > 0
            })
            .await;
            let body = json!({"owner": "b", "lease_ms": 1000, "waiting_ms": 12000});
            acquire(&other, "lost", body).await
        };
        let started = Instant::now();
        let ((status, body), (their_status, their_body)) = tokio::join!(
            async {
                let (status, body) = mine.await;
                if status == StatusCode::OK {
                    // The caller knows its lease: it lets go, as a caller would.
                    let release = json!({"lease_id": lease(&body)});
                    cut_off.post("/v1/locks/lost/release", release).await;
                }
                (status, body)
            },
            theirs
        );
        let own_grant_refused = status == StatusCode::CONFLICT && body["lock"]["owner"] == "a";
        // On a loaded machine the cut can come before the grant's write reaches ZooKeeper:
        // the other caller is then granted first, and the write is refused by its
        // condition, as any caller's is. The lock shown is then theirs, never this one's.
        let refused_for_theirs = status == StatusCode::CONFLICT
            && body["error"]["code"] == "lock_held"
            && body["lock"]["owner"] == "b";
        assert!(
            !own_grant_refused
                && (status == StatusCode::OK
                    || status == StatusCode::SERVICE_UNAVAILABLE
                    || refused_for_theirs),
            "refused {refuse_ms} ms: the caller is granted or told to retry, never that its own \
             grant is another's lock: {status} {body}"
        );
        assert_eq!(their_status, StatusCode::OK, "{their_body}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the other caller got the lock long before the 15 s lease would run out ({:?})",
            started.elapsed()
        );
    }
}

/// Hole 4: after a newer grant was acknowledged, an instance connected only to a lagging
/// follower must not call the older token current.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_is_not_fooled_by_a_lagging_follower() {
    let ensemble = Ensemble::start(EnsembleOptions {
        lagging: Some((1, Duration::from_millis(1500))),
    })
    .await;
    // The lagging node must be a follower: a leader has no one to lag behind.
    while ensemble.leader().await == Some(1) {
        ensemble.kill(1);
        ensemble.wait_serving(Duration::from_secs(30)).await;
        ensemble.restart(1).await;
        ensemble.wait_serving(Duration::from_secs(30)).await;
    }
    let root = unique_root();
    let leaderish = ensemble.client_connect(3);
    let writer = Instance::start(InstanceOptions::new(&flags(&leaderish, &root, &[]))).await;
    // Creating a session and a sync on the lagging follower wait for the leader through
    // the slow links (twice the lag): give its connection and its requests time for that.
    let patient = [
        "--store-timeout-ms",
        "4000",
        "--zk-session-timeout-ms",
        "10000",
        "--gc-delay-ms",
        "23100",
    ];
    let lagging = Instance::start(InstanceOptions::new(&flags(
        &ensemble.client_connect(1),
        &root,
        &patient,
    )))
    .await;
    for round in 0..3 {
        let name = format!("lag-{round}");
        let (_, x) = acquire(&writer, &name, json!({"owner": "x", "lease_ms": 60000})).await;
        let old = x["fencing_token"].as_u64().unwrap();
        // Let the follower catch up with X's grant, so it has something old to show.
        eventually(Duration::from_secs(30), "the follower to see X", || async {
            let path = format!("/v1/locks/{name}/validate?fencing_token={old}");
            lagging.get(&path).await.1["current"] == true
        })
        .await;
        let path = format!("/v1/locks/{name}/release");
        writer.post(&path, json!({"lease_id": lease(&x)})).await;
        let (status, y) = acquire(&writer, &name, json!({"owner": "y", "lease_ms": 60000})).await;
        assert_eq!(status, StatusCode::OK);
        assert!(y["fencing_token"].as_u64().unwrap() > old);
        let (status, answer) = lagging
            .get(&format!("/v1/locks/{name}/validate?fencing_token={old}"))
            .await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        assert_eq!(
            answer["current"], false,
            "round {round}: Y's grant was acknowledged"
        );
    }
}

/// Hole 5: a retry of a request_id whose lease has ended must not report it as held.
async fn a_retry_does_not_report_an_ended_grant(svc: Service) {
    let first = json!({"owner": "r", "lease_ms": 1000, "request_id": "r-123"});
    let (status, granted) = svc.acquire("retry", first.clone()).await;
    assert_eq!(status, StatusCode::OK);
    // The lease runs out (past the default clock skew too) and someone else takes the lock.
    eventually(
        Duration::from_secs(10),
        "another caller to get it",
        || async {
            let body = json!({"owner": "other", "lease_ms": 60000});
            svc.acquire("retry", body).await.0 == StatusCode::OK
        },
    )
    .await;
    let (status, body) = svc.acquire("retry", first).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "lease_ended");
    assert_ne!(body["lock"]["owner"], "r");
    let token = granted["fencing_token"].as_u64().unwrap();
    assert!(!svc.validate("retry", token).await);
}

/// Hole 5, on a retry that finds its lease run out while nobody has taken the lock yet.
async fn a_retry_after_expiry_is_told_the_lease_ended(svc: Service) {
    let first = json!({"owner": "r", "lease_ms": 300, "request_id": "r-9"});
    assert_eq!(svc.acquire("lapsed", first.clone()).await.0, StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let (status, body) = svc.acquire("lapsed", first).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "lease_ended");
}

on_both_stores!(
    a_retry_does_not_report_an_ended_grant,
    a_retry_after_expiry_is_told_the_lease_ended
);

/// Hole 6: free records whose deletion an instance had scheduled when it was killed are
/// collected after it restarts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn free_records_of_a_crashed_instance_are_collected() {
    let root = unique_root();
    let connect = zk::shared().connect_string();
    let mut instance = Instance::start(InstanceOptions::new(&flags(&connect, &root, &[]))).await;
    for i in 0..10 {
        let name = format!("crash-{i}");
        let (_, body) = acquire(&instance, &name, json!({"owner": "a", "lease_ms": 60000})).await;
        let path = format!("/v1/locks/{name}/release");
        let (status, _) = instance
            .post(&path, json!({"lease_id": lease(&body)}))
            .await;
        assert_eq!(status, StatusCode::OK);
    }
    instance.kill();
    let zk = zk_client(zk::shared()).await;
    let dir = format!("{root}/locks");
    assert_eq!(znodes_under(&zk, &dir).await.len(), 10, "free records stay");
    instance.restart().await;
    // Two collector delays (7.1 s each) and a margin.
    eventually(Duration::from_secs(22), "no record left", || {
        let (zk, dir) = (zk.clone(), dir.clone());
        async move { znodes_under(&zk, &dir).await.is_empty() }
    })
    .await;
}
