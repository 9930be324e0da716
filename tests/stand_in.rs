//! The stand-in session (src/store/zk/session.rs) on a 3-node ensemble: while an instance's
//! ZooKeeper session is disconnected, a fresh session may serve its record writes, but the
//! waiter nodes stay with the primary session. Through a quorum loss, what must hold always:
//! the holder's renewals work again once the quorum is back, the waiter queued before the
//! outage keeps its place and gets the lock on release, and nobody else is granted it.
//! Which session served the first renewal after the outage depends on timing (the primary's
//! reconnection rounds against the election), so it is printed, not asserted.

mod common;

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use common::ensemble::{Ensemble, EnsembleOptions};
use common::instance::{Instance, InstanceOptions};
use common::nemesis::instance_flags;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_a_quorum_loss_renewals_resume_and_the_waiter_keeps_its_place() {
    let ensemble = Ensemble::start(EnsembleOptions::default()).await;
    let log = std::env::temp_dir().join(format!("stand-in-{}.log", uuid::Uuid::new_v4()));
    let mut flags = instance_flags(&ensemble.connect_string(), &unique_root());
    // Longer than the outage below, so the primary session survives it (ZooKeeper caps it
    // at 20 ticks: 10 s on this ensemble).
    let at = flags
        .iter()
        .position(|f| f == "--zk-session-timeout-ms")
        .unwrap();
    flags[at + 1] = "10000".into();
    let at = flags.iter().position(|f| f == "--gc-delay-ms").unwrap();
    flags[at + 1] = "20000".into();
    let instance = Instance::start(InstanceOptions::new(&flags).log(&log)).await;
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
    let waiter = tokio::spawn({
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
        let info = match http
            .get(format!("{}/v1/locks/kept", instance.base()))
            .send()
            .await
        {
            Ok(answer) => answer.json::<Value>().await.unwrap_or(Value::Null),
            Err(_) => Value::Null,
        };
        info["waiters"] == 1
    })
    .await;

    let leader = ensemble.leader().await.expect("a leader");
    let follower = (1..=3).find(|id| *id != leader).unwrap();
    ensemble.kill(leader);
    ensemble.kill(follower);
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

    assert!(!waiter.is_finished(), "the waiter still waits");
    let (status, released) = post(&http, url("release"), renew.clone()).await;
    assert_eq!(status, 200, "{released}");
    let (status, granted) = tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .expect("the waiter is answered")
        .unwrap();
    assert_eq!(status, 200, "the waiter kept its place: {granted}");
    assert_eq!(granted["lock"]["owner"], "waiter");
    assert!(granted["fencing_token"].as_u64().unwrap() > token);

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
