//! Cleanup webhooks (signing, retries, redirects, target checks), the SRE override's audit
//! trail, and preemption across two service instances sharing one ZooKeeper.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::receiver::{Answer, Receiver, SECRET};
use common::{eventually, unique_root, zk, zk_args, zk_flags, Process, Service};
use lockwarden::config::ServeArgs;
use reqwest::StatusCode;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(15);

fn with_webhooks(args: &mut ServeArgs) {
    args.webhook_secret = Some(SECRET.into());
    args.webhook_allow_private = true;
}

async fn hold(svc: &Service, name: &str, hook: &Receiver, cleanup_ms: u64) -> Value {
    let (status, body) = svc
        .acquire(name, json!({"owner": "holder", "lease_ms": 60_000, "priority": 1, "cleanup_ms": cleanup_ms, "notify_url": hook.url}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_deliveries_are_retried_with_the_same_id_and_a_valid_signature() {
    let svc = Service::zk_with(with_webhooks).await;
    let hook = Receiver::start().await;
    hook.script(&[Answer::Status(500), Answer::Status(503), Answer::Redirect]);
    hold(&svc, "wh", &hook, 10_000).await;
    let svc = Arc::new(svc);
    let waiter = {
        let svc = svc.clone();
        tokio::spawn(async move {
            svc.acquire(
                "wh",
                json!({"owner": "pre", "lease_ms": 1000, "priority": 2, "waiting_ms": 8000}),
            )
            .await
        })
    };
    let tries = hook.wait_for("lock.cleanup_requested", 4, WAIT).await;
    assert!(
        tries.iter().all(|d| d.signature_ok),
        "every attempt is signed"
    );
    assert!(
        tries
            .iter()
            .all(|d| d.id == tries[0].id && d.id.starts_with("msg_")),
        "a retry keeps its webhook-id"
    );
    assert!(
        tries.iter().all(|d| d.path == "/hook"),
        "the redirect was not followed"
    );
    let now = lockwarden::model::UnixMillis::now().0 / 1000;
    assert!(tries.iter().all(|d| (d.timestamp - now).abs() < 60));
    assert!(tries.windows(2).all(|w| w[1].at > w[0].at));
    let (status, _) = svc.send("DELETE", "/v1/locks/wh", None, None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    waiter.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_targets_are_refused_before_any_connection() {
    let svc = Service::zk_with(|args| args.webhook_secret = Some(SECRET.into())).await;
    let hook = Receiver::start().await;
    for url in [
        hook.url.as_str(),
        "http://localhost:9/hook",
        "http://10.0.0.1/hook",
        "http://172.16.5.4/hook",
        "http://192.168.1.1/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]:9/hook",
        "http://[fd00::1]/hook",
        "http://[fe80::1]/hook",
        "http://0.0.0.0/hook",
        "http://198.18.0.1/hook",
        "http://[64:ff9b::a9fe:a9fe]/hook",
        "http://[2002:a9fe:a9fe::1]/hook",
        "http://[2001::1]/hook",
        "http://[fec0::1]/hook",
    ] {
        let (status, body) = svc
            .acquire(
                "ssrf",
                json!({"owner": "o", "lease_ms": 1000, "notify_url": url}),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{url}: {body}");
        assert_eq!(body["error"]["code"], "invalid_request");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("--webhook-allow-private"), "{body}");
        assert!(
            !message.contains("127.0.0.1") || url.contains("127.0.0.1"),
            "a refusal never shows the address a name resolved to: {body}"
        );
    }
    assert!(hook.deliveries().is_empty());
    let unsigned = Service::zk().await;
    let (status, body) = unsigned
        .acquire(
            "x",
            json!({"owner": "o", "lease_ms": 1000, "notify_url": "http://example.com/h"}),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "without a webhook secret nothing can be signed: {body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_target_is_checked_again_at_delivery() {
    let root = unique_root();
    let mut lenient = zk_args(zk::shared(), &root);
    with_webhooks(&mut lenient);
    let mut strict = zk_args(zk::shared(), &root);
    strict.webhook_secret = Some(SECRET.into());
    let a = Service::start(lenient).await;
    let b = Service::start(strict).await;
    let hook = Receiver::start().await;
    hold(&a, "recheck", &hook, 10_000).await;
    let (status, body) = b
        .acquire(
            "recheck",
            json!({"owner": "pre", "lease_ms": 1000, "priority": 2, "waiting_ms": 300}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    eventually(WAIT, "B to refuse the loopback target", || async {
        let metrics = b.metrics().await;
        metrics.contains("lockwarden_webhooks_total{result=\"refused_target\"} 2")
    })
    .await;
    assert!(
        hook.deliveries().is_empty(),
        "B never connected to the loopback receiver"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_receiver_does_not_hold_up_the_caller() {
    let svc = Service::zk_with(with_webhooks).await;
    let hook = Receiver::start().await;
    hook.script(&[Answer::Delay(Duration::from_secs(20))]);
    hold(&svc, "slow", &hook, 30_000).await;
    let started = std::time::Instant::now();
    let (status, body) = svc
        .acquire(
            "slow",
            json!({"owner": "pre", "lease_ms": 1000, "priority": 2, "waiting_ms": 400}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "cleanup_timeout");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preempting_through_one_instance_a_lock_held_through_another_sends_one_webhook() {
    let root = unique_root();
    let mut args = zk_args(zk::shared(), &root);
    with_webhooks(&mut args);
    let a = Arc::new(Service::start(args.clone()).await);
    let b = Service::start(args).await;
    let hook = Receiver::start().await;
    let held = hold(&b, "shared", &hook, 10_000).await;
    let pending = {
        let a = a.clone();
        tokio::spawn(async move {
            a.acquire(
                "shared",
                json!({"owner": "via-a", "lease_ms": 60_000, "priority": 2}),
            )
            .await
        })
    };
    let notices = hook.wait_for("lock.cleanup_requested", 1, WAIT).await;
    assert_eq!(notices[0].body["data"]["requestor"]["owner"], "via-a");
    assert_eq!(
        b.info("shared").await["requestor"]["owner"],
        "via-a",
        "either instance reports the requestor"
    );
    let (status, released) = b
        .release("shared", held["lease_id"].as_str().unwrap())
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(released["lock"]["owner"], "via-a");
    let (status, body) = pending.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(hook.of_kind("lock.cleanup_requested").len(), 1, "sent once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requestor_on_a_dead_instance_is_void_within_the_session_timeout() {
    let root = unique_root();
    let mut args = zk_args(zk::shared(), &root);
    with_webhooks(&mut args);
    let a = Service::start(args).await;
    let hook = Receiver::start().await;
    let held = hold(&a, "orphan", &hook, 60_000).await;
    let mut b = Process::start(&zk_flags(
        zk::shared(),
        &root,
        &["--webhook-secret", SECRET, "--webhook-allow-private"],
    ))
    .await;
    let url = format!("{}/v1/locks/orphan/acquire", b.base);
    let call = tokio::spawn(async move {
        let _ = common::http_client()
            .post(url)
            .json(&json!({"owner": "doomed", "lease_ms": 60_000, "priority": 2}))
            .send()
            .await;
    });
    eventually(WAIT, "B's caller to be the requestor", || async {
        a.info("orphan").await["requestor"]["owner"] == "doomed"
    })
    .await;
    b.kill();
    call.abort();
    eventually(
        Duration::from_secs(20),
        "the dead instance's request to vanish",
        || async {
            let info = a.info("orphan").await;
            info["requestor"].is_null() && info["waiters"] == 0
        },
    )
    .await;
    let (status, released) = a
        .release("orphan", held["lease_id"].as_str().unwrap())
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        released["lock"]["state"], "free",
        "the void request does not receive the lock"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sre_override_preempts_anything_and_is_audited() {
    let root = unique_root();
    let log = tempfile::NamedTempFile::new().unwrap();
    let flags = zk_flags(
        zk::shared(),
        &root,
        &[
            "--admin-token",
            "sre-secret",
            "--webhook-secret",
            SECRET,
            "--webhook-allow-private",
        ],
    );
    let svc = Process::start_logging(&flags, Some(log.path())).await;
    let http = common::http_client();
    let hook = Receiver::start().await;
    let holder = json!({"owner": "batch", "lease_ms": 60_000, "priority": 2147483646, "cleanup_ms": 60_000, "notify_url": hook.url});
    let (status, _) = common::send(
        &http,
        &svc.base,
        "POST",
        "/v1/locks/db%2Fprimary/acquire",
        Some(holder),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let sre = json!({"owner": "sre-oncall", "lease_ms": 60_000, "priority": 2147483647, "waiting_ms": 300,
                     "forceful": true, "message": "INC-1234 failover"});
    let (status, body) = common::send(
        &http,
        &svc.base,
        "POST",
        "/v1/locks/db%2Fprimary/acquire",
        Some(sre.clone()),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, body) = common::send(
        &http,
        &svc.base,
        "POST",
        "/v1/locks/db%2Fprimary/acquire",
        Some(sre),
        Some("sre-secret"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["lock"]["owner"], "sre-oncall");
    hook.wait_for("lock.revoked", 1, WAIT).await;
    eventually(WAIT, "the audit line", || async {
        let text = std::fs::read_to_string(log.path()).unwrap();
        // One JSON record per line (see docs/api.md, "Audit trail").
        text.lines().any(|line| {
            line.contains(r#""action":"sre_override""#)
                && line.contains(r#""owner":"sre-oncall""#)
                && line.contains(r#""lock":"db/primary""#)
                && line.contains(r#""owner":"batch""#)
                && line.contains("INC-1234 failover")
        })
    })
    .await;
}
