//! Waiting and renewing through a quorum loss of a 3-node ensemble.
//!
//! The stand-in session (src/store/zk/session.rs): while an instance's ZooKeeper session is
//! disconnected, a fresh session may serve its record writes, but the waiter nodes stay with
//! the primary session. What must hold always: the holder's renewals work again once the
//! quorum is back, the waiter queued before the outage keeps its place and gets the lock on
//! release, and nobody else is granted it. Which session served the first renewal after the
//! outage depends on timing (the primary's reconnection rounds against the election), so it
//! is printed, not asserted.
//!
//! A waiter whose round falls into the outage (`engine::gives_up_in_trouble`) keeps
//! trying while its queue entry may outlive it (the session timeout), so it keeps its place;
//! through a longer outage it answers 503 instead of waiting on, and leaves nothing behind.

use crate::common;

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use common::ensemble::{Ensemble, EnsembleOptions};
use common::instance::{Instance, InstanceOptions};
use common::nemesis::{instance_flags, STORE_TIMEOUT_MS};
use common::unique_root;

async fn post(http: &reqwest::Client, url: String, body: Value) -> (u16, Value) {
    match http.post(url).json(&body).send().await {
        Ok(answer) => {
            let status = answer.status().as_u16();
            (status, answer.json().await.unwrap_or(Value::Null))
        }
        Err(_) => (0, Value::Null),
    }
}

/// A session timeout longer than the outages below, so that the primary session survives them
/// (ZooKeeper caps it at 20 ticks: 10 s on this ensemble), and a collector delay that allows it.
const LONG_SESSION: &[(&str, &str)] = &[
    ("--zk-session-timeout-ms", "10000"),
    ("--gc-delay-ms", "20000"),
];

/// Takeover of an expired lease without the chaos tests' wide clock allowance.
const SMALL_SKEW: (&str, &str) = ("--max-clock-skew-ms", "100");

/// An ensemble and one instance on it with the nemesis flags but for `overrides`, logging to
/// the returned file.
async fn start(overrides: &[(&str, &str)]) -> (Ensemble, Instance, std::path::PathBuf) {
    let ensemble = Ensemble::start(EnsembleOptions::default()).await;
    let log = std::env::temp_dir().join(format!("stand-in-{}.log", uuid::Uuid::new_v4()));
    let mut flags = instance_flags(&ensemble.connect_string(), &unique_root());
    for (flag, value) in overrides {
        let at = flags.iter().position(|f| f == flag).unwrap();
        flags[at + 1] = (*value).into();
    }
    let instance = Instance::start(InstanceOptions::new(&flags).log(&log)).await;
    (ensemble, instance, log)
}

/// The number of waiters `GET /v1/locks/kept` shows (`Null` while the store is away).
async fn waiters(http: &reqwest::Client, instance: &Instance) -> Value {
    match http
        .get(format!("{}/v1/locks/kept", instance.base()))
        .send()
        .await
    {
        Ok(answer) => answer.json::<Value>().await.unwrap_or(Value::Null)["waiters"].clone(),
        Err(_) => Value::Null,
    }
}

/// Kills the leader and one follower: the ensemble has no quorum until one comes back.
/// Returns the follower.
async fn lose_the_quorum(ensemble: &Ensemble) -> usize {
    let leader = ensemble.leader().await.expect("a leader");
    let follower = (1..=3).find(|id| *id != leader).unwrap();
    ensemble.kill(leader);
    ensemble.kill(follower);
    follower
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_a_quorum_loss_renewals_resume_and_the_waiter_keeps_its_place() {
    let (ensemble, instance, log) = start(LONG_SESSION).await;
    let http = common::http_client();
    let url = |action: &str| format!("{}/v1/locks/kept/{action}", instance.base());
    let (status, held) = post(
        &http,
        url("acquire"),
        json!({"owner": "holder", "lease_ms": 30_000}),
    )
    .await;
    assert_eq!(status, 200, "{held}");
    let lease = held["lease_id"].as_str().unwrap().to_owned();
    let token = held["fencing_token"].as_u64().unwrap();
    let mut waiter = tokio::spawn({
        let (http, url) = (http.clone(), url("acquire"));
        async move {
            post(
                &http,
                url,
                json!({"owner": "waiter", "lease_ms": 5000, "waiting_ms": 60_000}),
            )
            .await
        }
    });
    common::eventually(Duration::from_secs(10), "the waiter is queued", || async {
        waiters(&http, &instance).await == 1
    })
    .await;

    let follower = lose_the_quorum(&ensemble).await;
    let renew = json!({"lease_id": lease});
    common::eventually(
        Duration::from_secs(10),
        "renewals fail without a quorum",
        || async { post(&http, url("renew"), renew.clone()).await.0 != 200 },
    )
    .await;
    ensemble.restart(follower).await;
    let back = Instant::now();
    loop {
        let (status, answer) = post(&http, url("renew"), renew.clone()).await;
        if status == 200 {
            assert_eq!(answer["lock"]["fencing_token"].as_u64(), Some(token));
            break;
        }
        assert!(
            back.elapsed() < Duration::from_secs(20),
            "renewals work again after the quorum's return; last: {status} {answer}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let renewed_after = back.elapsed();

    still_waiting(&mut waiter, &log).await;
    let (status, released) = post(&http, url("release"), renew.clone()).await;
    assert_eq!(status, 200, "{released}");
    the_waiter_is_granted(waiter, token).await;

    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let served = text.contains("a stand-in session serves meanwhile");
    if served {
        // Once the primary is back, the stand-in is withdrawn and its session closed.
        common::eventually(
            Duration::from_secs(20),
            "the stand-in is closed",
            || async {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                text.contains("the stand-in ZooKeeper session is closed")
            },
        )
        .await;
    }
    // Once the primary is back, /metrics says no stand-in serves.
    common::eventually(
        Duration::from_secs(20),
        "the stand-in gauge at 0",
        || async {
            let text = match http
                .get(format!("{}/metrics", instance.base()))
                .send()
                .await
            {
                Ok(answer) => answer.text().await.unwrap_or_default(),
                Err(_) => String::new(),
            };
            text.lines().any(|l| l == "lockwarden_zookeeper_stand_in 0")
        },
    )
    .await;
    println!(
        "renewed {renewed_after:?} after the quorum returned; a stand-in session served: {served}"
    );
    let _ = std::fs::remove_file(&log);
}

type WaitingCall = tokio::task::JoinHandle<(u16, Value)>;

/// Fails, with the answer and the instance's log, if the waiting call has been answered.
async fn still_waiting(waiter: &mut WaitingCall, log: &std::path::Path) {
    if waiter.is_finished() {
        let (status, answer) = waiter.await.unwrap();
        let text = std::fs::read_to_string(log).unwrap_or_default();
        panic!("the waiter was answered, and lost its place: {status} {answer}\n{text}");
    }
}

/// The waiting call's answer, which must come within 30 s (half its wait).
async fn answer_of(waiter: WaitingCall, what: &str) -> (u16, Value) {
    tokio::time::timeout(Duration::from_secs(30), waiter)
        .await
        .expect(what)
        .unwrap()
}

/// The waiting call ends with the lock, and a fencing token above the holder's `token`.
async fn the_waiter_is_granted(waiter: WaitingCall, token: u64) {
    let (status, granted) = answer_of(waiter, "the waiter is answered").await;
    assert_eq!(status, 200, "the waiter kept its place: {granted}");
    assert_eq!(granted["lock"]["owner"], "waiter");
    assert!(granted["fencing_token"].as_u64().unwrap() > token);
}

/// Acquires `kept` for `holder` with `lease_ms` and queues a waiter behind it (waiting up to a
/// minute). Returns the holder's fencing token and the waiter's call.
async fn held_with_a_waiter(
    http: &reqwest::Client,
    instance: &Instance,
    lease_ms: u64,
) -> (u64, WaitingCall) {
    let url = format!("{}/v1/locks/kept/acquire", instance.base());
    let (status, held) = post(
        http,
        url.clone(),
        json!({"owner": "holder", "lease_ms": lease_ms}),
    )
    .await;
    assert_eq!(status, 200, "{held}");
    let waiter = tokio::spawn({
        let http = http.clone();
        async move {
            let body = json!({"owner": "waiter", "lease_ms": 5000, "waiting_ms": 60_000});
            post(&http, url, body).await
        }
    });
    common::eventually(Duration::from_secs(10), "the waiter is queued", || async {
        waiters(http, instance).await == 1
    })
    .await;
    (held["fencing_token"].as_u64().unwrap(), waiter)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_round_falls_into_a_quorum_loss_keeps_its_place() {
    let mut overrides = LONG_SESSION.to_vec();
    overrides.push(SMALL_SKEW);
    let (ensemble, instance, log) = start(&overrides).await;
    let http = common::http_client();
    let acquired = Instant::now();
    let (token, mut waiter) = held_with_a_waiter(&http, &instance, 1000).await;
    let follower = lose_the_quorum(&ensemble).await;
    // The holder's lease runs out during the outage, and the waiter's timer wakes it then
    // (1000 ms + the skew allowance after the grant): its rounds fail from then on. The
    // quorum stays lost until they have failed for two store timeouts.
    let failing_since = acquired + Duration::from_millis(1100);
    tokio::time::sleep_until((failing_since + Duration::from_millis(2 * STORE_TIMEOUT_MS)).into())
        .await;
    still_waiting(&mut waiter, &log).await;
    ensemble.restart(follower).await;
    the_waiter_is_granted(waiter, token).await;
    let _ = std::fs::remove_file(&log);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_gives_up_once_its_entry_would_have_gone_and_leaves_nothing_behind() {
    // The nemesis session timeout (3 s): the waiter stops trying about 3 s after its round
    // fell into the outage, long before its minute of waiting.
    let (ensemble, instance, log) = start(&[SMALL_SKEW]).await;
    let http = common::http_client();
    let (_, waiter) = held_with_a_waiter(&http, &instance, 1000).await;
    let follower = lose_the_quorum(&ensemble).await;
    let (status, answer) =
        answer_of(waiter, "the waiter is answered while the quorum is lost").await;
    assert_eq!(status, 503, "{answer}");
    assert_eq!(answer["error"]["code"], "store_unavailable");
    ensemble.restart(follower).await;
    common::eventually(
        Duration::from_secs(30),
        "the waiter's entry is gone",
        || async { waiters(&http, &instance).await == 0 },
    )
    .await;
    let _ = std::fs::remove_file(&log);
}
