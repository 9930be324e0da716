//! Locked down on ZooKeeper: with `--zk-auth`, nobody else can read, write or delete
//! lockwarden's znodes; lease and request ids are stored only as seals, so what ZooKeeper
//! holds does not let anyone act as a holder; records written in plain text by the previous
//! version keep their holders.

use crate::common;

use std::time::Duration;

use common::{eventually, seed_record, unique_root, zk, zk_args, zk_client, znodes_under, Service};
use reqwest::StatusCode;
use serde_json::json;
use zookeeper_client as zkc;

const AUTH: &str = "digest:lockwarden:correct-horse";

async fn client_as(credential: Option<&[u8]>) -> zkc::Client {
    let mut connector = zkc::Client::connector();
    if let Some(credential) = credential {
        connector = connector.with_auth("digest", credential);
    }
    connector
        .connect(&zk::shared().connect_string())
        .await
        .expect("connecting to the test ZooKeeper")
}

/// Every znode under `path`, read as `client` (which must be allowed to).
async fn all_data(client: &zkc::Client, path: &str) -> Vec<(String, Vec<u8>)> {
    let mut found = Vec::new();
    for node in znodes_under(client, path).await {
        if let Ok((data, _)) = client.get_data(&node).await {
            found.push((node, data));
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_zk_auth_nobody_else_can_read_write_or_delete_any_znode() {
    let svc = Service::zk_with(|args| args.zk_auth = Some(AUTH.parse().unwrap())).await;
    let held = svc.must_acquire("acl/held", "owner-a", 60_000).await;
    // A blocked caller puts a waiter node in the lock's queue.
    let waiter = {
        let http = svc.http.clone();
        let url = format!("{}/v1/locks/acl%2Fheld/acquire", svc.base);
        tokio::spawn(async move {
            let body = json!({"owner": "owner-b", "lease_ms": 60000, "waiting_ms": 30000});
            http.post(url).json(&body).send().await.unwrap().status()
        })
    };
    let ours = client_as(Some(b"lockwarden:correct-horse")).await;
    let state = format!("{}/state", svc.root);
    eventually(Duration::from_secs(10), "a waiter node exists", || async {
        znodes_under(&ours, &state).await.len() >= 2
    })
    .await;
    let nodes = znodes_under(&ours, &svc.root).await;
    let record = format!("{}/locks/acl/held", svc.root);
    assert!(nodes.contains(&record), "{nodes:?}");
    let waiter_node = nodes
        .iter()
        .find(|n| n.starts_with(&state) && n.matches('/').count() >= 4)
        .expect("a waiter node")
        .clone();
    // The service's own identity sees everything, as a Helix client with the same
    // credentials would.
    assert!(ours.get_data(&record).await.is_ok());

    for (who, stranger) in [
        ("unauthenticated", client_as(None).await),
        ("someone else", client_as(Some(b"mallory:guess")).await),
    ] {
        for node in &nodes {
            assert_eq!(
                stranger.get_data(node).await.err(),
                Some(zkc::Error::NoAuth),
                "{who} reads {node}"
            );
            assert_eq!(
                stranger.set_data(node, b"forged", None).await.err(),
                Some(zkc::Error::NoAuth),
                "{who} writes {node}"
            );
            assert_eq!(
                stranger.get_acl(node).await.err(),
                Some(zkc::Error::NoAuth),
                "{who} reads the ACL of {node}"
            );
            let open = zkc::Acls::anyone_all();
            assert_eq!(
                stranger.set_acl(node, &open, None).await.err(),
                Some(zkc::Error::NoAuth),
                "{who} opens {node}"
            );
        }
        for node in [&record, &waiter_node] {
            assert_eq!(
                stranger.delete(node, None).await.err(),
                Some(zkc::Error::NoAuth),
                "{who} deletes {node}"
            );
        }
        for dir in [&svc.root, &state, &format!("{}/locks/acl", svc.root)] {
            assert_eq!(
                stranger.list_children(dir).await.err(),
                Some(zkc::Error::NoAuth),
                "{who} lists {dir}"
            );
            let options = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
            assert_eq!(
                stranger
                    .create(&format!("{dir}/planted"), b"", &options)
                    .await
                    .err(),
                Some(zkc::Error::NoAuth),
                "{who} creates under {dir}"
            );
        }
    }

    // The service itself works as before: the release hands the lock to the waiter.
    let (status, _) = svc
        .release("acl/held", held["lease_id"].as_str().unwrap())
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(waiter.await.unwrap(), StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_lease_or_request_id_is_readable_from_zookeeper() {
    let root = unique_root();
    let args = |secret: &str| {
        let mut args = zk_args(zk::shared(), &root);
        args.record_secret = Some(secret.into());
        args
    };
    let svc = Service::start(args("s3cret")).await;
    let other = Service::start(args("s3cret")).await;
    let plain = svc.must_acquire("sealed/plain", "a", 60_000).await;
    let body = json!({"owner": "b", "lease_ms": 60000, "request_id": "req-7f3a"});
    let (status, first) = svc.acquire("sealed/by-request", body.clone()).await;
    assert_eq!(status, StatusCode::OK);
    // A waiter's ticket in the queue holds its (future) lease too.
    let waiting = {
        let http = svc.http.clone();
        let url = format!("{}/v1/locks/sealed%2Fplain/acquire", svc.base);
        tokio::spawn(async move {
            let body = json!({"owner": "c", "lease_ms": 60000, "waiting_ms": 30000,
                              "request_id": "req-waiter-91"});
            let answer = http.post(url).json(&body).send().await.unwrap();
            answer.json::<serde_json::Value>().await.unwrap()
        })
    };
    let zk = zk_client(zk::shared()).await;
    let state = format!("{root}/state");
    eventually(Duration::from_secs(10), "a waiter node exists", || async {
        znodes_under(&zk, &state).await.len() >= 2
    })
    .await;

    let secrets = [
        plain["lease_id"].as_str().unwrap(),
        first["lease_id"].as_str().unwrap(),
        "req-7f3a",
        "req-waiter-91",
    ];
    let stored = all_data(&zk, &root).await;
    assert!(stored.len() >= 4, "{stored:?}");
    for (node, data) in &stored {
        let text = String::from_utf8_lossy(data);
        for secret in secrets {
            assert!(!text.contains(secret), "{node} holds {secret}: {text}");
        }
    }
    let record: serde_json::Value = serde_json::from_slice(
        &zk.get_data(&format!("{root}/locks/sealed/plain"))
            .await
            .unwrap()
            .0,
    )
    .unwrap();
    let seal = record["simpleFields"]["LW_LEASE_SEAL"].as_str().unwrap();
    assert!(record["simpleFields"].get("LW_LEASE_ID").is_none());

    // What ZooKeeper holds is no lease: presenting the seal gets nothing.
    let (status, refused) = svc.release("sealed/plain", seal).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["error"]["code"], "not_owner");
    // An instance with another secret does not know the lease either.
    let stranger = Service::start(args("another secret")).await;
    let (status, _) = stranger
        .renew("sealed/plain", json!({"lease_id": plain["lease_id"]}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT);

    // A retry with the same request_id is answered with the same lease id, on any instance
    // that shares the secret, although no instance stored it.
    let (status, again) = other.acquire("sealed/by-request", body).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["lease_id"], first["lease_id"]);
    assert_eq!(again["fencing_token"], first["fencing_token"]);

    // The holder's own lease still works, and the waiter gets its lease when handed the lock.
    let (status, _) = other
        .release("sealed/plain", plain["lease_id"].as_str().unwrap())
        .await;
    assert_eq!(status, StatusCode::OK);
    let granted = waiting.await.unwrap();
    let (status, _) = svc
        .release("sealed/plain", granted["lease_id"].as_str().unwrap())
        .await;
    assert_eq!(status, StatusCode::OK, "{granted}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_written_by_the_previous_version_keeps_its_holder() {
    let svc = Service::zk_with(|args| args.record_secret = Some("k".into())).await;
    let zk = zk_client(zk::shared()).await;
    let lease = uuid::Uuid::new_v4().to_string();
    let path = format!("{}/locks/legacy", svc.root);
    let expires = lockwarden::model::UnixMillis::now().0 + 60_000;
    seed_record(
        &zk,
        &path,
        json!({"OWNER": "old", "MESSAGE": "", "TIMEOUT": expires.to_string(), "PRIORITY": "0",
               "WAITING_TIMEOUT": "-1", "CLEANUP_TIMEOUT": "0", "REQUESTOR_ID": "NONE",
               "REQUESTOR_PRIORITY": "0", "REQUESTOR_WAITING_TIMEOUT": "-1",
               "REQUESTING_TIMESTAMP": "-1", "LW_LEASE_ID": lease, "LW_LEASE_MS": "60000",
               "LW_REQUEST_ID": "old-request", "LW_REQUEST_DIGEST": "00"}),
    )
    .await;
    let (status, taken) = svc
        .acquire("legacy", json!({"owner": "new", "lease_ms": 1000}))
        .await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "the old holder keeps it: {taken}"
    );
    let (status, renewed) = svc
        .renew("legacy", json!({"lease_id": lease, "lease_ms": 30000}))
        .await;
    assert_eq!(status, StatusCode::OK, "{renewed}");
    // The renewal stored the seals in place of the plain text.
    let (data, _) = zk.get_data(&path).await.unwrap();
    let text = String::from_utf8_lossy(&data);
    assert!(
        !text.contains(&lease) && !text.contains("old-request"),
        "{text}"
    );
    assert!(text.contains("LW_LEASE_SEAL"), "{text}");
    let (status, _) = svc.release("legacy", &lease).await;
    assert_eq!(status, StatusCode::OK);
}
