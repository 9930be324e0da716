//! Fair blocking acquire: the queue's order, timeouts, departures, idempotent retries, the
//! absence of the herd effect, and one global order across instances.

#[macro_use]
mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{eventually, unique_root, zk, zk_args, zk_flags, Process, Service};
use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

const WAIT: Duration = Duration::from_secs(20);

/// Each grant as (owner, fencing token, when granted, when its release began).
type GrantLog = Arc<Mutex<Vec<(String, u64, Instant, Instant)>>>;

async fn waiters(svc: &Service, name: &str) -> u64 {
    svc.info(name).await["waiters"].as_u64().unwrap()
}

async fn wait_for_waiters(svc: &Service, name: &str, n: u64) {
    eventually(WAIT, &format!("{n} waiters on {name}"), || async {
        waiters(svc, name).await == n
    })
    .await;
}

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
        wait_for_waiters(&svc, "demo", i + 1).await;
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
        wait_for_waiters(&svc, "prio", i as u64 + 1).await;
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
    assert_eq!(waiters(&svc, "busy").await, 0);
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
    wait_for_waiters(&svc, "door", 0).await;
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
    wait_for_waiters(&svc, "retry", 1).await;
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
    assert_eq!(
        waiters(&svc, "retry").await,
        1,
        "a retry never queues twice"
    );
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
    counter(&text, "lockwarden_queue_reads_saved_total")
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
        wait_for_waiters(&svc, "remembered", i as u64 + 1).await;
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
        wait_for_waiters(&svc, "later", i as u64 + 1).await;
    }
    // A renewal reads the queue and remembers it: [a, b].
    let (status, _) = svc
        .renew("later", json!({"lease_id": top_lease, "lease_ms": 60_000}))
        .await;
    assert_eq!(status, StatusCode::OK);
    tasks.insert("d", waiting_acquire(&svc, "later", "d", 3));
    wait_for_waiters(&svc, "later", 3).await;
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
    wait_for_waiters(&svc, "patient", 1).await;
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
    wait_for_waiters(&svc, "patient", 2).await;
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
    a_release_hands_on_from_the_queue_it_remembers,
    a_higher_caller_joining_later_is_not_passed_over,
    ten_clients_are_served_one_at_a_time_in_arrival_order,
    waiters_are_served_by_priority_then_arrival,
    a_waiter_times_out_and_leaves_nothing_behind,
    a_waiter_whose_client_disconnects_is_removed_at_once,
    a_retried_request_joins_the_running_wait,
);

fn counter(metrics: &str, series: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0)
}

/// Wake-ups so far: (by the record or an in-process hand-off, by a predecessor, by a timer).
async fn wakeups(svc: &Service) -> (u64, u64, u64) {
    let text = svc.metrics().await;
    let get = |cause| {
        counter(
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
    wait_for_waiters(&svc, "herd", 50).await;
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
    wait_for_waiters(&svc, "herd", 0).await;
}

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
        wait_for_waiters(&a, "global", i + 1).await;
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
    wait_for_waiters(&a, "crash", 3).await;
    b.kill();
    for call in calls {
        call.abort();
    }
    wait_for_waiters(&a, "crash", 0).await;
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
    wait_for_waiters(&svc, "twin-x", 1).await;
    wait_for_waiters(&svc, "twin-y", 1).await;
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
