//! What only real servers show: a 3-node ZooKeeper ensemble (node 1 a lagging follower)
//! and three lockwarden instances (one with its clock 5 s ahead or behind), under faults.
//!
//! - `chaos_run`: the workload of 16 clients on locks, a semaphore and an election while the
//!   nemesis deals every fault (leader killed or paused past the session timeout, quorum
//!   lost, an instance killed, paused or cut off, slow replies, lost answers), one at a
//!   time, then the checks: no overlapping grants (no two live leaders, no more than
//!   `limit` permits), increasing tokens and terms, no stale validate, no lost lease, no
//!   leader renewed after its lease ended, every lock, permit and election takeable on
//!   every instance afterwards, and no garbage after the collector's delays.
//! - Two faults with promises of their own: quorum loss answers 503 at once and recovers;
//!   a killed instance's holders survive and its waiters go.
//!
//! Skewed clocks and lost, late or refused answers in every combination are the
//! simulation's (`tests/simulation`); the ZooKeeper store's own handling of each lost
//! answer is `tests/suite` (`late_answer`, `lost_entry`, `lost_grant`, `late_landing`).
//! The tests share the machine's two cores, so their busy parts take turns
//! (`nemesis::busy_turn`).
//!
//! `./scripts/chaos --duration S --seed N [--faults A,B]` runs `chaos_run` with those
//! settings.

mod common;

use std::time::{Duration, Instant};

use common::nemesis::{self, Cluster, Fault, STORE_TIMEOUT_MS};

/// Quorum loss: every call answers 503 with Retry-After within the store timeout (never
/// hangs), and the service serves again within 5 s of the quorum's return, with no restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_loss_answers_503_quickly_and_recovers() {
    let _turn = nemesis::busy_turn().await;
    let cluster = Cluster::start(2, 0).await;
    let http = common::http_client();
    let leader = cluster.ensemble.leader().await.expect("a leader");
    let other = (1..=3).find(|id| *id != leader).unwrap();
    cluster.ensemble.kill(leader);
    cluster.ensemble.kill(other);
    for _ in 0..3 {
        for url in cluster.urls() {
            let started = Instant::now();
            let answer = http
                .post(format!("{url}/v1/locks/q/acquire"))
                .json(&serde_json::json!({"owner": "a", "lease_ms": 1000}))
                .send()
                .await
                .expect("an answer");
            let took = started.elapsed();
            assert_eq!(answer.status(), 503);
            assert!(answer.headers().contains_key("retry-after"));
            assert!(
                took <= Duration::from_millis(STORE_TIMEOUT_MS + 300),
                "503 within the store timeout, took {took:?}"
            );
        }
    }
    cluster.ensemble.restart(leader).await;
    cluster.ensemble.restart(other).await;
    cluster.ensemble.wait_serving(Duration::from_secs(60)).await;
    // A lock nobody touched during the outage: the one above may still carry a grant whose
    // answer was lost as the quorum went (its lease runs out as usual).
    let back = Instant::now();
    for (i, url) in cluster.urls().iter().enumerate() {
        loop {
            let answer = http
                .post(format!("{url}/v1/locks/after-{i}/acquire"))
                .json(&serde_json::json!({"owner": "a", "lease_ms": 100}))
                .send()
                .await;
            let last = match answer {
                Ok(a) if a.status() == 200 => break,
                Ok(a) => format!("{} {}", a.status(), a.text().await.unwrap_or_default()),
                Err(error) => error.to_string(),
            };
            assert!(
                back.elapsed() < Duration::from_secs(5),
                "serving again within 5 s of the quorum's return; last answer: {last}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    eprintln!(
        "served again {:?} after the quorum returned",
        back.elapsed()
    );
}

/// An instance killed with -9: its holders' locks survive (renewed through another
/// instance), and its waiters are gone within the session timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_instances_holders_survive_and_its_waiters_go() {
    let _turn = nemesis::busy_turn().await;
    let mut cluster = Cluster::start(2, 0).await;
    let urls = cluster.urls();
    let http = common::http_client();
    let post = |url: String, body: serde_json::Value| {
        let http = http.clone();
        async move {
            let answer = http.post(url).json(&body).send().await;
            match answer {
                Ok(a) => (
                    a.status().as_u16(),
                    a.json::<serde_json::Value>().await.unwrap_or_default(),
                ),
                Err(_) => (0, serde_json::Value::Null),
            }
        }
    };
    let (status, held) = post(
        format!("{}/v1/locks/k/acquire", urls[0]),
        serde_json::json!({"owner": "h", "lease_ms": 30000}),
    )
    .await;
    assert_eq!(status, 200, "{held}\n{}", cluster.ensemble.log_tails(40));
    let waiter = tokio::spawn(post(
        format!("{}/v1/locks/k/acquire", urls[0]),
        serde_json::json!({"owner": "w", "lease_ms": 1000, "waiting_ms": 60000}),
    ));
    common::eventually(Duration::from_secs(5), "the waiter to queue", || {
        let (http, url) = (http.clone(), format!("{}/v1/locks/k", urls[1]));
        async move {
            let info: serde_json::Value = http.get(url).send().await.unwrap().json().await.unwrap();
            info["waiters"] == 1
        }
    })
    .await;
    cluster.instances[0].kill();
    let killed = Instant::now();
    common::eventually(
        Duration::from_millis(nemesis::SESSION_TIMEOUT_MS + 3000),
        "the killed instance's waiter to go",
        || {
            let (http, url) = (http.clone(), format!("{}/v1/locks/k", urls[1]));
            async move {
                let info: serde_json::Value =
                    http.get(url).send().await.unwrap().json().await.unwrap();
                info["waiters"] == 0
            }
        },
    )
    .await;
    eprintln!("waiter gone {:?} after the kill", killed.elapsed());
    assert!(
        waiter.await.unwrap().0 != 200,
        "the waiter's call died with its instance"
    );
    let (status, body) = post(
        format!("{}/v1/locks/k/renew", urls[1]),
        serde_json::json!({"lease_id": held["lease_id"]}),
    )
    .await;
    assert_eq!(status, 200, "the holder's lease survives: {body}");
    let (status, _) = post(
        format!("{}/v1/locks/k/acquire", urls[1]),
        serde_json::json!({"owner": "x", "lease_ms": 1000}),
    )
    .await;
    assert_eq!(status, 409, "still held");
}

/// The chaos run: the faults of `CHAOS_FAULTS` (names separated by commas; every fault by
/// default), dealt by the seed, for `CHAOS_DURATION_S` seconds. The default, 100 s, deals
/// every fault once on this machine: the test command's run, with the breadth of lost and
/// late answers in the simulation (`tests/simulation`). `./scripts/chaos` sets the variables.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_run() {
    let setting = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let seconds: u64 = setting("CHAOS_DURATION_S").map_or(100, |s| s.parse().expect("seconds"));
    let seed: u64 = setting("CHAOS_SEED").map_or(1, |s| s.parse().expect("a seed"));
    let clients: usize = setting("CHAOS_CLIENTS").map_or(16, |s| s.parse().expect("a count"));
    let faults: Vec<Fault> = setting("CHAOS_FAULTS").map_or(Fault::ALL.to_vec(), |names| {
        names
            .split(',')
            .map(|name| {
                Fault::named(name.trim())
                    .unwrap_or_else(|| panic!("no fault {name:?}; one of {:?}", Fault::ALL))
            })
            .collect()
    });
    let outcome = nemesis::run(&faults, Duration::from_secs(seconds), seed, clients).await;
    println!(
        "chaos run: {seconds} s, seed {seed}, {clients} clients, {} faults injected\n{}",
        outcome.injections.len(),
        outcome.summary()
    );
    for injection in &outcome.injections {
        println!(
            "  {:?} on {} for {:.1} s, recovered {}",
            injection.fault,
            injection.target,
            (injection.healed_ms - injection.start_ms) as f64 / 1000.0,
            injection
                .recovered_ms
                .map_or("never".to_string(), |ms| format!(
                    "{:.1} s later",
                    ms as f64 / 1000.0
                ))
        );
    }
    for violation in outcome.report.violations.iter().take(20) {
        println!("  VIOLATION {violation:?}");
        // The ops on the same lock around the ones involved, to read the violation by.
        let ops = &outcome.history.ops;
        let involved: Vec<_> = violation.ops.iter().filter_map(|&i| ops.get(i)).collect();
        let (Some(from), Some(to)) = (
            involved.iter().map(|op| op.invoke_ms).min(),
            involved.iter().map(|op| op.complete_ms).max(),
        ) else {
            continue;
        };
        for op in ops.iter().filter(|op| {
            op.lock == involved[0].lock
                && op.complete_ms >= from - 1_000
                && op.invoke_ms <= to + 1_000
        }) {
            println!("    {op}");
        }
    }
    assert!(outcome.is_clean(), "{}", outcome.summary());
}
