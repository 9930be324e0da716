//! Whom a release, a crash or an expiry wakes: one waiter, not fifty (no herd effect); a
//! killed instance's waiters vanish with its session; the head waiter takes an expired
//! lease with no write at expiry; a busy lock never has two holders; and one request id
//! waiting on two locks gets each lock right.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{eventually, unique_root, zk, zk_args, zk_flags, Process, Service};
use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

const WAIT: Duration = Duration::from_secs(20);

/// Wake-ups so far: (by the record or an in-process hand-off, by a predecessor, by a timer).
async fn wakeups(svc: &Service) -> (u64, u64, u64) {
    let text = svc.metrics().await;
    let get = |cause| {
        common::metric_value(
            &text,
            &format!("lockwarden_waiter_wakeups_total{{cause=\"{cause}\"}}"),
        )
    };
    (
        get("record") + get("handed"),
        get("predecessor"),
        get("timer"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_release_wakes_one_waiter_not_fifty() {
    let svc = Arc::new(Service::zk().await);
    let held = svc.must_acquire("herd", "holder", 120_000).await;
    let waiters_tasks: Vec<JoinHandle<(StatusCode, Value)>> = (0..50)
        .map(|i| {
            let svc = svc.clone();
            tokio::spawn(async move {
                svc.acquire(
                    "herd",
                    json!({"owner": format!("w{i}"), "lease_ms": 60_000, "waiting_ms": 60_000}),
                )
                .await
            })
        })
        .collect();
    svc.wait_for_waiters("herd", 50).await;
    let before = wakeups(&svc).await;
    let (status, released) = svc
        .release("herd", held["lease_id"].as_str().unwrap())
        .await;
    assert_eq!(status, StatusCode::OK, "{released}");
    assert_eq!(
        released["lock"]["state"], "held",
        "the release hands over: {released}"
    );
    let new_holder = released["lock"]["owner"].as_str().unwrap().to_owned();
    // The new holder's call returns; the waiter behind it becomes the head and re-arms.
    eventually(WAIT, "the handoff to complete", || async {
        let now = wakeups(&svc).await;
        now.0 > before.0 && now.1 > before.1
    })
    .await;
    let after = wakeups(&svc).await;
    // The head is signalled by its watch on the record and, as the release ran on this
    // instance, in-process too: one waiter, at most two signals.
    assert!(
        (1..=2).contains(&(after.0 - before.0)),
        "only the waiter handed the lock woke for it: {before:?} -> {after:?}"
    );
    assert_eq!(
        after.1 - before.1,
        1,
        "one waiter woke because the waiter ahead left"
    );
    assert_eq!(after.2 - before.2, 0);
    assert_eq!(svc.info("herd").await["waiters"], 49);
    for task in &waiters_tasks {
        task.abort();
    }
    assert!(new_holder.starts_with('w'));
    svc.wait_for_waiters("herd", 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_instances_waiters_vanish_with_its_session() {
    let root = unique_root();
    let a = Service::start(zk_args(zk::shared(), &root)).await;
    let held = a.must_acquire("crash", "holder", 60_000).await;
    let mut b = Process::start(&zk_flags(zk::shared(), &root, &[])).await;
    let calls: Vec<JoinHandle<()>> = (0..3)
        .map(|i| {
            let url = format!("{}/v1/locks/crash/acquire", b.base);
            tokio::spawn(async move {
                let body =
                    json!({"owner": format!("b{i}"), "lease_ms": 60_000, "waiting_ms": 60_000});
                let _ = common::http_client().post(url).json(&body).send().await;
            })
        })
        .collect();
    a.wait_for_waiters("crash", 3).await;
    b.kill();
    for call in calls {
        call.abort();
    }
    a.wait_for_waiters("crash", 0).await;
    let (_, released) = a.release("crash", held["lease_id"].as_str().unwrap()).await;
    assert_eq!(released["lock"]["state"], "free");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_head_waiter_takes_an_expired_lease_without_any_write_at_expiry() {
    let svc = Service::zk().await;
    let held = svc.must_acquire("expiry", "short", 400).await;
    let expires_at = held["lock"]["expires_at"].as_str().unwrap().to_owned();
    let (status, body) = svc
        .acquire(
            "expiry",
            json!({"owner": "next", "lease_ms": 60_000, "waiting_ms": 10_000}),
        )
        .await;
    let got_it = lockwarden::model::UnixMillis::now();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["lock"]["owner"], "next");
    let expiry =
        time::OffsetDateTime::parse(&expires_at, &time::format_description::well_known::Rfc3339)
            .unwrap();
    let late_ms = got_it.0 - (expiry.unix_timestamp_nanos() / 1_000_000) as i64;
    eprintln!("the head waiter got the lock {late_ms} ms after the lease ran out");
    assert!(late_ms >= 0, "not before the lease ran out");
}

/// Many clients loop through one lock: every grant is real (its release succeeds) and the
/// fencing tokens of successive grants strictly increase.
async fn a_busy_lock_never_has_two_holders(svc: Service) {
    let svc = Arc::new(svc);
    let tokens = Arc::new(Mutex::new(Vec::new()));
    let clients: Vec<JoinHandle<()>> = (0..6)
        .map(|c| {
            let (svc, tokens) = (svc.clone(), tokens.clone());
            tokio::spawn(async move {
                for round in 0..25 {
                    let body =
                        json!({"owner": format!("c{c}"), "lease_ms": 30_000, "waiting_ms": 20_000});
                    let (status, granted) = svc.acquire("busy-loop", body).await;
                    assert_eq!(status, StatusCode::OK, "c{c} round {round}: {granted}");
                    tokens
                        .lock()
                        .unwrap()
                        .push((granted["fencing_token"].as_u64().unwrap(), Instant::now()));
                    let (status, released) = svc
                        .release("busy-loop", granted["lease_id"].as_str().unwrap())
                        .await;
                    assert_eq!(
                        status,
                        StatusCode::OK,
                        "c{c} round {round}: the grant was real: {released}"
                    );
                }
            })
        })
        .collect();
    for client in clients {
        client.await.unwrap();
    }
    let mut tokens = tokens.lock().unwrap().clone();
    tokens.sort_by_key(|(_, at)| *at);
    assert_eq!(tokens.len(), 150);
    let mut seen: Vec<u64> = tokens.iter().map(|(t, _)| *t).collect();
    seen.dedup();
    assert_eq!(seen.len(), 150, "every grant has its own token");
}

mod busy {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_zookeeper() {
        super::a_busy_lock_never_has_two_holders(super::common::Service::zk().await).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn in_memory() {
        super::a_busy_lock_never_has_two_holders(super::common::Service::memory().await).await
    }
}

/// The same owner may wait on two locks with the same request_id (ids are per lock): each
/// hand-off reaches the waiter of its own lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_request_id_waiting_on_two_locks_gets_each_lock_right() {
    let svc = Arc::new(Service::zk().await);
    let x = svc.must_acquire("twin-x", "holder", 60_000).await;
    let y = svc.must_acquire("twin-y", "holder", 60_000).await;
    let wait = |name: &'static str| {
        let svc = svc.clone();
        tokio::spawn(async move {
            svc.acquire(name, json!({"owner": "w", "lease_ms": 60_000, "waiting_ms": 20_000, "request_id": "same"})).await
        })
    };
    let (on_x, on_y) = (wait("twin-x"), wait("twin-y"));
    svc.wait_for_waiters("twin-x", 1).await;
    svc.wait_for_waiters("twin-y", 1).await;
    svc.release("twin-x", x["lease_id"].as_str().unwrap()).await;
    let (status, got_x) = on_x.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{got_x}");
    assert_eq!(got_x["lock"]["name"], "twin-x");
    assert_eq!(
        svc.info("twin-y").await["owner"],
        "holder",
        "twin-y is untouched"
    );
    svc.release("twin-y", y["lease_id"].as_str().unwrap()).await;
    let (status, got_y) = on_y.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{got_y}");
    assert_eq!(got_y["lock"]["name"], "twin-y");
    assert_ne!(got_x["lease_id"], got_y["lease_id"]);
    assert!(
        svc.validate("twin-x", got_x["fencing_token"].as_u64().unwrap())
            .await
    );
    assert!(
        svc.validate("twin-y", got_y["fencing_token"].as_u64().unwrap())
            .await
    );
}
