//! A ZooKeeper server that keeps a session alive (it answers its pings and reads) but answers
//! none of its writes: the instance gives that session up and goes on with a new one, instead
//! of timing out every write for as long as the server stays that way (seen once, for about a
//! minute, on a server that had been the paused leader), nor when it still answers syncs. A
//! server that is only slow is not given up on. Both are played by fault proxies in front of the one test server: the
//! instance's connect string names two, so a new session has somewhere to go.

use crate::common;

use std::time::Duration;

use common::proxy::{Mode, Proxy};
use common::sse::SseStream;
use common::{eventually, unique_root, zk, zk_args, zk_client, znodes_under, Service};
use reqwest::StatusCode;
use serde_json::json;

const ABANDONED: &str = "lockwarden_zookeeper_session_probes_total{outcome=\"abandoned\"}";
/// How long a change may take to reach an event stream (they come within milliseconds).
const EVENT_WITHIN: Duration = Duration::from_secs(10);
const ANSWERED: &str = "lockwarden_zookeeper_session_probes_total{outcome=\"answered\"}";

/// An instance (store timeout 1 s, session timeout 4 s) whose ZooKeeper is reached through
/// either of two proxies, and the proxy its session went through.
async fn through_two_proxies() -> (Service, [Proxy; 2], usize) {
    let target = format!("127.0.0.1:{}", zk::shared().port).parse().unwrap();
    let proxies = [Proxy::start(target), Proxy::start(target)];
    let mut args = zk_args(zk::shared(), &unique_root());
    let connect = format!("{},{}", proxies[0].addr(), proxies[1].addr());
    args.zk = Some(connect);
    let svc = Service::start(args).await;
    svc.must_take_and_free("warm-up").await;
    let used = |p: &Proxy| p.open_connections() > 0;
    assert!(
        used(&proxies[0]) != used(&proxies[1]),
        "one session, through one proxy"
    );
    let through = usize::from(used(&proxies[1]));
    (svc, proxies, through)
}

/// Whether a fresh lock can be taken and released (each call within the store timeout).
async fn serves(svc: &Service, name: &str) -> bool {
    let (status, body) = svc
        .acquire(name, json!({"owner": "f", "lease_ms": 60000}))
        .await;
    if status != StatusCode::OK {
        return false;
    }
    let lease = body["lease_id"].as_str().unwrap();
    svc.release(name, lease).await.0 == StatusCode::OK
}

/// Stalls the proxy the session goes through and waits until the instance serves again,
/// which it does once it has given that session up (exactly once) for one through the other.
async fn stall_until_replaced(svc: &Service, proxies: &[Proxy; 2], through: usize, stall: Mode) {
    proxies[through].set_mode(stall);
    // The first call times out on the stalled session and has it probed; a session timeout
    // later the instance gives it up and opens one through the other proxy.
    eventually(Duration::from_secs(30), "the instance serves again", || {
        serves(svc, "fresh")
    })
    .await;
    assert_eq!(svc.metric(ABANDONED).await, 1, "one session given up");
    assert!(
        proxies[1 - through].open_connections() > 0,
        "the new session"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_whose_server_answers_no_write_is_given_up_and_replaced() {
    let (svc, proxies, through) = through_two_proxies().await;
    let zk = zk_client(zk::shared()).await;
    let queue = format!("{}/state/kept", svc.root);
    let held = svc.must_acquire("kept", "holder", 60_000).await;
    let waiter = {
        let (http, base) = (svc.http.clone(), svc.base.clone());
        tokio::spawn(async move {
            let body = json!({"owner": "waiter", "lease_ms": 60000, "waiting_ms": 30000});
            let url = format!("{base}/v1/locks/kept/acquire");
            let answer = http.post(url).json(&body).send().await.unwrap();
            let status = answer.status();
            (status, answer.json::<serde_json::Value>().await.unwrap())
        })
    };
    eventually(Duration::from_secs(10), "the waiter is queued", || async {
        znodes_under(&zk, &queue).await.len() == 1
    })
    .await;

    stall_until_replaced(&svc, &proxies, through, Mode::Stall).await;

    // The waiter kept its place: the holder's release hands it the lock.
    let lease = held["lease_id"].as_str().unwrap();
    assert_eq!(svc.release("kept", lease).await.0, StatusCode::OK);
    let (status, body) = tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .expect("the waiter is answered")
        .unwrap();
    assert_eq!(status, StatusCode::OK, "the waiter gets the lock: {body}");
    let lease = body["lease_id"].as_str().unwrap();
    assert_eq!(svc.release("kept", lease).await.0, StatusCode::OK);

    // The given-up session ends once its server lets it go; nothing of it stays queued.
    proxies[through].set_mode(Mode::Refuse);
    eventually(Duration::from_secs(20), "the queue is empty", || async {
        znodes_under(&zk, &queue).await.is_empty()
    })
    .await;
    assert!(serves(&svc, "after").await);
    assert_eq!(svc.metric(ABANDONED).await, 1, "the new session is kept");
}

/// A server that answers syncs but no write (a `sync` goes through the leader but is not
/// logged by a quorum) is given up too: the probe is a write. With a `sync` for the probe,
/// the session was kept and the instance never served again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_whose_server_answers_syncs_but_no_write_is_given_up() {
    let (svc, proxies, through) = through_two_proxies().await;
    stall_until_replaced(&svc, &proxies, through, Mode::StallWrites).await;
}

/// A server that answers late (1.5 s, under the 4-s session timeout) times calls out, but its
/// session is kept: the probe's answer comes in time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_whose_server_is_only_slow_is_kept() {
    let (svc, proxies, through) = through_two_proxies().await;
    proxies[through].set_mode(Mode::DelayReplies(Duration::from_millis(1500)));
    let (status, body) = svc
        .acquire("slow", json!({"owner": "s", "lease_ms": 60000}))
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    eventually(Duration::from_secs(10), "the probe is answered", || async {
        svc.metric(ANSWERED).await > 0
    })
    .await;
    proxies[through].set_mode(Mode::Pass);
    eventually(Duration::from_secs(10), "the instance serves again", || {
        serves(&svc, "slow")
    })
    .await;
    assert_eq!(svc.metric(ABANDONED).await, 0, "the session was kept");
    assert_eq!(
        proxies[1 - through].accepted(),
        0,
        "no other session was opened"
    );
}

/// The event stream follows the instance to its new session: a change made through another
/// instance after the stalled session was given up reaches a stream opened before. Its
/// watches were on the given-up session, whose server (applying no writes) tells of nothing,
/// and the stream heard nothing more until that session ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_follow_the_instance_to_its_new_session() {
    let (svc, proxies, through) = through_two_proxies().await;
    let url = format!("{}/v1/locks/seen/events", svc.base);
    let mut stream = SseStream::open(&url, None).await;
    assert_eq!(stream.next_event(EVENT_WITHIN).await.event, "snapshot");

    stall_until_replaced(&svc, &proxies, through, Mode::Stall).await;

    let other = Service::start(zk_args(zk::shared(), &svc.root)).await;
    let held = other.must_acquire("seen", "elsewhere", 60_000).await;
    let acquired = stream.next_of("acquired", EVENT_WITHIN).await;
    assert_eq!(
        acquired.data["lock"]["owner"], "elsewhere",
        "{:?}",
        acquired.data
    );
    assert_eq!(
        acquired.data["lock"]["fencing_token"],
        held["fencing_token"]
    );
}
