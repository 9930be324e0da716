//! The `lockwarden-client` crate against real lockwarden instances on ZooKeeper: renewal,
//! the loss and cleanup signals, release on drop, and retries that never take a second
//! lease (through `flaky`, a test double that spoils answers after the service acted).

#[path = "../common/mod.rs"]
mod common;
mod election;
mod faults;
mod flaky;
mod semaphore;

use std::time::{Duration, Instant};

use common::{eventually, zk, zk_args, Service};
use flaky::{Flaky, Spoil};
use lockwarden_client::{Client, Error, LossReason};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_second_lease_is_kept_for_ten_seconds_by_renewing() {
    let service = Service::zk().await;
    let client = Client::new(&service.base);
    let guard = client
        .lock("keep/me")
        .lease(Duration::from_secs(2))
        .owner("keeper")
        .acquire()
        .await
        .unwrap();
    let token = guard.fencing_token();
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        let info = service.info("keep/me").await;
        assert_eq!(info["state"], "held", "{info}");
        assert_eq!(info["fencing_token"].as_u64(), Some(token.0), "{info}");
        assert_eq!(info["owner"], "keeper");
        assert!(guard.loss().is_none());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let status = client.status("keep/me").await.unwrap();
    assert!(status.held_with(token));
    guard.release().await.unwrap();
    assert_eq!(service.info("keep/me").await["state"], "free");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_force_release_fires_lost_and_a_dropped_guard_releases() {
    let service = Service::zk_with(|args| args.admin_token = Some("admin-secret".into())).await;
    let client = Client::new(&service.base);
    let guard = client
        .lock("lose/me")
        .lease(Duration::from_secs(2))
        .acquire()
        .await
        .unwrap();
    let admin = Client::new(&service.base).token("admin-secret");
    admin.force_release("lose/me").await.unwrap();
    let reason = tokio::time::timeout(Duration::from_secs(10), guard.lost())
        .await
        .expect("the loss is seen within 10 s");
    assert!(
        matches!(
            reason,
            LossReason::RenewalRefused { .. } | LossReason::Superseded { .. }
        ),
        "{reason:?}"
    );
    // Releasing a free lock is a success; the guard stops renewing either way.
    guard.release().await.unwrap();

    let dropped = client.lock("drop/me").acquire().await.unwrap();
    drop(dropped);
    eventually(
        Duration::from_secs(10),
        "the dropped guard's release",
        || async { service.info("drop/me").await["state"] == "free" },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_higher_priority_that_waits_fires_cleanup_requested_with_the_window() {
    let service = Service::zk().await;
    let client = Client::new(&service.base);
    let guard = client
        .lock("clean/up")
        .lease(Duration::from_secs(2))
        .cleanup(Duration::from_secs(20))
        .acquire()
        .await
        .unwrap();
    let boss = client
        .lock("clean/up")
        .priority(10)
        .owner("boss")
        .wait(Duration::from_secs(30))
        .acquire();
    let boss = tokio::spawn(boss);
    let request = tokio::time::timeout(Duration::from_secs(10), guard.cleanup_requested())
        .await
        .expect("the cleanup request is seen within 10 s");
    assert_eq!(request.requestor.owner, "boss");
    assert_eq!(request.requestor.priority, 10);
    let left = request.remaining().expect("a cleanup deadline");
    assert!(
        left > Duration::from_secs(10) && left <= Duration::from_secs(21),
        "{left:?}"
    );
    let token = guard.fencing_token();
    guard.release().await.unwrap();
    let boss = boss.await.unwrap().unwrap();
    assert!(boss.fencing_token() > token);
    boss.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_lock_is_not_acquired_and_says_who_holds_it() {
    let service = Service::zk().await;
    let client = Client::new(&service.base);
    let _held = client.lock("busy").owner("first").acquire().await.unwrap();
    match client.lock("busy").acquire().await {
        Err(Error::NotAcquired { code, lock, .. }) => {
            assert_eq!(code, "lock_held");
            assert_eq!(lock.unwrap().owner.as_deref(), Some("first"));
        }
        other => panic!("{other:?}"),
    }
}

/// Two instances on one ZooKeeper root, behind a front that spoils the first acquire's
/// answer after instance A granted it; the retry goes to instance B.
async fn retried_acquire_takes_one_lease(spoil: Spoil) {
    let root = common::unique_root();
    let a = Service::start(zk_args(zk::shared(), &root)).await;
    let b = Service::start(zk_args(zk::shared(), &root)).await;
    let front = Flaky::start(vec![a.base.clone(), b.base.clone()], Some(spoil)).await;
    let client = Client::new(&front.url).retry_for(Duration::from_secs(10));
    let guard = client
        .lock("retry/me")
        .lease(Duration::from_secs(5))
        .acquire()
        .await
        .expect("the retry gets the grant");
    let acquires = front.acquires();
    assert_eq!(acquires.len(), 2, "{acquires:?}");
    assert_eq!(acquires[0], acquires[1], "the retry is the same request");
    assert!(acquires[0]["request_id"].is_string());
    // The grant whose answer was spoiled is the one the retry returned: one lease.
    let hidden = front.hidden_answers();
    assert_eq!(hidden.len(), 1);
    assert_eq!(
        hidden[0]["lease_id"].as_str(),
        Some(guard.lease_id().as_str())
    );
    assert_eq!(
        hidden[0]["fencing_token"].as_u64(),
        Some(guard.fencing_token().0)
    );
    let info = a.info("retry/me").await;
    assert_eq!(
        info["fencing_token"].as_u64(),
        Some(guard.fencing_token().0)
    );
    guard.release().await.unwrap();
    assert_eq!(b.info("retry/me").await["state"], "free");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_503_after_the_grant_is_retried_with_the_same_request_id() {
    retried_acquire_takes_one_lease(Spoil::Unavailable).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_answer_is_retried_with_the_same_request_id() {
    retried_acquire_takes_one_lease(Spoil::Reset).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_service_means_lost_once_the_lease_has_run_out_by_our_clock() {
    let service = Service::zk().await;
    let front = Flaky::start(vec![service.base.clone()], None).await;
    let client = Client::new(&front.url);
    let guard = client
        .lock("cut/off")
        .lease(Duration::from_secs(2))
        .acquire()
        .await
        .unwrap();
    let cut_at = Instant::now();
    front.go_away();
    let reason = tokio::time::timeout(Duration::from_secs(10), guard.lost())
        .await
        .expect("the loss is judged within 10 s");
    assert_eq!(reason, LossReason::LeaseRanOut);
    // Judged on the lease's remaining time from the last answer: at most one lease after
    // the cut, never later.
    assert!(
        cut_at.elapsed() <= Duration::from_millis(2_500),
        "{:?}",
        cut_at.elapsed()
    );
}

/// The guard follows the lock's event stream: a cleanup request and then a force release
/// reach it at once, though its next renewal is a minute away. The stream is the wire
/// format the service sends, served by the front; renewals go to the real service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_on_the_lock_stream_reach_the_guard_before_any_renewal() {
    let service = Service::zk().await;
    let front = Flaky::with_scripted_events(service.base.clone()).await;
    let guard = Client::new(&front.url)
        .lock("evented")
        .lease(Duration::from_secs(120))
        .renew_every(Duration::from_secs(60))
        .acquire()
        .await
        .unwrap();
    eventually(
        Duration::from_secs(10),
        "the guard's event stream",
        || async { front.event_streams() == 1 },
    )
    .await;
    let token = guard.fencing_token().0;
    let lock = |state: &str, requestor: &str| {
        format!(
            r#"{{"name":"evented","state":"{state}","owner":"me","fencing_token":{token},"waiters":0,"requestor":{requestor}}}"#
        )
    };
    let requestor = r#"{"owner":"boss","priority":9,"waiting_ms":30000,"forceful":false,"requested_at":null,"cleanup_deadline":null}"#;
    // A heartbeat, an event from before the grant (ignored), then the cleanup request
    // split across two writes.
    front.push_event(": heartbeat\n\n");
    let stale = lock("free", "null");
    front.push_event(&format!(
        "event: released\nid: {}\ndata: {{\"type\":\"released\",\"lock\":{stale}}}\n\n",
        token - 1
    ));
    let cleanup = lock("held", requestor);
    let text = format!("event: cleanup_requested\nid: {}\ndata: {{\"type\":\"cleanup_requested\",\"lock\":{cleanup}}}\n\n", token + 1);
    let (first, second) = text.split_at(text.len() / 2);
    front.push_event(first);
    front.push_event(second);
    let request = tokio::time::timeout(Duration::from_secs(5), guard.cleanup_requested())
        .await
        .expect("the cleanup request arrives by the stream");
    assert_eq!(request.requestor.owner, "boss");
    assert!(guard.loss().is_none(), "the stale event was ignored");
    let gone =
        r#"{"name":"evented","state":"free","fencing_token":null,"waiters":0,"requestor":null}"#;
    front.push_event(&format!(
        "event: force_released\nid: {}\ndata: {{\"type\":\"force_released\",\"lock\":{gone}}}\n\n",
        token + 2
    ));
    let reason = tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("the loss arrives by the stream");
    assert_eq!(
        reason,
        LossReason::Superseded {
            event: Some("force_released".into()),
            holder_token: None
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_that_meet_503_are_retried_and_the_lease_is_kept() {
    let service = Service::zk().await;
    let front = Flaky::start(vec![service.base.clone()], None).await;
    let guard = Client::new(&front.url)
        .lock("bumpy")
        .lease(Duration::from_secs(4))
        .renew_every(Duration::from_millis(500))
        .acquire()
        .await
        .unwrap();
    front.refuse_renewals(true);
    eventually(
        Duration::from_secs(10),
        "three refused renewals",
        || async { front.renewals().0 >= 3 },
    )
    .await;
    front.refuse_renewals(false);
    let passed = front.renewals().1;
    eventually(Duration::from_secs(10), "a renewal that passes", || async {
        front.renewals().1 > passed
    })
    .await;
    assert!(guard.loss().is_none(), "{:?}", guard.loss());
    let info = service.info("bumpy").await;
    assert_eq!(info["state"], "held");
    assert_eq!(
        info["fencing_token"].as_u64(),
        Some(guard.fencing_token().0)
    );
    guard.release().await.unwrap();
}
