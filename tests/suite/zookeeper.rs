//! What only ZooKeeper can show: the stored record format, the absence of garbage, nested
//! names, and surviving a service restart and a ZooKeeper outage.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{
    eventually, seed_record, unique_root, zk, zk_args, zk_client, znodes_under, Process, Service,
    ZkServer,
};
use reqwest::StatusCode;
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_record_is_a_helix_znrecord_and_the_token_is_the_granting_zxid() {
    let svc = Service::zk().await;
    let zk = zk_client(zk::shared()).await;
    let body = svc
        .acquire("fmt", json!({"owner": "bot", "lease_ms": 60000, "message": "m", "priority": 4, "cleanup_ms": 50}))
        .await
        .1;
    let (data, stat) = zk
        .get_data(&format!("{}/locks/fmt", svc.root))
        .await
        .unwrap();
    assert_eq!(body["fencing_token"].as_i64().unwrap(), stat.czxid);
    assert_eq!(
        stat.ephemeral_owner, 0,
        "a lock record is a persistent znode"
    );
    let record: Value = serde_json::from_slice(&data).unwrap();
    assert_eq!(record["id"], "LOCK");
    let fields = &record["simpleFields"];
    assert_eq!(fields["OWNER"], "bot");
    assert_eq!(fields["MESSAGE"], "m");
    assert_eq!(fields["PRIORITY"], "4");
    assert_eq!(fields["CLEANUP_TIMEOUT"], "50");
    assert_eq!(fields["REQUESTOR_ID"], "NONE");
    let timeout: i64 = fields["TIMEOUT"].as_str().unwrap().parse().unwrap();
    let now = lockwarden::model::UnixMillis::now().0;
    assert!(
        timeout > now && timeout <= now + 60000,
        "TIMEOUT is the absolute expiry in epoch ms"
    );
    assert_eq!(record["listFields"], json!({}));

    // A renewal rewrites the record but keeps the token: it is stored explicitly from then on.
    let lease = body["lease_id"].as_str().unwrap();
    let (_, renewed) = svc.renew("fmt", json!({"lease_id": lease})).await;
    assert_eq!(renewed["lock"]["fencing_token"], body["fencing_token"]);
    assert_eq!(
        svc.info("fmt").await["fencing_token"],
        body["fencing_token"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_cycles_leave_no_znode_behind() {
    let svc = Arc::new(Service::zk().await);
    let workers = (0..4).map(|w| {
        let svc = svc.clone();
        tokio::spawn(async move {
            for i in 0..250 {
                let name = if i % 2 == 0 {
                    format!("g{w}-{i}")
                } else {
                    format!("nested/w{w}/n{i}/leaf")
                };
                let body = svc.must_acquire(&name, "cycler", 60000).await;
                let (status, _) = svc.release(&name, body["lease_id"].as_str().unwrap()).await;
                assert_eq!(status, StatusCode::OK);
            }
        })
    });
    for worker in workers {
        worker.await.unwrap();
    }
    let zk = zk_client(zk::shared()).await;
    let locks = format!("{}/locks", svc.root);
    let mut left = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        left = znodes_under(&zk, &locks).await;
        if left.is_empty() {
            break;
        }
        // Free records are deleted in two phases, 8.5 s apart in tests; the server then reaps
        // emptied containers on its own sweep (every 500 ms in tests).
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        left.is_empty(),
        "{} znodes left, e.g. {:?}",
        left.len(),
        &left[..left.len().min(5)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_names_use_containers_and_a_parent_name_waits_for_its_children() {
    let svc = Service::zk().await;
    let zk = zk_client(zk::shared()).await;
    let parent_path = format!("{}/locks/team", svc.root);
    let child = svc.must_acquire("team/job", "a", 60000).await;
    let (status, body) = svc
        .acquire("team", json!({"owner": "b", "lease_ms": 60000}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body["error"]["code"], "name_conflict");
    assert_eq!(body["acquired"], false);
    svc.release("team/job", child["lease_id"].as_str().unwrap())
        .await;
    // The intermediate node is a container: the server removes it once it is empty.
    eventually(
        Duration::from_secs(40),
        "the emptied container to be reaped",
        || async { zk.check_stat(&parent_path).await.unwrap().is_none() },
    )
    .await;
    svc.must_acquire("team", "b", 60000).await;
    // The other way round works at once, and releasing the parent keeps the nested lock.
    let nested = svc.must_acquire("team/late", "c", 60000).await;
    let parent_lease = svc.info("team").await;
    assert_eq!(parent_lease["owner"], "b");
    assert_eq!(svc.info("team/late").await["owner"], "c");
    let (_, list) = svc.get("/v1/locks?prefix=team").await;
    let names: Vec<&str> = list["locks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["team", "team/late"]);
    assert!(nested["fencing_token"].as_u64().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_record_without_our_fields_reads_and_is_taken_over_when_expired() {
    let svc = Service::zk().await;
    let zk = zk_client(zk::shared()).await;
    let path = format!("{}/locks/foreign", svc.root);
    seed_record(
        &zk,
        &path,
        json!({"OWNER": "helix-user", "TIMEOUT": "1000", "PRIORITY": "garbage", "MESSAGE": "old"}),
    )
    .await;
    let info = svc.info("foreign").await;
    assert_eq!(info["state"], "expired");
    assert_eq!(
        info["priority"], 0,
        "an unparsable field reads as Helix's default"
    );
    assert_eq!(info["lease_ms"], Value::Null);
    svc.must_acquire("foreign", "new", 60000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_locks_survive_a_service_restart() {
    let root = unique_root();
    let args = zk_args(zk::shared(), &root);
    let flags = vec![
        "--zk".to_string(),
        args.zk.clone().unwrap(),
        "--lock-root".into(),
        args.lock_root.clone(),
        "--state-root".into(),
        args.state_root.clone(),
        "--election-root".into(),
        args.election_root.clone(),
        "--semaphore-root".into(),
        args.semaphore_root.clone(),
    ];
    let mut first = Process::start(&flags).await;
    let http = common::http_client();
    let (status, body) = common::send(
        &http,
        &first.base,
        "POST",
        "/v1/locks/svc%2Frestart/acquire",
        Some(json!({"owner": "o", "lease_ms": 60000})),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    first.kill();
    let second = Process::start(&flags).await;
    let (_, info) = common::send(
        &http,
        &second.base,
        "GET",
        "/v1/locks/svc%2Frestart",
        None,
        None,
    )
    .await;
    assert_eq!(info["state"], "held");
    assert_eq!(info["fencing_token"], body["fencing_token"]);
    let release = json!({"lease_id": body["lease_id"]});
    let (status, released) = common::send(
        &http,
        &second.base,
        "POST",
        "/v1/locks/svc%2Frestart/release",
        Some(release),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{released}");
    assert_eq!(released["lock"]["state"], "free");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zookeeper_outage_gives_503_and_the_service_recovers_without_a_restart() {
    let server = tokio::task::spawn_blocking(ZkServer::start).await.unwrap();
    let mut args = zk_args(&server, &unique_root());
    args.store_timeout_ms = 700;
    let svc = Service::start(args).await;
    let held = svc.must_acquire("outage", "o", 120_000).await;
    let (status, _) = svc.get("/readyz").await;
    assert_eq!(status, StatusCode::OK);

    let server = Arc::new(server);
    let stopper = server.clone();
    tokio::task::spawn_blocking(move || stopper.stop())
        .await
        .unwrap();

    for (method, path, body) in [
        ("GET", "/v1/locks/outage", None),
        (
            "POST",
            "/v1/locks/other/acquire",
            Some(json!({"owner": "o", "lease_ms": 1000})),
        ),
        ("GET", "/readyz", None),
    ] {
        let started = Instant::now();
        let response = svc
            .http
            .request(method.parse().unwrap(), format!("{}{path}", svc.base));
        let response = match body {
            Some(body) => response.json(&body),
            None => response,
        };
        let response = response.send().await.unwrap();
        let waited = started.elapsed();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE, "{path}");
        assert_eq!(response.headers()["retry-after"], "1");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "store_unavailable");
        assert!(
            !body.to_string().contains("127.0.0.1"),
            "a 5xx does not leak internals: {body}"
        );
        // The bound is the request timeout (700 ms) plus scheduling slack on a shared machine.
        assert!(
            waited < Duration::from_millis(700 + 1500),
            "{path} took {waited:?}"
        );
    }

    // Stay down past the client's session expiry (7/5 of 4 s), so recovery needs a new session.
    tokio::time::sleep(Duration::from_millis(6500)).await;
    let restarter = server.clone();
    tokio::task::spawn_blocking(move || restarter.restart())
        .await
        .unwrap();
    eventually(
        Duration::from_secs(40),
        "readiness after ZooKeeper returns",
        || async { svc.get("/readyz").await.0 == StatusCode::OK },
    )
    .await;
    let info = svc.info("outage").await;
    assert_eq!(info["state"], "held", "the lock outlived the outage");
    let (status, _) = svc
        .release("outage", held["lease_id"].as_str().unwrap())
        .await;
    assert_eq!(status, StatusCode::OK);
    svc.must_acquire("outage", "p", 1000).await;
}

/// An empty node where a lock would live (a container left by nested names) is replaced in
/// one transaction; twenty callers racing for it still get exactly one grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_for_a_name_held_by_an_empty_container_has_one_winner() {
    let svc = Arc::new(Service::zk().await);
    let zk = zk_client(zk::shared()).await;
    let options =
        zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    zk.mkdir(&format!("{}/locks", svc.root), &options)
        .await
        .unwrap();
    let container =
        zookeeper_client::CreateMode::Container.with_acls(zookeeper_client::Acls::anyone_all());
    zk.create(&format!("{}/locks/hollow", svc.root), b"", &container)
        .await
        .unwrap();
    let calls = (0..20).map(|i| {
        let svc = svc.clone();
        tokio::spawn(async move {
            svc.acquire(
                "hollow",
                json!({"owner": format!("c{i}"), "lease_ms": 60_000}),
            )
            .await
        })
    });
    let results: Vec<(StatusCode, Value)> = futures::future::join_all(calls)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let winners: Vec<&Value> = results
        .iter()
        .filter(|(s, _)| *s == StatusCode::OK)
        .map(|(_, b)| b)
        .collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    assert_eq!(
        svc.info("hollow").await["owner"],
        winners[0]["lock"]["owner"]
    );
}

/// A queue container that never held a waiter (its waiter's create was lost after the
/// container was made) is not reaped by ZooKeeper; the collector's sweep removes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_removes_queue_containers_that_never_had_a_waiter() {
    let root = unique_root();
    let zk = zk_client(zk::shared()).await;
    let persistent =
        zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    zk.mkdir(&format!("{root}/state"), &persistent)
        .await
        .unwrap();
    let container =
        zookeeper_client::CreateMode::Container.with_acls(zookeeper_client::Acls::anyone_all());
    let dir = format!("{root}/state/never~waited");
    zk.create(&dir, b"", &container).await.unwrap();
    let _svc = Service::start(zk_args(zk::shared(), &root)).await;
    eventually(Duration::from_secs(10), "the empty container to go", || {
        let (zk, dir) = (zk.clone(), dir.clone());
        async move { zk.check_stat(&dir).await.unwrap().is_none() }
    })
    .await;
}
