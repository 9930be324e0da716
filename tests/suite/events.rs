//! The event streams: a change made through one instance reaches a stream served by
//! another; every event type; resuming with `Last-Event-ID`; prefix streams; heartbeats;
//! `expired` with nobody touching the lock.

use crate::common;

use std::time::Duration;

use common::sse::{Item, SseStream};
use common::{stats, unique_root, zk, zk_args, Service};
use reqwest::StatusCode;
use serde_json::json;

const ADMIN: &str = "admin";
const WAIT: Duration = Duration::from_secs(10);

/// Two instances on one ZooKeeper root.
async fn pair() -> (Service, Service) {
    let root = unique_root();
    let start = || {
        let mut args = zk_args(zk::shared(), &root);
        args.admin_token = Some(ADMIN.into());
        args.event_heartbeat_ms = 300;
        Service::start(args)
    };
    (start().await, start().await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_through_one_instance_reaches_a_stream_on_another() {
    let (a, b) = pair().await;
    let mut stream = SseStream::open(&format!("{}/v1/locks/ev%2Fone/events", b.base), None).await;
    assert_eq!(stream.status, StatusCode::OK);
    assert!(stream.content_type.starts_with("text/event-stream"));
    let snapshot = stream.next_event(WAIT).await;
    assert_eq!(snapshot.event, "snapshot");
    assert_eq!(snapshot.data["lock"]["state"], "free");

    // A holder that asks for a cleanup window when preempted.
    let (status, held) = a
        .acquire(
            "ev/one",
            json!({"owner": "first", "lease_ms": 60000, "cleanup_ms": 20000}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let acquired = stream.next_of("acquired", WAIT).await;
    assert_eq!(acquired.data["lock"]["owner"], "first");
    assert_eq!(
        acquired.data["lock"]["fencing_token"],
        held["fencing_token"]
    );
    let mut last: (i64, i64) = id_of(&acquired.id);

    // Renewals, timed from the call on A to the event on B.
    let lease = held["lease_id"].as_str().unwrap().to_owned();
    let mut delays = Vec::new();
    for _ in 0..20 {
        let sent = std::time::Instant::now();
        let (status, _) = a.renew("ev/one", json!({"lease_id": lease})).await;
        assert_eq!(status, StatusCode::OK);
        let renewed = stream.next_of("renewed", WAIT).await;
        delays.push(renewed.at.duration_since(sent).as_secs_f64() * 1e6);
        let id = id_of(&renewed.id);
        assert!(id > last, "ids grow: {:?} after {:?}", id, last);
        last = id;
    }
    let (p50, p99) = stats(&mut delays);
    println!("renew on A → event on B: p50 {p50:.0} µs, p99 {p99:.0} µs (20 renewals)");

    // A preemptor with a higher priority: queued, and the holder is asked to clean up.
    let preemptor = {
        let (http, url) = (
            a.http.clone(),
            format!("{}/v1/locks/ev%2Fone/acquire", a.base),
        );
        tokio::spawn(async move {
            let body =
                json!({"owner": "second", "lease_ms": 60000, "priority": 5, "waiting_ms": 20000});
            http.post(url)
                .json(&body)
                .send()
                .await
                .unwrap()
                .json::<serde_json::Value>()
                .await
                .unwrap()
        })
    };
    let asked = stream.next_of("cleanup_requested", WAIT).await;
    assert_eq!(asked.data["lock"]["requestor"]["owner"], "second");
    assert!(asked.data["lock"]["requestor"]["cleanup_deadline"].is_string());
    // The holder lets go: the lock passes straight to the preemptor.
    a.release("ev/one", &lease).await;
    let handed = stream.next_of("handed_off", WAIT).await;
    assert_eq!(handed.data["lock"]["owner"], "second");
    let second = preemptor.await.unwrap();
    assert_eq!(second["acquired"], true, "{second}");

    // An admin's force release.
    let (status, _) = a
        .send("DELETE", "/v1/locks/ev%2Fone", None, Some(ADMIN))
        .await;
    assert_eq!(status, StatusCode::OK);
    let forced = stream.next_of("force_released", WAIT).await;
    assert_eq!(forced.data["lock"]["state"], "free");
}

fn id_of(id: &str) -> (i64, i64) {
    let (zxid, seq) = id.split_once('.').unwrap_or((id, "0"));
    (zxid.parse().unwrap(), seq.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_that_runs_out_says_expired_and_a_preemptor_that_takes_says_revoked() {
    let (a, b) = pair().await;
    let mut stream = SseStream::open(&format!("{}/v1/locks/ev%2Fexp/events", b.base), None).await;
    stream.next_of("snapshot", WAIT).await;
    a.must_acquire("ev/exp", "short", 600).await;
    stream.next_of("acquired", WAIT).await;
    let expired = stream.next_of("expired", WAIT).await;
    assert_eq!(expired.data["lock"]["state"], "expired");

    // A forceful preemptor takes the lock from a holder that does not let go.
    a.acquire(
        "ev/exp",
        json!({"owner": "stubborn", "lease_ms": 60000, "cleanup_ms": 200}),
    )
    .await;
    stream.next_of("acquired", WAIT).await;
    let (status, taken) = a
        .acquire(
            "ev/exp",
            json!({"owner": "boss", "lease_ms": 60000, "priority": 9,
                                  "waiting_ms": 5000, "forceful": true}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{taken}");
    let revoked = stream.next_of("revoked", WAIT).await;
    assert_eq!(revoked.data["lock"]["owner"], "boss");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_resumes_after_the_last_event_it_saw() {
    let (a, b) = pair().await;
    let url = format!("{}/v1/locks/ev%2Fresume/events", b.base);
    let mut first = SseStream::open(&url, None).await;
    first.next_of("snapshot", WAIT).await;
    let held = a.must_acquire("ev/resume", "x", 60_000).await;
    let seen = first.next_of("acquired", WAIT).await;
    drop(first);
    // Changes while the client is away.
    a.release("ev/resume", held["lease_id"].as_str().unwrap())
        .await;
    a.must_acquire("ev/resume", "y", 60_000).await;

    let mut resumed = SseStream::open(&url, Some(&seen.id)).await;
    let missed = resumed.next_event(WAIT).await;
    assert_eq!(
        missed.event, "released",
        "no snapshot when resuming: {missed:?}"
    );
    let next = resumed.next_event(WAIT).await;
    assert_eq!(
        (next.event.as_str(), &next.data["lock"]["owner"]),
        ("acquired", &json!("y"))
    );

    // An id the service cannot resume from gets a fresh snapshot.
    let mut fresh = SseStream::open(&url, Some("1")).await;
    let snapshot = fresh.next_event(WAIT).await;
    assert_eq!(snapshot.event, "snapshot");
    assert_eq!(snapshot.data["lock"]["owner"], "y");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prefix_stream_sees_its_locks_only_and_heartbeats() {
    let (a, b) = pair().await;
    a.must_acquire("team/held", "x", 60_000).await;
    let mut stream = SseStream::open(&format!("{}/v1/events?prefix=team/", b.base), None).await;
    let snapshot = stream.next_event(WAIT).await;
    assert_eq!(snapshot.event, "snapshot");
    let names: Vec<&str> = snapshot.data["locks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["team/held"]);
    a.must_acquire("other/lock", "x", 60_000).await;
    a.must_acquire("team/new", "x", 60_000).await;
    let event = stream.next_event(WAIT).await;
    assert_eq!(
        (event.event.as_str(), &event.data["lock"]["name"]),
        ("acquired", &json!("team/new"))
    );
    // Heartbeats come every --event-heartbeat-ms (300 ms here) while nothing happens.
    match stream.next_item(WAIT).await {
        Some(Item::Comment(text)) => assert_eq!(text, "heartbeat"),
        other => panic!("expected a heartbeat, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_work_on_the_embedded_store_and_need_the_api_token() {
    let svc = Service::memory().await;
    let mut stream = SseStream::open(&format!("{}/v1/locks/mem/events", svc.base), None).await;
    stream.next_of("snapshot", WAIT).await;
    let held = svc.must_acquire("mem", "x", 60_000).await;
    stream.next_of("acquired", WAIT).await;
    svc.release("mem", held["lease_id"].as_str().unwrap()).await;
    stream.next_of("released", WAIT).await;

    let locked = Service::zk_with(|args| args.api_tokens = vec!["t".into()]).await;
    let refused = SseStream::open(&format!("{}/v1/events", locked.base), None).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
}
