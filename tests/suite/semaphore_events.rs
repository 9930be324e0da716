//! A semaphore's event stream, on both stores: it starts with a snapshot of the semaphore,
//! then tells each permit's grant, renewal, release, hand-off and expiry, each naming the
//! permit by its `fencing_token`; a lease that runs out is told with nobody calling, and a
//! reconnect with `Last-Event-ID` resumes.

use crate::common;

use std::time::Duration;

use common::sse::{SseEvent, SseStream};
use common::Service;
use reqwest::StatusCode;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(10);

async fn open(svc: &Service, name: &str, last: Option<&str>) -> SseStream {
    let url = format!("{}/v1/semaphores/{name}/events", svc.base);
    let stream = SseStream::open(&url, last).await;
    assert_eq!(stream.status, StatusCode::OK);
    stream
}

async fn take(svc: &Service, name: &str, owner: &str, lease_ms: u64) -> Value {
    let body = json!({"owner": owner, "limit": 2, "lease_ms": lease_ms});
    let (status, got) = svc
        .post(&format!("/v1/semaphores/{name}/acquire"), body)
        .await;
    assert_eq!(status, StatusCode::OK, "{got}");
    got
}

async fn act(svc: &Service, name: &str, action: &str, lease: &Value) -> Value {
    let body = json!({"lease_id": lease["lease_id"]});
    let (status, got) = svc
        .post(&format!("/v1/semaphores/{name}/{action}"), body)
        .await;
    assert_eq!(status, StatusCode::OK, "{got}");
    got
}

/// The next event that is not a queue change.
async fn next(stream: &mut SseStream) -> SseEvent {
    loop {
        let event = stream.next_event(WAIT).await;
        if event.event != "queue" {
            return event;
        }
    }
}

/// Asserts that the next event is `kind`, about the permit with `token`.
async fn told(stream: &mut SseStream, kind: &str, token: &Value) -> SseEvent {
    let event = next(stream).await;
    assert_eq!(event.event, kind, "{}", event.data);
    assert_eq!(event.data["type"], kind);
    assert_eq!(&event.data["fencing_token"], token, "{}", event.data);
    assert!(event.data["semaphore"].is_object(), "{}", event.data);
    event
}

async fn each_permit_is_told_by_its_token(svc: Service) {
    let mut stream = open(&svc, "s", None).await;
    let snapshot = stream.next_event(WAIT).await;
    assert_eq!(snapshot.event, "snapshot");
    assert_eq!(snapshot.data["semaphore"]["held"], 0);
    assert_eq!(snapshot.data["semaphore"]["limit"], Value::Null);

    let a = take(&svc, "s", "a", 60_000).await;
    let b = take(&svc, "s", "b", 60_000).await;
    told(&mut stream, "acquired", &a["fencing_token"]).await;
    let second = told(&mut stream, "acquired", &b["fencing_token"]).await;
    assert_eq!(second.data["semaphore"]["held"], 2);
    assert_eq!(second.data["semaphore"]["limit"], 2);

    let renew = json!({"lease_id": a["lease_id"], "lease_ms": 90_000});
    let (status, _) = svc.post("/v1/semaphores/s/renew", renew).await;
    assert_eq!(status, StatusCode::OK);
    told(&mut stream, "renewed", &a["fencing_token"]).await;

    // A waiter gets the permit that a release frees, in the same write: a hand-off.
    let waiting = {
        let request = svc
            .http
            .post(format!("{}/v1/semaphores/s/acquire", svc.base))
            .json(&json!({"owner": "c", "limit": 2, "lease_ms": 60_000, "waiting_ms": 20_000}));
        tokio::spawn(async move { request.send().await.unwrap().json::<Value>().await.unwrap() })
    };
    common::eventually(WAIT, "a caller waits", || async {
        svc.get("/v1/semaphores/s").await.1["waiters"] == 1
    })
    .await;
    act(&svc, "s", "release", &a).await;
    let c = waiting.await.unwrap();
    assert_eq!(c["acquired"], true, "{c}");
    let handed = told(&mut stream, "handed_off", &c["fencing_token"]).await;
    assert_eq!(handed.data["semaphore"]["held"], 2);

    act(&svc, "s", "release", &b).await;
    let released = told(&mut stream, "released", &b["fencing_token"]).await;
    assert_eq!(released.data["semaphore"]["held"], 1);
}

async fn a_permit_that_runs_out_is_told_with_nobody_calling(svc: Service) {
    let mut stream = open(&svc, "x", None).await;
    stream.next_of("snapshot", WAIT).await;
    let long = take(&svc, "x", "long", 60_000).await;
    let short = take(&svc, "x", "short", 300).await;
    told(&mut stream, "acquired", &long["fencing_token"]).await;
    told(&mut stream, "acquired", &short["fencing_token"]).await;
    let expired = told(&mut stream, "expired", &short["fencing_token"]).await;
    let holders = expired.data["semaphore"]["holders"].as_array().unwrap();
    let short_one = holders.iter().find(|h| h["owner"] == "short").unwrap();
    assert_eq!(short_one["remaining_ms"], 0, "{}", expired.data);
}

async fn a_reconnect_resumes_after_its_last_event(svc: Service) {
    let mut stream = open(&svc, "r", None).await;
    stream.next_of("snapshot", WAIT).await;
    let a = take(&svc, "r", "a", 60_000).await;
    let seen = told(&mut stream, "acquired", &a["fencing_token"]).await;
    drop(stream);
    let b = take(&svc, "r", "b", 60_000).await;
    let mut resumed = open(&svc, "r", Some(&seen.id)).await;
    told(&mut resumed, "acquired", &b["fencing_token"]).await;
}

on_both_stores!(
    each_permit_is_told_by_its_token,
    a_permit_that_runs_out_is_told_with_nobody_calling,
    a_reconnect_resumes_after_its_last_event,
);
