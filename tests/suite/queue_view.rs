//! `GET /v1/locks/{name}/queue`: the callers waiting for a lock in the order it will be
//! handed on, the requestor marked, who they are and until when they wait, and never a
//! secret (lease ids, request ids, or their seals); on ZooKeeper and in memory.

use crate::common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use common::{eventually, Service};
use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

const WAIT: Duration = Duration::from_secs(10);
const LOCK: &str = "qv/db";

fn spawn_acquire(svc: &Arc<Service>, body: Value) -> JoinHandle<(StatusCode, Value)> {
    let svc = svc.clone();
    tokio::spawn(async move { svc.acquire(LOCK, body).await })
}

async fn queue(svc: &Service) -> Value {
    let (status, body) = svc.get("/v1/locks/qv%2Fdb/queue").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

async fn until_waiting(svc: &Service, n: usize) {
    eventually(WAIT, &format!("{n} callers in the queue"), || async {
        queue(svc).await["queue"].as_array().unwrap().len() == n
    })
    .await;
}

async fn lists_callers_in_service_order_without_secrets(svc: Service) {
    let svc = Arc::new(svc);
    let holder = svc
        .acquire(
            LOCK,
            json!({"owner": "holder", "lease_ms": 60000, "cleanup_ms": 30000}),
        )
        .await
        .1;
    let empty = queue(&svc).await;
    assert_eq!(empty["queue"], json!([]));
    assert_eq!(empty["lock"]["owner"], "holder");

    // A preemptor becomes the requestor; the others queue behind it by priority, then
    // arrival. Each joins once the one before is in, so that arrival is certain.
    let body = |owner: &str, priority: u32, request_id: &str| {
        json!({"owner": owner, "lease_ms": 60000, "priority": priority, "waiting_ms": 20000,
               "message": format!("{owner} waits"), "request_id": request_id})
    };
    let mut calls = vec![spawn_acquire(&svc, body("preemptor", 5, "r-1"))];
    until_waiting(&svc, 1).await;
    for (n, (owner, priority)) in [("low-first", 1), ("middle", 3), ("low-second", 1)]
        .into_iter()
        .enumerate()
    {
        calls.push(spawn_acquire(
            &svc,
            body(owner, priority, &format!("r-{}", n + 2)),
        ));
        until_waiting(&svc, n + 2).await;
    }

    let answer = queue(&svc).await;
    let entries = answer["queue"].as_array().unwrap();
    let owners: Vec<&str> = entries
        .iter()
        .map(|e| e["owner"].as_str().unwrap())
        .collect();
    assert_eq!(owners, ["preemptor", "middle", "low-first", "low-second"]);
    let positions: Vec<u64> = entries
        .iter()
        .map(|e| e["position"].as_u64().unwrap())
        .collect();
    assert_eq!(positions, [1, 2, 3, 4]);
    let priorities: Vec<u64> = entries
        .iter()
        .map(|e| e["priority"].as_u64().unwrap())
        .collect();
    assert_eq!(priorities, [5, 3, 1, 1]);
    let requestors: Vec<bool> = entries.iter().map(|e| e["requestor"] == true).collect();
    assert_eq!(requestors, [true, false, false, false]);
    assert_eq!(entries[1]["message"], "middle waits");
    assert_eq!(answer["truncated"], false);
    assert_eq!(answer["lock"]["waiters"], 4);
    assert_eq!(answer["lock"]["requestor"]["owner"], "preemptor");
    let cleanup_left = answer["lock"]["cleanup_remaining_ms"].as_u64().unwrap();
    assert!((1..=30000).contains(&cleanup_left), "{cleanup_left}");
    for entry in entries {
        assert!(entry["joined_at"].is_string(), "{entry}");
        let left = entry["wait_remaining_ms"].as_u64().unwrap();
        assert!(left <= 20000, "{entry}");
        let keys: BTreeSet<&str> = entry
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        let documented = [
            "position",
            "owner",
            "priority",
            "message",
            "forceful",
            "requestor",
            "joined_at",
            "waiting_until",
            "wait_remaining_ms",
        ];
        assert_eq!(keys, documented.into_iter().collect(), "only public fields");
    }
    // The requestor's wait ends at the cleanup deadline at the latest.
    assert!(entries[0]["wait_remaining_ms"].as_u64().unwrap() <= cleanup_left);
    // No secret, in any form: the holder's lease id, the callers' request ids.
    let text = answer.to_string();
    let lease = holder["lease_id"].as_str().unwrap();
    for secret in [lease, "r-1", "r-2", "r-3", "r-4", "lease_id", "request_id"] {
        assert!(!text.contains(secret), "{secret} shows in {text}");
    }

    // A caller that leaves leaves the view; the release hands the lock to the requestor.
    let (status, _) = svc.release(LOCK, lease).await;
    assert_eq!(status, StatusCode::OK);
    let (status, granted) = calls.remove(0).await.unwrap();
    assert_eq!(status, StatusCode::OK, "{granted}");
    let after = queue(&svc).await;
    assert_eq!(after["lock"]["owner"], "preemptor");
    let owners: Vec<&str> = after["queue"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["owner"].as_str().unwrap())
        .collect();
    assert_eq!(owners, ["middle", "low-first", "low-second"]);
    assert_eq!(after["queue"][0]["position"], 1);
    for call in calls {
        call.abort();
    }
}

async fn a_free_lock_has_an_empty_queue_and_names_are_checked(svc: Service) {
    let answer = queue(&svc).await;
    assert_eq!(answer["lock"]["state"], "free");
    assert_eq!(answer["queue"], json!([]));
    let (status, body) = svc.get("/v1/locks/a%20b/queue").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], "invalid_lock_name");
}

on_both_stores!(
    lists_callers_in_service_order_without_secrets,
    a_free_lock_has_an_empty_queue_and_names_are_checked,
);
