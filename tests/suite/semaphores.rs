//! Counting semaphores over HTTP, on both stores: permits are granted up to the limit and
//! refused (or waited for) beyond it, a busy semaphore's limit cannot change, a release
//! hands its permit to the next waiter in one write, a higher caller preempts the lowest,
//! newest holder, an expired permit counts until it is taken over, a retried acquire gets
//! the same permit, a caller that disconnects is never granted one, and an admin frees one
//! permit or all of them.

use crate::common;

use std::time::Duration;

use common::{encode, Service};
use reqwest::StatusCode;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(10);

async fn acquire(svc: &Service, name: &str, body: Value) -> (StatusCode, Value) {
    svc.post(&format!("/v1/semaphores/{}/acquire", encode(name)), body)
        .await
}

async fn must_get(svc: &Service, name: &str, owner: &str, limit: u32) -> Value {
    let body = json!({"owner": owner, "limit": limit, "lease_ms": 60_000});
    let (status, got) = acquire(svc, name, body).await;
    assert_eq!(status, StatusCode::OK, "{got}");
    assert_eq!(got["acquired"], true);
    got
}

async fn act(svc: &Service, name: &str, action: &str, body: Value) -> (StatusCode, Value) {
    svc.post(&format!("/v1/semaphores/{}/{action}", encode(name)), body)
        .await
}

async fn semaphore(svc: &Service, name: &str) -> Value {
    let (status, body) = svc.get(&format!("/v1/semaphores/{}", encode(name))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

async fn current(svc: &Service, name: &str, token: &Value) -> bool {
    let path = format!(
        "/v1/semaphores/{}/validate?fencing_token={token}",
        encode(name)
    );
    let (status, body) = svc.get(&path).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["current"].as_bool().unwrap()
}

fn owners(semaphore: &Value) -> Vec<String> {
    semaphore["holders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["owner"].as_str().unwrap().to_owned())
        .collect()
}

async fn permits_are_granted_up_to_the_limit_and_no_further(svc: Service) {
    let name = "db/pool";
    let free = semaphore(&svc, name).await;
    assert_eq!(free["limit"], Value::Null, "no holder, no waiter: {free}");
    assert_eq!(free["held"], 0);
    let first = must_get(&svc, name, "job-1", 2).await;
    let second = must_get(&svc, name, "job-2", 2).await;
    let (t1, t2) = (&first["fencing_token"], &second["fencing_token"]);
    assert!(t2.as_u64() > t1.as_u64(), "tokens grow in grant order");
    let shown = &second["semaphore"];
    assert_eq!(
        (shown["limit"].as_u64(), shown["held"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(owners(shown), ["job-1", "job-2"]);
    assert!(shown["holders"][0].get("lease_id").is_none(), "{shown}");
    let (status, full) = acquire(
        &svc,
        name,
        json!({"owner": "job-3", "limit": 2, "lease_ms": 60_000}),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{full}");
    assert_eq!(full["error"]["code"], "semaphore_full");
    assert_eq!(full["acquired"], false);
    assert_eq!(full["semaphore"]["held"], 2);
    assert!(full.get("lock").is_none(), "{full}");
    let (status, other) = acquire(
        &svc,
        name,
        json!({"owner": "job-3", "limit": 3, "lease_ms": 60_000}),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{other}");
    assert_eq!(other["error"]["code"], "limit_mismatch");
    assert_eq!(other["semaphore"]["limit"], 2);
    // Both tokens are current: a resource shared by N accepts any of them.
    assert!(current(&svc, name, t1).await && current(&svc, name, t2).await);
    assert!(!current(&svc, name, &json!(t2.as_u64().unwrap() + 1)).await);
    // A lock of the same name is another thing altogether.
    svc.must_acquire(name, "someone", 60_000).await;
    let (status, listed) = svc.get("/v1/semaphores?prefix=db").await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert_eq!(listed["semaphores"][0]["name"], name);
    assert_eq!(listed["semaphores"][0]["held"], 2);
    // Once both are released, the semaphore is free, and a new limit may be set.
    for got in [&first, &second] {
        let (status, released) =
            act(&svc, name, "release", json!({"lease_id": got["lease_id"]})).await;
        assert_eq!(status, StatusCode::OK, "{released}");
        assert_eq!(released["released"], true);
    }
    assert!(!current(&svc, name, t1).await);
    must_get(&svc, name, "job-4", 5).await;
}

async fn a_release_hands_its_permit_to_the_next_waiter_in_one_write(svc: Service) {
    let name = "s";
    let first = must_get(&svc, name, "a", 1).await;
    let waiting = {
        let request = svc
            .http
            .post(format!("{}/v1/semaphores/s/acquire", svc.base))
            .json(&json!({"owner": "b", "limit": 1, "lease_ms": 60_000, "waiting_ms": 30_000}));
        tokio::spawn(async move { request.send().await.unwrap().json::<Value>().await.unwrap() })
    };
    common::eventually(WAIT, "a caller waits", || async {
        semaphore(&svc, name).await["waiters"] == 1
    })
    .await;
    let (status, released) = act(
        &svc,
        name,
        "release",
        json!({"lease_id": first["lease_id"]}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{released}");
    assert_eq!(
        owners(&released["semaphore"]),
        ["b"],
        "handed over in the release's write"
    );
    let second = waiting.await.unwrap();
    assert_eq!(second["acquired"], true, "{second}");
    assert!(second["fencing_token"].as_u64() > first["fencing_token"].as_u64());
    let (status, gone) = act(&svc, name, "renew", json!({"lease_id": first["lease_id"]})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{gone}");
    assert_eq!(gone["error"]["code"], "not_owner");
    assert_eq!(gone["semaphore"]["holders"][0]["owner"], "b");
    let (status, renewed) = act(
        &svc,
        name,
        "renew",
        json!({"lease_id": second["lease_id"], "lease_ms": 90_000}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{renewed}");
    assert!(renewed["semaphore"]["holders"][0]["remaining_ms"].as_u64() > Some(60_000));
}

async fn a_higher_caller_preempts_the_lowest_newest_holder(svc: Service) {
    let name = "p";
    let low_old = must_get(&svc, name, "low-old", 3).await;
    let body = |owner: &str, priority: u32| json!({"owner": owner, "limit": 3, "lease_ms": 60_000, "priority": priority});
    for (owner, priority) in [("high", 5), ("low-new", 0)] {
        let (status, got) = acquire(&svc, name, body(owner, priority)).await;
        assert_eq!(status, StatusCode::OK, "{got}");
    }
    let (status, took) = acquire(&svc, name, body("sre", 7)).await;
    assert_eq!(status, StatusCode::OK, "{took}");
    assert_eq!(
        owners(&took["semaphore"]),
        ["low-old", "high", "sre"],
        "the newest of the lowest gave way"
    );
    assert_eq!(took["semaphore"]["held"], 3);
    // Equal to the lowest is not above it: no preemption.
    let (status, full) = acquire(&svc, name, body("peer", 0)).await;
    assert_eq!(status, StatusCode::CONFLICT, "{full}");
    assert_eq!(full["error"]["code"], "semaphore_full");
    let (status, _) = act(
        &svc,
        name,
        "renew",
        json!({"lease_id": low_old["lease_id"]}),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the older of the lowest keeps its permit"
    );
}

async fn an_expired_permit_counts_until_it_is_taken_over(svc: Service) {
    let name = "x";
    let (status, short) = acquire(
        &svc,
        name,
        json!({"owner": "short", "limit": 2, "lease_ms": 300}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{short}");
    must_get(&svc, name, "long", 2).await;
    common::eventually(WAIT, "the short lease runs out", || async {
        semaphore(&svc, name).await["held"] == 1
    })
    .await;
    let lapsed = semaphore(&svc, name).await;
    assert_eq!(
        owners(&lapsed),
        ["short", "long"],
        "shown until taken over: {lapsed}"
    );
    assert_eq!(lapsed["limit"], 2);
    assert!(!current(&svc, name, &short["fencing_token"]).await);
    // Its limit still holds the semaphore to 2.
    let (status, other) = acquire(
        &svc,
        name,
        json!({"owner": "n", "limit": 1, "lease_ms": 60_000}),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{other}");
    assert_eq!(other["error"]["code"], "limit_mismatch");
    // The next caller takes the lapsed permit over.
    let next = must_get(&svc, name, "next", 2).await;
    assert_eq!(owners(&next["semaphore"]), ["long", "next"]);
    let (status, late) = act(&svc, name, "renew", json!({"lease_id": short["lease_id"]})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{late}");
    assert_eq!(late["error"]["code"], "not_owner");
}

async fn an_acquire_retried_with_its_request_id_gets_the_same_permit(svc: Service) {
    let body = json!({"owner": "o", "limit": 4, "lease_ms": 60_000, "request_id": "job-77"});
    let (status, first) = acquire(&svc, "r", body.clone()).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    must_get(&svc, "r", "between", 4).await;
    let (status, again) = acquire(&svc, "r", body).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(
        (&again["lease_id"], &again["fencing_token"]),
        (&first["lease_id"], &first["fencing_token"]),
        "a retry is answered with the same permit, not a second one"
    );
    assert_eq!(again["semaphore"]["held"], 2);
    let other = json!({"owner": "o", "limit": 5, "lease_ms": 60_000, "request_id": "job-77"});
    let (status, reused) = acquire(&svc, "r", other).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{reused}");
}

async fn a_caller_that_disconnects_while_waiting_is_never_granted(svc: Service) {
    let held = must_get(&svc, "d", "holder", 1).await;
    let impatient = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let gone = impatient
        .post(format!("{}/v1/semaphores/d/acquire", svc.base))
        .json(&json!({"owner": "leaver", "limit": 1, "lease_ms": 60_000, "waiting_ms": 10_000}))
        .send()
        .await;
    assert!(gone.is_err());
    common::eventually(WAIT, "the caller leaves the queue", || async {
        semaphore(&svc, "d").await["waiters"] == 0
    })
    .await;
    let (_, released) = act(&svc, "d", "release", json!({"lease_id": held["lease_id"]})).await;
    assert_eq!(
        released["semaphore"]["holders"],
        json!([]),
        "nobody is granted after they left: {released}"
    );
}

async fn many_callers_share_the_permits_and_all_get_one(svc: Service) {
    let callers: Vec<_> = (0..8)
        .map(|i| {
            let request = svc.http.post(format!("{}/v1/semaphores/many/acquire", svc.base)).json(
                &json!({"owner": format!("c{i}"), "limit": 3, "lease_ms": 60_000, "waiting_ms": 30_000}),
            );
            let (http, base) = (svc.http.clone(), svc.base.clone());
            tokio::spawn(async move {
                let got: Value = request.send().await.unwrap().json().await.unwrap();
                assert_eq!(got["acquired"], true, "{got}");
                let held = got["semaphore"]["held"].as_u64().unwrap();
                let release = json!({"lease_id": got["lease_id"]});
                let path = "/v1/semaphores/many/release";
                let (status, _) = common::send(&http, &base, "POST", path, Some(release), None).await;
                assert_eq!(status, StatusCode::OK);
                (held, got["fencing_token"].as_u64().unwrap())
            })
        })
        .collect();
    let mut tokens = Vec::new();
    for caller in callers {
        let (held, token) = caller.await.unwrap();
        assert!((1..=3).contains(&held), "never more than the limit: {held}");
        tokens.push(token);
    }
    tokens.sort_unstable();
    tokens.dedup();
    assert_eq!(tokens.len(), 8, "every permit has a token of its own");
}

async fn bad_acquires_are_told_what_is_wrong(svc: Service) {
    for (body, says) in [
        (json!({"owner": "o", "lease_ms": 1000}), "limit"),
        (
            json!({"owner": "o", "limit": 0, "lease_ms": 1000}),
            "limit must be between 1 and 128",
        ),
        (
            json!({"owner": "o", "limit": 129, "lease_ms": 1000}),
            "limit must be between 1 and 128",
        ),
        (
            json!({"owner": "o", "limit": "2", "lease_ms": 1000}),
            "expected an integer",
        ),
        (json!({"owner": "o", "limit": 2, "lease_ms": 0}), "lease_ms"),
    ] {
        let (status, bad) = acquire(&svc, "b", body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {bad}");
        let message = bad["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{body}: {message}");
    }
    let (status, bad) = svc.get("/v1/semaphores/b/validate").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
}

/// An admin frees one permit by its token, or every permit; a caller without the admin
/// token may not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_frees_one_permit_or_all() {
    let svc = Service::zk_with(|args| args.admin_token = Some("root".into())).await;
    let got: Vec<Value> = {
        let mut got = Vec::new();
        for owner in ["a", "b", "c"] {
            got.push(must_get(&svc, "f", owner, 3).await);
        }
        got
    };
    let (status, _) = svc.send("DELETE", "/v1/semaphores/f", None, None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let path = format!("/v1/semaphores/f?fencing_token={}", got[1]["fencing_token"]);
    let (status, one) = svc.send("DELETE", &path, None, Some("root")).await;
    assert_eq!(status, StatusCode::OK, "{one}");
    assert_eq!(
        (one["freed"].as_u64(), one["already_free"].as_bool()),
        (Some(1), Some(false))
    );
    assert_eq!(owners(&one["semaphore"]), ["a", "c"]);
    let (status, all) = svc
        .send("DELETE", "/v1/semaphores/f", None, Some("root"))
        .await;
    assert_eq!(status, StatusCode::OK, "{all}");
    assert_eq!(all["freed"], 2);
    assert_eq!(all["semaphore"]["holders"], json!([]));
    let (status, none) = svc
        .send("DELETE", "/v1/semaphores/f", None, Some("root"))
        .await;
    assert_eq!(status, StatusCode::OK, "{none}");
    assert_eq!(none["already_free"], true);
}

on_both_stores!(
    permits_are_granted_up_to_the_limit_and_no_further,
    a_release_hands_its_permit_to_the_next_waiter_in_one_write,
    a_higher_caller_preempts_the_lowest_newest_holder,
    an_expired_permit_counts_until_it_is_taken_over,
    an_acquire_retried_with_its_request_id_gets_the_same_permit,
    a_caller_that_disconnects_while_waiting_is_never_granted,
    many_callers_share_the_permits_and_all_get_one,
    bad_acquires_are_told_what_is_wrong,
);
