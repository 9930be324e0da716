//! A caller that a hand-off carried into the queue decides its first round on what its
//! instance knows (`rider_turn` in `service::joining`): it waits for the waiter of its own
//! instance just ahead of it instead of reading the queue. On a real ZooKeeper: busy locks,
//! with callers on one instance and on two, and of mixed priorities (a caller displaced as
//! requestor by a higher one is told `superseded` and asks again), serve everyone with
//! increasing tokens and nothing left queued, and on one instance most carried callers read
//! nothing before they wait.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{unique_root, zk, zk_args, Service};
use reqwest::StatusCode;
use serde_json::json;

/// Far less than a waiter's `waiting_ms`: a caller left waiting for a timer instead of a
/// hand-off would make a client miss it.
const ALL_SERVED: Duration = Duration::from_secs(25);

async fn carried_joins(svc: &Service) -> u64 {
    svc.metric("lockwarden_queue_joins_total{how=\"hand_off\"}")
        .await
}

async fn multi_reads(svc: &Service) -> u64 {
    let name = "lockwarden_zookeeper_request_duration_seconds_count{operation=\"multi_read\"}";
    svc.metric(name).await
}

/// `clients` callers loop `rounds` times through `lock`, each asking again as soon as it
/// released, spread over `services`, at `priority(client)`. A higher caller asks a lower
/// holder to clean up (within 30 s: it releases long before); one displaced from that
/// request by a still higher caller is told `superseded` and asks again. Checks every grant: each
/// client's tokens increase, no token is given twice, and nothing is left queued.
async fn busy(
    services: &[Arc<Service>],
    lock: &'static str,
    clients: usize,
    rounds: usize,
    priority: fn(usize) -> usize,
) {
    let top = (0..clients).map(priority).max().unwrap_or(0);
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let svc = services[c % services.len()].clone();
            tokio::spawn(async move {
                let mut tokens = Vec::new();
                for round in 0..rounds {
                    let body = json!({
                        "owner": format!("c{c}"),
                        "lease_ms": 30_000,
                        "waiting_ms": 60_000,
                        "cleanup_ms": 30_000,
                        "priority": priority(c),
                    });
                    let (status, granted) = loop {
                        let (status, answer) = svc.acquire(lock, body.clone()).await;
                        // A caller that registered as requestor against a lower holder
                        // and was displaced by a higher one is told so (docs/api.md,
                        // "Preemption"); it asks again, as a client would.
                        if status == StatusCode::CONFLICT && answer["error"]["code"] == "superseded"
                        {
                            assert!(priority(c) < top, "c{c} outranks everyone: {answer}");
                            eprintln!("c{c} round {round}: superseded, asks again");
                            continue;
                        }
                        break (status, answer);
                    };
                    assert_eq!(status, StatusCode::OK, "c{c} round {round}: {granted}");
                    tokens.push(granted["fencing_token"].as_u64().unwrap());
                    let lease = granted["lease_id"].as_str().unwrap();
                    let (status, released) = svc.release(lock, lease).await;
                    assert_eq!(status, StatusCode::OK, "c{c} round {round}: {released}");
                }
                tokens
            })
        })
        .collect();
    let mut all = Vec::new();
    for task in tasks {
        let tokens = tokio::time::timeout(ALL_SERVED, task)
            .await
            .expect("every client served without waiting for a timer")
            .unwrap();
        assert!(tokens.windows(2).all(|w| w[0] < w[1]), "tokens increase");
        all.extend(tokens);
    }
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), clients * rounds, "every grant has its own token");
    let info = services[0].info(lock).await;
    assert_eq!(info["state"], "free", "{info}");
    assert_eq!(info["waiters"], 0, "nothing left queued: {info}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn carried_callers_wait_without_reading_and_everyone_is_served() {
    let svc = Arc::new(Service::zk().await);
    let (carried_before, reads_before) = (carried_joins(&svc).await, multi_reads(&svc).await);
    busy(
        std::slice::from_ref(&svc),
        "riders-read-nothing",
        8,
        25,
        |_| 1,
    )
    .await;
    let carried = carried_joins(&svc).await - carried_before;
    let reads = multi_reads(&svc).await - reads_before;
    eprintln!("{carried} callers carried by hand-offs; {reads} reads of record and queue");
    assert!(carried >= 20, "callers rode on hand-offs ({carried})");
    // Each carried caller read the record and the queue in its first round before; now
    // one read, remembered, serves the callers behind it.
    assert!(
        reads < carried,
        "{reads} reads for {carried} carried callers"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn carried_callers_on_two_instances_are_all_served() {
    let root = unique_root();
    let a = Arc::new(Service::start(zk_args(zk::shared(), &root)).await);
    let b = Arc::new(Service::start(zk_args(zk::shared(), &root)).await);
    busy(
        &[a.clone(), b.clone()],
        "riders-two-instances",
        8,
        20,
        |_| 1,
    )
    .await;
    let carried = carried_joins(&a).await + carried_joins(&b).await;
    eprintln!("{carried} callers carried by hand-offs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn carried_callers_of_mixed_priorities_are_all_served() {
    let svc = Arc::new(Service::zk().await);
    busy(std::slice::from_ref(&svc), "riders-mixed", 9, 15, |c| {
        1 + c % 3
    })
    .await;
    eprintln!("{} callers carried by hand-offs", carried_joins(&svc).await);
}
