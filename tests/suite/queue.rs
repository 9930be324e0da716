//! Fair blocking acquire: the queue's order, timeouts, departures, idempotent retries, and
//! one global order across instances. `queue_wakeups.rs` has whom a release, a crash or an
//! expiry wakes.

use crate::common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{unique_root, zk, zk_args, Service};
use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

const WAIT: Duration = Duration::from_secs(20);

/// Each grant as (owner, fencing token, when granted, when its release began).
type GrantLog = Arc<Mutex<Vec<(String, u64, Instant, Instant)>>>;

/// One client: waits for the lock, records when it got it, holds it briefly, releases.
fn client(
    svc: Arc<Service>,
    name: &'static str,
    who: String,
    priority: u32,
    log: GrantLog,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let (status, body) = svc.acquire(name, json!({"owner": who, "lease_ms": 30_000, "priority": priority, "waiting_ms": 20_000})).await;
        assert_eq!(status, StatusCode::OK, "{who}: {body}");
        let granted = Instant::now();
        tokio::time::sleep(Duration::from_millis(20)).await;
        let releasing = Instant::now();
        let token = body["fencing_token"].as_u64().unwrap();
        log.lock().unwrap().push((who, token, granted, releasing));
        let (status, _) = svc.release(name, body["lease_id"].as_str().unwrap()).await;
        assert_eq!(status, StatusCode::OK);
    })
}

async fn ten_clients_are_served_one_at_a_time_in_arrival_order(svc: Service) {
    let svc = Arc::new(svc);
    let holder = svc.must_acquire("demo", "first", 60_000).await;
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut clients = Vec::new();
    for i in 0..10 {
        clients.push(client(
            svc.clone(),
            "demo",
            format!("client-{i}"),
            0,
            log.clone(),
        ));
        svc.wait_for_waiters("demo", i + 1).await;
    }
    svc.release("demo", holder["lease_id"].as_str().unwrap())
        .await;
    for c in clients {
        c.await.unwrap();
    }
    let log = log.lock().unwrap().clone();
    let order: Vec<&str> = log.iter().map(|(who, ..)| who.as_str()).collect();
    let arrival: Vec<String> = (0..10).map(|i| format!("client-{i}")).collect();
    assert_eq!(order, arrival, "grants follow arrival order");
    for pair in log.windows(2) {
        assert!(pair[1].1 > pair[0].1, "fencing tokens increase");
        assert!(pair[1].2 >= pair[0].3, "no two holds overlap");
    }
    assert_eq!(svc.info("demo").await["state"], "free");
}

async fn waiters_are_served_by_priority_then_arrival(svc: Service) {
    let svc = Arc::new(svc);
    let (_, holder) = svc
        .acquire(
            "prio",
            json!({"owner": "top", "lease_ms": 60_000, "priority": 10}),
        )
        .await;
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut clients = Vec::new();
    for (i, (who, priority)) in [("p1", 1), ("p5-early", 5), ("p3", 3), ("p5-late", 5)]
        .into_iter()
        .enumerate()
    {
        clients.push(client(
            svc.clone(),
            "prio",
            who.to_string(),
            priority,
            log.clone(),
        ));
        svc.wait_for_waiters("prio", i as u64 + 1).await;
    }
    assert_eq!(
        svc.info("prio").await["requestor"],
        Value::Null,
        "nobody outranks the holder"
    );
    svc.release("prio", holder["lease_id"].as_str().unwrap())
        .await;
    for c in clients {
        c.await.unwrap();
    }
    let order: Vec<String> = log
        .lock()
        .unwrap()
        .iter()
        .map(|(who, ..)| who.clone())
        .collect();
    assert_eq!(order, ["p5-early", "p5-late", "p3", "p1"]);
}

async fn a_waiter_times_out_and_leaves_nothing_behind(svc: Service) {
    svc.must_acquire("busy", "holder", 60_000).await;
    let started = Instant::now();
    let (status, body) = svc
        .acquire(
            "busy",
            json!({"owner": "w", "lease_ms": 1000, "waiting_ms": 300}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body["error"]["code"], "wait_timeout");
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(body["lock"]["owner"], "holder");
    assert_eq!(svc.waiters("busy").await, 0);
}

async fn a_waiter_whose_client_disconnects_is_removed_at_once(svc: Service) {
    let held = svc.must_acquire("door", "holder", 60_000).await;
    let impatient = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let url = format!("{}/v1/locks/door/acquire", svc.base);
    let gone = impatient
        .post(url)
        .json(&json!({"owner": "leaver", "lease_ms": 60_000, "waiting_ms": 10_000}))
        .send()
        .await;
    assert!(gone.is_err());
    svc.wait_for_waiters("door", 0).await;
    let (_, released) = svc
        .release("door", held["lease_id"].as_str().unwrap())
        .await;
    assert_eq!(
        released["lock"]["state"], "free",
        "nobody is handed the lock after they left"
    );
}

async fn a_retried_request_joins_the_running_wait(svc: Service) {
    let svc = Arc::new(svc);
    let held = svc.must_acquire("retry", "holder", 60_000).await;
    let body =
        json!({"owner": "w", "lease_ms": 60_000, "waiting_ms": 20_000, "request_id": "job-42"});
    let first = {
        let (svc, body) = (svc.clone(), body.clone());
        tokio::spawn(async move { svc.acquire("retry", body).await })
    };
    svc.wait_for_waiters("retry", 1).await;
    let second = {
        let (svc, body) = (svc.clone(), body.clone());
        tokio::spawn(async move { svc.acquire("retry", body).await })
    };
    let (status, mismatch) = svc
        .acquire(
            "retry",
            json!({"owner": "w", "lease_ms": 5, "waiting_ms": 20_000, "request_id": "job-42"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{mismatch}");
    assert_eq!(svc.waiters("retry").await, 1, "a retry never queues twice");
    svc.release("retry", held["lease_id"].as_str().unwrap())
        .await;
    let (s1, b1) = first.await.unwrap();
    let (s2, b2) = second.await.unwrap();
    assert_eq!((s1, s2), (StatusCode::OK, StatusCode::OK), "{b1} {b2}");
    assert_eq!(b1["lease_id"], b2["lease_id"]);
    let (s3, b3) = svc.acquire("retry", body).await;
    assert_eq!(
        (s3, &b3["lease_id"]),
        (StatusCode::OK, &b1["lease_id"]),
        "a later retry gets the same outcome"
    );
}

/// A waiting acquire on its own task; its answer is the grant.
fn waiting_acquire(
    svc: &Arc<Service>,
    name: &'static str,
    who: &str,
    priority: u32,
) -> JoinHandle<Value> {
    let svc = svc.clone();
    let body =
        json!({"owner": who, "lease_ms": 30_000, "priority": priority, "waiting_ms": 20_000});
    tokio::spawn(async move {
        let (status, body) = svc.acquire(name, body).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body
    })
}

async fn queue_reads_saved(svc: &Service) -> u64 {
    let text = svc.metrics().await;
    common::metric_value(&text, "lockwarden_queue_reads_saved_total")
}

/// Waits for `who`'s acquire to be granted and returns its lease.
async fn granted_to(tasks: &mut HashMap<&str, JoinHandle<Value>>, who: &str) -> String {
    let body = tokio::time::timeout(WAIT, tasks.remove(who).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(body["lock"]["owner"], who);
    body["lease_id"].as_str().unwrap().to_owned()
}

/// A release hands the lock on from the queue it remembers from the previous hand-off,
/// without reading it again.
async fn a_release_hands_on_from_the_queue_it_remembers(svc: Service) {
    let svc = Arc::new(svc);
    let mut lease = svc.must_acquire("remembered", "top", 60_000).await["lease_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut tasks = HashMap::new();
    for (i, who) in ["a", "b", "c"].into_iter().enumerate() {
        tasks.insert(who, waiting_acquire(&svc, "remembered", who, 0));
        svc.wait_for_waiters("remembered", i as u64 + 1).await;
    }
    svc.release("remembered", &lease).await;
    lease = granted_to(&mut tasks, "a").await;
    for who in ["b", "c"] {
        let saved = queue_reads_saved(&svc).await;
        svc.release("remembered", &lease).await;
        lease = granted_to(&mut tasks, who).await;
        // The release, and the waiter behind the new holder, may each have used it.
        assert!(queue_reads_saved(&svc).await > saved);
    }
    svc.release("remembered", &lease).await;
    assert_eq!(svc.info("remembered").await["state"], "free");
}

/// What a release remembers never passes over a caller of higher priority that joined
/// since: joining above the priority the record names changes the record.
async fn a_higher_caller_joining_later_is_not_passed_over(svc: Service) {
    let svc = Arc::new(svc);
    let (_, top) = svc
        .acquire(
            "later",
            json!({"owner": "top", "lease_ms": 60_000, "priority": 10}),
        )
        .await;
    let top_lease = top["lease_id"].as_str().unwrap();
    let mut tasks = HashMap::new();
    for (i, who) in ["a", "b"].into_iter().enumerate() {
        tasks.insert(who, waiting_acquire(&svc, "later", who, 1));
        svc.wait_for_waiters("later", i as u64 + 1).await;
    }
    // A renewal reads the queue and remembers it: [a, b].
    let (status, _) = svc
        .renew("later", json!({"lease_id": top_lease, "lease_ms": 60_000}))
        .await;
    assert_eq!(status, StatusCode::OK);
    tasks.insert("d", waiting_acquire(&svc, "later", "d", 3));
    svc.wait_for_waiters("later", 3).await;
    svc.release("later", top_lease).await;
    let mut lease = granted_to(&mut tasks, "d").await;
    assert!(!tasks["a"].is_finished() && !tasks["b"].is_finished());
    for who in ["a", "b"] {
        svc.release("later", &lease).await;
        lease = granted_to(&mut tasks, who).await;
    }
    svc.release("later", &lease).await;
    assert_eq!(svc.info("later").await["state"], "free");
}

/// A waiter's own `waiting_ms` holds whatever the waiter ahead of it does.
async fn a_waiter_times_out_on_time_behind_a_patient_one(svc: Service) {
    let svc = Arc::new(svc);
    let holder = svc.must_acquire("patient", "h", 60_000).await;
    let lease = holder["lease_id"].as_str().unwrap();
    let patient = tokio::spawn({
        let svc = svc.clone();
        async move {
            svc.acquire(
                "patient",
                json!({"owner": "a", "lease_ms": 1000, "waiting_ms": 60_000}),
            )
            .await
        }
    });
    svc.wait_for_waiters("patient", 1).await;
    let hasty = tokio::spawn({
        let svc = svc.clone();
        async move {
            svc.acquire(
                "patient",
                json!({"owner": "b", "lease_ms": 1000, "waiting_ms": 1000}),
            )
            .await
        }
    });
    svc.wait_for_waiters("patient", 2).await;
    // A change to the lock while both wait (the in-memory store wakes every waiter on it).
    let (status, _) = svc
        .renew("patient", json!({"lease_id": lease, "lease_ms": 60_000}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = tokio::time::timeout(WAIT, hasty).await.unwrap().unwrap();
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "wait_timeout");
    assert!(!patient.is_finished(), "the waiter ahead is still waiting");
    svc.release("patient", lease).await;
    let (status, body) = tokio::time::timeout(WAIT, patient).await.unwrap().unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    svc.release("patient", body["lease_id"].as_str().unwrap())
        .await;
}

on_both_stores!(
    a_waiter_times_out_on_time_behind_a_patient_one,
    a_higher_caller_joining_later_is_not_passed_over,
    ten_clients_are_served_one_at_a_time_in_arrival_order,
    waiters_are_served_by_priority_then_arrival,
    a_waiter_times_out_and_leaves_nothing_behind,
    a_waiter_whose_client_disconnects_is_removed_at_once,
    a_retried_request_joins_the_running_wait;
    hinted: a_release_hands_on_from_the_queue_it_remembers,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_on_two_instances_are_served_in_one_global_order() {
    let root = unique_root();
    let a = Arc::new(Service::start(zk_args(zk::shared(), &root)).await);
    let b = Arc::new(Service::start(zk_args(zk::shared(), &root)).await);
    let held = a.must_acquire("global", "holder", 60_000).await;
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut clients = Vec::new();
    for i in 0..6 {
        let via = if i % 2 == 0 { a.clone() } else { b.clone() };
        clients.push(client(via, "global", format!("c{i}"), 0, log.clone()));
        a.wait_for_waiters("global", i + 1).await;
    }
    b.release("global", held["lease_id"].as_str().unwrap())
        .await;
    for c in clients {
        c.await.unwrap();
    }
    let order: Vec<String> = log
        .lock()
        .unwrap()
        .iter()
        .map(|(who, ..)| who.clone())
        .collect();
    assert_eq!(order, ["c0", "c1", "c2", "c3", "c4", "c5"]);
}

/// A waiter handed the lock by a release on its own instance hears of it in process; its
/// grant still says how many callers wait behind it, as one read from ZooKeeper does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_handed_over_here_counts_the_callers_behind_it() {
    let svc = Arc::new(Service::zk().await);
    let first = svc.must_acquire("counted", "first", 60_000).await;
    let second = common::waiting::queued(&svc, "counted", "second");
    svc.wait_for_waiters("counted", 1).await;
    let third = common::waiting::queued(&svc, "counted", "third");
    svc.wait_for_waiters("counted", 2).await;
    let (status, released) = svc
        .release("counted", first["lease_id"].as_str().unwrap())
        .await;
    assert_eq!(status, StatusCode::OK, "{released}");
    let second = common::waiting::granted(second, "second").await;
    assert_eq!(second["lock"]["waiters"], 1, "third waits behind: {second}");
    let (status, released) = svc
        .release("counted", second["lease_id"].as_str().unwrap())
        .await;
    assert_eq!(status, StatusCode::OK, "{released}");
    let third = common::waiting::granted(third, "third").await;
    assert_eq!(third["lock"]["waiters"], 0, "{third}");
}
