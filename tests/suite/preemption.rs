//! Priority preemption with cleanup webhooks: Apache Helix's six priority tests
//! (TestZKHelixNonblockingLockWithPriority) with short timings, then the scenarios Helix
//! never tested. Everything runs against a real ZooKeeper and a real webhook receiver.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::receiver::{Receiver, SECRET};
use common::{eventually, Service};
use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

const LOCK: &str = "TestZKHelixNonblockingLockWithPriority/LOCK/CLUSTER/x";
const WAIT: Duration = Duration::from_secs(15);

async fn service() -> Arc<Service> {
    Arc::new(
        Service::zk_with(|args| {
            args.webhook_secret = Some(SECRET.into());
            args.webhook_allow_private = true;
            args.admin_token = Some("admin".into());
        })
        .await,
    )
}

/// Helix's "original" owner: priority 1, with a cleanup window, notified at `hook`.
async fn original(svc: &Service, hook: &Receiver, cleanup_ms: u64) -> Value {
    let (status, body) = svc
        .acquire(
            LOCK,
            json!({"owner": "original_lock", "lease_ms": 3_600_000, "message": "original lock",
                             "priority": 1, "cleanup_ms": cleanup_ms, "notify_url": hook.url}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

fn spawn_acquire(svc: &Arc<Service>, body: Value) -> JoinHandle<(StatusCode, Value)> {
    let svc = svc.clone();
    tokio::spawn(async move { svc.acquire(LOCK, body).await })
}

async fn requestor_of(svc: &Service) -> Value {
    svc.info(LOCK).await["requestor"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helix_non_lock_owner_unlock_fail() {
    let svc = service().await;
    let hook = Receiver::start().await;
    let held = svc
        .acquire(LOCK, json!({"owner": "user1", "lease_ms": 3_600_000, "cleanup_ms": 2000, "notify_url": hook.url}))
        .await
        .1;
    let (status, _) = svc.release(LOCK, &uuid::Uuid::new_v4().to_string()).await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "a higher priority does not let a non-owner release"
    );
    let high = spawn_acquire(
        &svc,
        json!({"owner": "user2", "lease_ms": 3_600_000, "priority": 5, "waiting_ms": 3000}),
    );
    hook.wait_for("lock.cleanup_requested", 1, WAIT).await;
    // The owner's cleanup is instant: it releases on notification, and the lock passes over.
    let (status, released) = svc.release(LOCK, held["lease_id"].as_str().unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        released["lock"]["owner"], "user2",
        "the release hands over in the same write"
    );
    let (status, body) = high.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, info) = svc
        .get(&format!("/v1/locks/{}?owner=user2", common::encode(LOCK)))
        .await;
    assert_eq!(info["is_owner"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helix_lower_priority_request_rejected() {
    let svc = service().await;
    let hook = Receiver::start().await;
    original(&svc, &hook, 5000).await;
    let started = Instant::now();
    let (status, body) = svc
        .acquire(
            LOCK,
            json!({"owner": "low_lock", "lease_ms": 3_600_000, "priority": 0}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body["error"]["code"], "lock_held");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "refused at once"
    );
    assert!(hook.deliveries().is_empty(), "the owner was not notified");
    assert_eq!(svc.info(LOCK).await["owner"], "original_lock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helix_higher_priority_request_acquired() {
    let svc = service().await;
    let hook = Receiver::start().await;
    let held = original(&svc, &hook, 2500).await;
    let high = spawn_acquire(
        &svc,
        json!({"owner": "high_lock", "lease_ms": 3_600_000, "priority": 2, "waiting_ms": 3000}),
    );
    let notice = hook.wait_for("lock.cleanup_requested", 1, WAIT).await;
    assert!(notice[0].signature_ok);
    let data = &notice[0].body["data"];
    assert_eq!(data["owner"], "original_lock");
    assert_eq!(data["requestor"]["owner"], "high_lock");
    assert!(data["cleanup_remaining_ms"].as_u64().unwrap() <= 2500);
    assert_eq!(data["fencing_token"], held["fencing_token"]);
    // The owner takes a while to clean up (Helix's listener sleeps), then releases.
    tokio::time::sleep(Duration::from_millis(300)).await;
    svc.release(LOCK, held["lease_id"].as_str().unwrap()).await;
    let (status, body) = high.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["lock"]["owner"], "high_lock");
    assert!(body["fencing_token"].as_u64() > held["fencing_token"].as_u64());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helix_higher_priority_request_failed_as_cleanup_has_not_done() {
    let svc = service().await;
    let hook = Receiver::start().await;
    let held = original(&svc, &hook, 25_000).await;
    let started = Instant::now();
    let (status, body) = svc
        .acquire(LOCK, json!({"owner": "high_lock_short", "lease_ms": 3_600_000, "priority": 2, "waiting_ms": 500}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "cleanup_timeout");
    assert_eq!(body["acquired"], false);
    assert!(started.elapsed() >= Duration::from_millis(500));
    assert_eq!(
        body["lock"]["owner"], "original_lock",
        "the holder keeps the lock"
    );
    assert_eq!(
        body["lock"]["requestor"],
        Value::Null,
        "the requestor is cleared"
    );
    hook.wait_for("lock.cleanup_requested", 1, WAIT).await;
    hook.wait_for("lock.cleanup_cancelled", 1, WAIT).await;
    let (status, _) = svc.release(LOCK, held["lease_id"].as_str().unwrap()).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the original can still unlock normally"
    );
    assert_eq!(svc.info(LOCK).await["state"], "free");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helix_higher_priority_request_forceful_acquired() {
    let svc = service().await;
    let hook = Receiver::start().await;
    let held = original(&svc, &hook, 25_000).await;
    let (status, body) = svc
        .acquire(LOCK, json!({"owner": "high_lock_force", "lease_ms": 3_600_000, "priority": 2, "waiting_ms": 500, "forceful": true}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["lock"]["owner"], "high_lock_force");
    hook.wait_for("lock.cleanup_requested", 1, WAIT).await;
    let revoked = hook.wait_for("lock.revoked", 1, WAIT).await;
    assert_eq!(revoked[0].body["data"]["owner"], "original_lock");
    assert!(revoked[0].signature_ok);
    let (status, _) = svc.renew(LOCK, json!({"lease_id": held["lease_id"]})).await;
    assert_eq!(status, StatusCode::CONFLICT, "the revoked lease is gone");
    assert!(
        !svc.validate(LOCK, held["fencing_token"].as_u64().unwrap())
            .await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helix_higher_priority_request_preempted_by_another() {
    let svc = service().await;
    let hook = Receiver::start().await;
    let held = original(&svc, &hook, 3000).await;
    let high = spawn_acquire(
        &svc,
        json!({"owner": "high_lock", "lease_ms": 3_600_000, "priority": 2, "waiting_ms": 5000}),
    );
    eventually(WAIT, "high_lock to be the requestor", || async {
        requestor_of(&svc).await["owner"] == "high_lock"
    })
    .await;
    let deadline = requestor_of(&svc).await["cleanup_deadline"].clone();
    let highest = spawn_acquire(
        &svc,
        json!({"owner": "highest_lock", "lease_ms": 3_600_000, "priority": 3, "waiting_ms": 5000}),
    );
    let (status, body) = high.await.unwrap();
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "superseded");
    let slot = requestor_of(&svc).await;
    assert_eq!(slot["owner"], "highest_lock");
    assert_eq!(
        slot["cleanup_deadline"], deadline,
        "the cleanup deadline does not move"
    );
    svc.release(LOCK, held["lease_id"].as_str().unwrap()).await;
    let (status, body) = highest.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        hook.of_kind("lock.cleanup_requested").len(),
        1,
        "the holder is asked once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewal_while_a_request_is_pending_keeps_the_requestor() {
    let svc = service().await;
    let hook = Receiver::start().await;
    let held = original(&svc, &hook, 3000).await;
    let high = spawn_acquire(
        &svc,
        json!({"owner": "high", "lease_ms": 60_000, "priority": 2}),
    );
    eventually(WAIT, "a requestor", || async {
        requestor_of(&svc).await["owner"] == "high"
    })
    .await;
    let (status, renewed) = svc
        .renew(
            LOCK,
            json!({"lease_id": held["lease_id"], "lease_ms": 3_600_000}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        renewed["lock"]["requestor"]["owner"], "high",
        "renewal keeps the requestor (Helix bug B4)"
    );
    svc.release(LOCK, held["lease_id"].as_str().unwrap()).await;
    assert_eq!(high.await.unwrap().0, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_holders_expiry_hands_the_lock_to_the_requestor_without_any_write() {
    let svc = service().await;
    let hook = Receiver::start().await;
    let held = svc
        .acquire(LOCK, json!({"owner": "short", "lease_ms": 600, "priority": 1, "cleanup_ms": 60_000, "notify_url": hook.url}))
        .await
        .1;
    let (status, body) = svc
        .acquire(
            LOCK,
            json!({"owner": "high", "lease_ms": 60_000, "priority": 2, "waiting_ms": 10_000}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["fencing_token"].as_u64() > held["fencing_token"].as_u64());
    assert!(
        hook.of_kind("lock.revoked").is_empty(),
        "an expired holder is not revoked"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nobody_barges_in_between_release_and_handoff() {
    let svc = service().await;
    let hook = Receiver::start().await;
    let held = original(&svc, &hook, 5000).await;
    let high = spawn_acquire(
        &svc,
        json!({"owner": "high", "lease_ms": 60_000, "priority": 2}),
    );
    eventually(WAIT, "a requestor", || async {
        requestor_of(&svc).await["owner"] == "high"
    })
    .await;
    svc.release(LOCK, held["lease_id"].as_str().unwrap()).await;
    let (status, third) = svc
        .acquire(
            LOCK,
            json!({"owner": "third", "lease_ms": 1000, "priority": 1}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{third}");
    assert_eq!(third["lock"]["owner"], "high");
    assert_eq!(high.await.unwrap().0, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priorities_between_or_equal_to_the_requestors_do_not_displace_it() {
    let svc = service().await;
    let hook = Receiver::start().await;
    let held = original(&svc, &hook, 5000).await;
    let high = spawn_acquire(
        &svc,
        json!({"owner": "high", "lease_ms": 60_000, "priority": 5}),
    );
    eventually(WAIT, "a requestor", || async {
        requestor_of(&svc).await["owner"] == "high"
    })
    .await;
    for (who, priority) in [("between", 3), ("equal", 5), ("same-as-holder", 1)] {
        let (status, body) = svc
            .acquire(
                LOCK,
                json!({"owner": who, "lease_ms": 1000, "priority": priority}),
            )
            .await;
        assert_eq!(status, StatusCode::CONFLICT, "{who}: {body}");
        assert_eq!(
            body["error"]["code"], "lock_held",
            "{who} (Helix bug B1 let it displace)"
        );
    }
    assert_eq!(requestor_of(&svc).await["owner"], "high");
    svc.release(LOCK, held["lease_id"].as_str().unwrap()).await;
    assert_eq!(high.await.unwrap().0, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_cleanup_window_hands_over_at_once_and_revokes() {
    let svc = service().await;
    let hook = Receiver::start().await;
    original(&svc, &hook, 0).await;
    let (status, body) = svc
        .acquire(
            LOCK,
            json!({"owner": "high", "lease_ms": 60_000, "priority": 2}),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "a non-forceful caller gets it too (Helix threw): {body}"
    );
    let revoked = hook.wait_for("lock.revoked", 1, WAIT).await;
    assert_eq!(revoked[0].body["data"]["owner"], "original_lock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requestor_that_disconnects_is_withdrawn_and_the_holder_told() {
    let svc = service().await;
    let hook = Receiver::start().await;
    original(&svc, &hook, 10_000).await;
    let impatient = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_millis(700))
        .build()
        .unwrap();
    let url = format!("{}/v1/locks/{}/acquire", svc.base, common::encode(LOCK));
    let gone = impatient
        .post(url)
        .json(&json!({"owner": "leaver", "lease_ms": 60_000, "priority": 2}))
        .send()
        .await;
    assert!(gone.is_err(), "the client gave up");
    hook.wait_for("lock.cleanup_cancelled", 1, WAIT).await;
    eventually(WAIT, "the slot to clear", || async {
        requestor_of(&svc).await.is_null()
    })
    .await;
    assert_eq!(svc.info(LOCK).await["waiters"], 0);
    assert_eq!(svc.info(LOCK).await["owner"], "original_lock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_cleanup_timeout_the_same_caller_can_try_again() {
    let svc = service().await;
    let hook = Receiver::start().await;
    let held = original(&svc, &hook, 10_000).await;
    let body = json!({"owner": "retry", "lease_ms": 60_000, "priority": 2, "waiting_ms": 200});
    assert_eq!(
        svc.acquire(LOCK, body.clone()).await.0,
        StatusCode::CONFLICT
    );
    svc.release(LOCK, held["lease_id"].as_str().unwrap()).await;
    let (status, again) = svc.acquire(LOCK, body).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "no state is left over from the first try: {again}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releasing_an_absent_lock_creates_nothing_and_scopes_are_independent() {
    let svc = service().await;
    let (status, _) = svc
        .release("c/LOCK/PARTICIPANT/p1", &uuid::Uuid::new_v4().to_string())
        .await;
    assert_eq!(status, StatusCode::OK);
    let zk = common::zk_client(common::zk::shared()).await;
    assert!(
        common::znodes_under(&zk, &format!("{}/locks", svc.root))
            .await
            .is_empty(),
        "Helix created the znode here"
    );
    svc.must_acquire("c/LOCK/PARTICIPANT/p1", "a", 60_000).await;
    svc.must_acquire("c/LOCK/RESOURCE/r1", "b", 60_000).await;
    svc.must_acquire("c/LOCK/CLUSTER/c", "c", 60_000).await;
}
