//! Limits with clear answers: waiters per lock and waiting calls per instance
//! (`429 too_many_waiters` with `Retry-After`), concurrent connections, and slow clients
//! (headers and body) — all on ZooKeeper.

use crate::common;

use std::time::{Duration, Instant};

use common::{encode, eventually, http_client, Service};
use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const ADMIN: &str = "admin-secret";

/// Starts a blocking acquire in the background; its answer comes out of the handle.
fn wait_for(
    svc: &Service,
    name: &str,
    body: Value,
) -> tokio::task::JoinHandle<(StatusCode, Value)> {
    let http = svc.http.clone();
    let url = format!("{}/v1/locks/{}/acquire", svc.base, encode(name));
    tokio::spawn(async move {
        let answer = http
            .post(url)
            .bearer_auth(ADMIN)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = answer.status();
        (status, answer.json().await.unwrap_or(Value::Null))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_turns_callers_away_with_429_and_leaves_no_node() {
    let svc = Service::zk_with(|args| {
        args.max_waiters_per_lock = 3;
        args.admin_token = Some(ADMIN.into());
    })
    .await;
    let held = svc.must_acquire("full", "holder", 60_000).await;
    let queued: Vec<_> = (0..3)
        .map(|i| {
            wait_for(
                &svc,
                "full",
                json!({"owner": format!("w{i}"), "lease_ms": 60000, "waiting_ms": 30000}),
            )
        })
        .collect();
    eventually(Duration::from_secs(10), "three waiters", || async {
        svc.waiters("full").await == 3
    })
    .await;

    let response = svc
        .http
        .post(format!("{}/v1/locks/full/acquire", svc.base))
        .json(&json!({"owner": "late", "lease_ms": 60000, "waiting_ms": 30000}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(response.headers()["retry-after"], "1");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "too_many_waiters", "{body}");
    assert_eq!(
        svc.waiters("full").await,
        3,
        "the refused caller left the queue"
    );
    let metrics = svc.metrics().await;
    assert!(
        metrics.contains(r#"lockwarden_waits_refused_total{limit="per_lock",resource="lock"} 1"#),
        "{metrics}"
    );

    // A caller that would not wait is answered as before; an SRE override always gets in.
    let (status, _) = svc
        .acquire("full", json!({"owner": "x", "lease_ms": 1000}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    let sre = wait_for(
        &svc,
        "full",
        json!({"owner": "sre", "lease_ms": 60000, "waiting_ms": 30000,
                                            "priority": 2147483647, "message": "INC-1"}),
    );
    let (status, taken) = sre.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{taken}");

    // Everyone still queued is served in turn (in the order they joined, which the
    // concurrent starts leave open).
    let mut lease = taken["lease_id"].as_str().unwrap().to_owned();
    assert_eq!(
        svc.release("full", held["lease_id"].as_str().unwrap())
            .await
            .0,
        StatusCode::CONFLICT
    );
    let mut queued = queued;
    while !queued.is_empty() {
        svc.release("full", &lease).await;
        let (answer, _, rest) = futures::future::select_all(queued).await;
        let (status, granted) = answer.unwrap();
        assert_eq!(status, StatusCode::OK, "{granted}");
        lease = granted["lease_id"].as_str().unwrap().to_owned();
        queued = rest;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_takes_only_so_many_waiting_calls() {
    let svc = Service::zk_with(|args| {
        args.max_waiting_calls = 2;
        args.admin_token = Some(ADMIN.into());
    })
    .await;
    let mut waiting = Vec::new();
    for name in ["busy/a", "busy/b"] {
        svc.must_acquire(name, "holder", 60_000).await;
        waiting.push(wait_for(
            &svc,
            name,
            json!({"owner": "w", "lease_ms": 1000, "waiting_ms": 30000}),
        ));
    }
    for name in ["busy/a", "busy/b"] {
        eventually(Duration::from_secs(10), "a waiter", || async {
            svc.waiters(name).await == 1
        })
        .await;
    }
    svc.must_acquire("busy/c", "holder", 60_000).await;
    let (status, body) = svc
        .acquire(
            "busy/c",
            json!({"owner": "w", "lease_ms": 1000, "waiting_ms": 30000}),
        )
        .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(body["error"]["code"], "too_many_waiters");
    assert_eq!(svc.waiters("busy/c").await, 0);
    for waiter in waiting {
        waiter.abort();
    }
}

/// Reads until the server closes the connection; what it sent on the way.
async fn read_until_closed(stream: &mut TcpStream, within: Duration) -> String {
    let mut seen = Vec::new();
    let mut buffer = [0u8; 1024];
    let read_all = async {
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.extend_from_slice(&buffer[..n]),
            }
        }
    };
    tokio::time::timeout(within, read_all)
        .await
        .expect("the server closes a connection that stalls");
    String::from_utf8_lossy(&seen).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_headers_and_slow_bodies_are_cut_off() {
    let svc = Service::zk_with(|args| args.request_read_timeout_ms = 400).await;
    let address = svc.base.trim_start_matches("http://").to_owned();

    let mut headers_only = TcpStream::connect(&address).await.unwrap();
    headers_only
        .write_all(b"POST /v1/locks/slow/acquire HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let started = Instant::now();
    let seen = read_until_closed(&mut headers_only, Duration::from_secs(10)).await;
    assert!(!seen.contains("200 OK"), "{seen}");
    assert!(started.elapsed() >= Duration::from_millis(300));

    let mut slow_body = TcpStream::connect(&address).await.unwrap();
    slow_body
        .write_all(
            b"POST /v1/locks/slow/acquire HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 60\r\n\r\n{\"owner\":",
        )
        .await
        .unwrap();
    let seen = read_until_closed(&mut slow_body, Duration::from_secs(10)).await;
    assert!(seen.starts_with("HTTP/1.1 408"), "{seen}");
    assert!(seen.contains("request_timeout"), "{seen}");

    // Nothing was taken, and the service serves everyone else as before.
    assert_eq!(svc.info("slow").await["state"], "free");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_limit_wait_for_a_free_one() {
    let svc = Service::zk_with(|args| args.max_connections = 2).await;
    let address = svc.base.trim_start_matches("http://").to_owned();
    let first = TcpStream::connect(&address).await.unwrap();
    let second = TcpStream::connect(&address).await.unwrap();
    // Both slots are taken by connections that have sent nothing (yet).
    let third = http_client()
        .get(format!("{}/healthz", svc.base))
        .timeout(Duration::from_millis(700))
        .send()
        .await;
    assert!(
        third.is_err(),
        "a third connection is not served while two are open"
    );
    drop(first);
    drop(second);
    eventually(Duration::from_secs(10), "served again", || async {
        let answer = http_client()
            .get(format!("{}/healthz", svc.base))
            .send()
            .await;
        answer.is_ok_and(|a| a.status() == StatusCode::OK)
    })
    .await;
}
