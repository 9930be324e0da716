//! Group commit (`service::group_commit`): a caller that asks again for a lock changing
//! hands on this instance joins its queue in the next hand-off's own write. The queue's
//! order, the grants and the queue's emptiness afterwards are what they would be without it.

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::framing::op;
use common::instance::{Instance, InstanceOptions};
use common::nemesis::instance_flags;
use common::proxy::{Mode, Proxy};
use common::{eventually, unique_root, zk, Service};
use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

const WAIT: Duration = Duration::from_secs(20);

/// Queue entries made so far: (in a hand-off's write, alone).
async fn joins(svc: &Service) -> (u64, u64) {
    let text = svc.metrics().await;
    let get = |how| {
        common::metric_value(
            &text,
            &format!("lockwarden_queue_joins_total{{how=\"{how}\"}}"),
        )
    };
    (get("hand_off"), get("alone"))
}

fn waiting_acquire(svc: &Arc<Service>, name: &'static str, who: &str) -> JoinHandle<Value> {
    let svc = svc.clone();
    let body = json!({"owner": who, "lease_ms": 30_000, "waiting_ms": 20_000});
    tokio::spawn(async move {
        let (status, body) = svc.acquire(name, body).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body
    })
}

async fn granted_to(tasks: &mut HashMap<&str, JoinHandle<Value>>, who: &str) -> Value {
    let body = tokio::time::timeout(WAIT, tasks.remove(who).unwrap())
        .await
        .expect("granted in time")
        .unwrap();
    assert_eq!(body["lock"]["owner"], who, "{body}");
    body
}

/// `a` holds, `b` and `c` wait; `a` hands over to `b` and asks again at once, then `b` and
/// `c` release as soon as they hold. `a` joins behind `c`, alone or riding on one of those
/// hand-offs, and the lock goes b, c, a with increasing tokens. Repeated until a join has
/// ridden on a hand-off (whether one does depends on timing), every round checked.
async fn a_caller_asking_again_joins_with_the_next_hand_off_in_order(svc: Service) {
    let svc = Arc::new(svc);
    let name = "riders";
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut rounds = 0;
    loop {
        rounds += 1;
        let (carried_before, _) = joins(&svc).await;
        let mut lease = svc.must_acquire(name, "a", 60_000).await["lease_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let mut tasks = HashMap::new();
        for (i, who) in ["b", "c"].into_iter().enumerate() {
            tasks.insert(who, waiting_acquire(&svc, name, who));
            common::eventually(WAIT, "the waiter queued", || async {
                svc.waiters(name).await == i as u64 + 1
            })
            .await;
        }
        let (status, _) = svc.release(name, &lease).await;
        assert_eq!(status, StatusCode::OK);
        tasks.insert("a", waiting_acquire(&svc, name, "a"));
        let mut last_token = 0;
        for who in ["b", "c", "a"] {
            let granted = granted_to(&mut tasks, who).await;
            let token = granted["fencing_token"].as_u64().unwrap();
            assert!(token > last_token, "round {rounds}: tokens increase");
            last_token = token;
            lease = granted["lease_id"].as_str().unwrap().to_owned();
            let (status, body) = svc.release(name, &lease).await;
            assert_eq!(
                status,
                StatusCode::OK,
                "round {rounds}: {who}'s grant was real: {body}"
            );
        }
        let info = svc.info(name).await;
        assert_eq!(info["state"], "free", "round {rounds}: {info}");
        assert_eq!(info["waiters"], 0, "round {rounds}: nothing left queued");
        let (carried, _) = joins(&svc).await;
        if carried > carried_before {
            eprintln!("a join rode on a hand-off in round {rounds}");
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no join rode on a hand-off in {rounds} rounds"
        );
    }
}

/// Many clients loop through one lock, each asking again as soon as it released: most
/// joins ride on hand-offs, every client is served, and nothing is left queued.
async fn a_busy_lock_serves_everyone_with_joins_riding_on_hand_offs(svc: Service) {
    let svc = Arc::new(svc);
    let name = "busy-riders";
    let clients: Vec<JoinHandle<Vec<u64>>> = (0..6)
        .map(|c| {
            let svc = svc.clone();
            tokio::spawn(async move {
                let mut tokens = Vec::new();
                for round in 0..20 {
                    let body =
                        json!({"owner": format!("c{c}"), "lease_ms": 30_000, "waiting_ms": 20_000});
                    let (status, granted) = svc.acquire(name, body).await;
                    assert_eq!(status, StatusCode::OK, "c{c} round {round}: {granted}");
                    tokens.push(granted["fencing_token"].as_u64().unwrap());
                    let lease = granted["lease_id"].as_str().unwrap();
                    let (status, released) = svc.release(name, lease).await;
                    assert_eq!(status, StatusCode::OK, "c{c} round {round}: {released}");
                }
                tokens
            })
        })
        .collect();
    let mut all = Vec::new();
    for client in clients {
        let tokens = client.await.unwrap();
        assert!(
            tokens.windows(2).all(|w| w[0] < w[1]),
            "a client's tokens increase"
        );
        all.extend(tokens);
    }
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 120, "every grant has its own token");
    let info = svc.info(name).await;
    assert_eq!(info["state"], "free", "{info}");
    assert_eq!(info["waiters"], 0, "nothing left queued: {info}");
    let (carried, alone) = joins(&svc).await;
    eprintln!("joins: {carried} with a hand-off, {alone} alone");
    assert!(carried > 0, "some joins rode on hand-offs ({alone} alone)");
}

/// One series of `instance`'s `/metrics`.
async fn series(instance: &Instance, series: &str) -> u64 {
    common::metric_value(&instance.metrics().await, series)
}

/// How many callers wait to join with the next hand-off on `instance`.
async fn seated(instance: &Instance) -> u64 {
    series(instance, "lockwarden_queue_joins_waiting").await
}

/// The answer to a hand-off that carries a joining caller is lost (the connection to
/// ZooKeeper is cut right after the `multi` goes out): the write landed, so the caller finds
/// the entry it made by its key instead of making a second one, and is served once, in its
/// turn; nothing is left queued. A long join window makes the ride certain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_answer_to_a_hand_off_carrying_a_join_leaves_one_entry() {
    let root = unique_root();
    let zk_addr = format!("127.0.0.1:{}", zk::shared().port).parse().unwrap();
    let proxy = Proxy::start(zk_addr);
    let mut flags = instance_flags(&proxy.connect_string(), &root);
    flags.extend(["--join-window-ms".to_owned(), "1000".to_owned()]);
    let instance = Instance::start(InstanceOptions::new(&flags)).await;
    let name = "lost-ride";
    let release = |lease: &str| {
        let body = json!({"lease_id": lease});
        instance.post("/v1/locks/lost-ride/release", body)
    };
    let body = json!({"owner": "a", "lease_ms": 30_000});
    let (status, a) = instance.post("/v1/locks/lost-ride/acquire", body).await;
    assert_eq!(status, StatusCode::OK, "{a}");
    let waiting = |who: &'static str| {
        let (base, name) = (instance.base().to_owned(), name);
        tokio::spawn(async move {
            let body = json!({"owner": who, "lease_ms": 30_000, "waiting_ms": 20_000});
            let answer = common::http_client()
                .post(format!("{base}/v1/locks/{name}/acquire"))
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(answer.status(), StatusCode::OK, "{who}");
            answer.json::<Value>().await.unwrap()
        })
    };
    let b = waiting("b");
    eventually(WAIT, "b queued", || async {
        instance.get(&format!("/v1/locks/{name}")).await.1["waiters"] == 1
    })
    .await;
    let c = waiting("c");
    eventually(WAIT, "c queued", || async {
        instance.get(&format!("/v1/locks/{name}")).await.1["waiters"] == 2
    })
    .await;
    // a hands over to b; the lock now changes hands here, so a's next call waits to ride.
    assert_eq!(
        release(a["lease_id"].as_str().unwrap()).await.0,
        StatusCode::OK
    );
    let b = b.await.unwrap();
    let a_again = waiting("a");
    eventually(WAIT, "a waits for the next hand-off", || async {
        seated(&instance).await == 1
    })
    .await;
    proxy.set_mode(Mode::CutAfter {
        ops: vec![op::MULTI],
        refuse_for: Duration::from_millis(300),
    });
    // b hands over to c, carrying a's join; the answer is lost.
    let (status, body) = release(b["lease_id"].as_str().unwrap()).await;
    assert_eq!(proxy.fired(), 1, "the hand-off's answer was cut off");
    assert!(
        status == StatusCode::OK || status == StatusCode::SERVICE_UNAVAILABLE,
        "{status} {body}"
    );
    let c = tokio::time::timeout(WAIT, c)
        .await
        .expect("c served")
        .unwrap();
    assert_eq!(c["lock"]["owner"], "c", "{c}");
    let (_, info) = instance.get(&format!("/v1/locks/{name}")).await;
    assert_eq!(info["waiters"], 1, "a is queued once: {info}");
    assert_eq!(
        release(c["lease_id"].as_str().unwrap()).await.0,
        StatusCode::OK
    );
    let a_again = tokio::time::timeout(WAIT, a_again)
        .await
        .expect("a served")
        .unwrap();
    assert_eq!(a_again["lock"]["owner"], "a", "{a_again}");
    assert!(a_again["fencing_token"].as_u64() > c["fencing_token"].as_u64());
    assert_eq!(
        release(a_again["lease_id"].as_str().unwrap()).await.0,
        StatusCode::OK
    );
    let (_, info) = instance.get(&format!("/v1/locks/{name}")).await;
    assert_eq!(info["state"], "free", "{info}");
    assert_eq!(info["waiters"], 0, "nothing left queued: {info}");
    let carried = series(&instance, "lockwarden_queue_joins_total{how=\"hand_off\"}").await;
    assert_eq!(carried, 1, "a's entry was the one the hand-off made");
}

/// A caller that would come before the waiter next in line joins at once, even on a lock
/// that changes hands here and with a long join window: the next hand-off finds it in the
/// queue and gives it the lock before the earlier, lower caller.
async fn a_caller_outranking_the_queue_joins_at_once_and_goes_first(svc: Service) {
    let svc = Arc::new(svc);
    let name = "outranked";
    let body = json!({"owner": "h", "lease_ms": 60_000, "priority": 5});
    let (status, held) = svc.acquire(name, body).await;
    assert_eq!(status, StatusCode::OK, "{held}");
    let mut lease = held["lease_id"].as_str().unwrap().to_owned();
    let mut tasks = HashMap::new();
    // w1 at the holder's priority (so nobody preempts), w2 below; r comes between them.
    for (i, (who, priority)) in [("w1", 5), ("w2", 0)].into_iter().enumerate() {
        let svc2 = svc.clone();
        let body =
            json!({"owner": who, "lease_ms": 30_000, "priority": priority, "waiting_ms": 20_000});
        tasks.insert(
            who,
            tokio::spawn(async move {
                let (status, body) = svc2.acquire(name, body).await;
                assert_eq!(status, StatusCode::OK, "{body}");
                body
            }),
        );
        common::eventually(WAIT, "the waiter queued", || async {
            svc.waiters(name).await == i as u64 + 1
        })
        .await;
    }
    svc.release(name, &lease).await;
    lease = granted_to(&mut tasks, "w1").await["lease_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let svc2 = svc.clone();
    tasks.insert(
        "r",
        tokio::spawn(async move {
            let body =
                json!({"owner": "r", "lease_ms": 30_000, "priority": 5, "waiting_ms": 20_000});
            let (status, body) = svc2.acquire(name, body).await;
            assert_eq!(status, StatusCode::OK, "{body}");
            body
        }),
    );
    // Well within the 1 s join window: it did not wait for a hand-off to ride on (had it,
    // it would have joined only once the window ran out, or behind w2 with the next one).
    common::eventually(Duration::from_millis(700), "r queued at once", || async {
        svc.waiters(name).await == 2
    })
    .await;
    assert_eq!(
        common::metric_value(&svc.metrics().await, "lockwarden_queue_joins_waiting"),
        0
    );
    for who in ["r", "w2"] {
        svc.release(name, &lease).await;
        lease = granted_to(&mut tasks, who).await["lease_id"]
            .as_str()
            .unwrap()
            .to_owned();
    }
    svc.release(name, &lease).await;
    let info = svc.info(name).await;
    assert_eq!(info["state"], "free", "{info}");
    assert_eq!(info["waiters"], 0, "{info}");
}

mod outranking {
    use lockwarden::config::ServeArgs;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_zookeeper() {
        let svc = super::common::Service::zk_with(|a| a.join_window_ms = 1_000).await;
        super::a_caller_outranking_the_queue_joins_at_once_and_goes_first(svc).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn in_memory() {
        let mut args = ServeArgs::defaults();
        args.max_clock_skew_ms = 0;
        args.join_window_ms = 1_000;
        let svc = super::common::Service::start(args).await;
        super::a_caller_outranking_the_queue_joins_at_once_and_goes_first(svc).await
    }
}

on_both_stores!(
    ;
    hinted:
    a_caller_asking_again_joins_with_the_next_hand_off_in_order,
    a_busy_lock_serves_everyone_with_joins_riding_on_hand_offs,
);
