//! The lock rules of the contract, over HTTP, on ZooKeeper and on the in-memory store.

use crate::common;

use std::time::Duration;

use common::{eventually, Service};
use reqwest::StatusCode;
use serde_json::{json, Value};

on_both_stores!(
    a_free_lock_is_granted_and_a_held_one_refused,
    twenty_concurrent_acquires_have_exactly_one_winner,
    fencing_tokens_increase_and_validate_tracks_the_live_holder,
    an_expired_lease_is_taken_over_lazily,
    renew_extends_and_may_change_the_lease,
    release_rules,
    reacquire_with_the_lease_keeps_lease_and_token,
    a_retried_request_id_gets_the_same_outcome,
    a_never_used_lock_reads_as_free,
    listing_pages_through_held_and_expired_locks_in_name_order,
    a_listing_shows_each_locks_waiters_and_live_requestor,
);

async fn a_free_lock_is_granted_and_a_held_one_refused(svc: Service) {
    let (status, body) = svc
        .acquire(
            "payments/migrate",
            json!({"owner": "deploy-bot", "lease_ms": 30000, "message": "schema migration"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["acquired"], true);
    assert!(uuid::Uuid::parse_str(body["lease_id"].as_str().unwrap()).is_ok());
    let token = body["fencing_token"].as_u64().unwrap();
    assert!(token > 0);
    let lock = &body["lock"];
    assert_eq!(lock["name"], "payments/migrate");
    assert_eq!(lock["state"], "held");
    assert_eq!(lock["owner"], "deploy-bot");
    assert_eq!(lock["message"], "schema migration");
    assert_eq!(lock["lease_ms"], 30000);
    assert_eq!(lock["fencing_token"], token);
    assert!(lock["remaining_ms"].as_u64().unwrap() <= 30000);
    assert!(
        lock.get("lease_id").is_none(),
        "the lease id is never shown"
    );

    let (status, refusal) = svc
        .acquire(
            "payments/migrate",
            json!({"owner": "other", "lease_ms": 1000}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(refusal["acquired"], false);
    assert_eq!(refusal["error"]["code"], "lock_held");
    assert_eq!(refusal["lock"]["owner"], "deploy-bot");
    assert_eq!(refusal["lock"]["state"], "held");

    let info = svc.info("payments/migrate").await;
    assert_eq!(info["owner"], "deploy-bot");
    let (_, mine) = svc
        .get("/v1/locks/payments%2Fmigrate?owner=deploy-bot")
        .await;
    assert_eq!(mine["is_owner"], true);
    let (_, theirs) = svc.get("/v1/locks/payments%2Fmigrate?owner=other").await;
    assert_eq!(theirs["is_owner"], false);
    assert!(
        info.get("is_owner").is_none(),
        "is_owner appears only with ?owner="
    );
}

async fn twenty_concurrent_acquires_have_exactly_one_winner(svc: Service) {
    let svc = std::sync::Arc::new(svc);
    let calls = (0..20).map(|i| {
        let svc = svc.clone();
        tokio::spawn(async move {
            svc.acquire("race", json!({"owner": format!("c{i}"), "lease_ms": 60000}))
                .await
        })
    });
    let results: Vec<(StatusCode, Value)> = futures::future::join_all(calls)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let winners: Vec<&Value> = results
        .iter()
        .filter(|(s, _)| *s == StatusCode::OK)
        .map(|(_, b)| b)
        .collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    for (status, body) in &results {
        if *status != StatusCode::OK {
            assert_eq!(*status, StatusCode::CONFLICT);
            assert_eq!(body["error"]["code"], "lock_held");
            assert_eq!(body["lock"]["owner"], winners[0]["lock"]["owner"]);
        }
    }
}

async fn fencing_tokens_increase_and_validate_tracks_the_live_holder(svc: Service) {
    let mut last = 0;
    for round in 0..3 {
        for name in ["f/one", "f/two"] {
            let body = svc.must_acquire(name, "o", 60000).await;
            let token = body["fencing_token"].as_u64().unwrap();
            assert!(token > last, "round {round}: {token} after {last}");
            assert!(svc.validate(name, token).await);
            assert!(!svc.validate(name, token + 1).await);
            let (status, _) = svc.release(name, body["lease_id"].as_str().unwrap()).await;
            assert_eq!(status, StatusCode::OK);
            assert!(
                !svc.validate(name, token).await,
                "a released lock's token is not current"
            );
            last = token;
        }
    }
    let short = svc.must_acquire("f/short", "o", 150).await;
    let token = short["fencing_token"].as_u64().unwrap();
    assert!(svc.validate("f/short", token).await);
    eventually(Duration::from_secs(5), "the lease to run out", || async {
        !svc.validate("f/short", token).await
    })
    .await;
    let next = svc.must_acquire("f/short", "p", 60000).await;
    assert!(next["fencing_token"].as_u64().unwrap() > token);
    assert!(!svc.validate("f/short", token).await);
}

async fn an_expired_lease_is_taken_over_lazily(svc: Service) {
    let first = svc.must_acquire("lazy", "a", 150).await;
    eventually(Duration::from_secs(5), "state expired", || async {
        svc.info("lazy").await["state"] == "expired"
    })
    .await;
    let info = svc.info("lazy").await;
    assert_eq!(
        info["owner"], "a",
        "an expired lock still shows its last owner"
    );
    assert_eq!(info["remaining_ms"], 0);
    let (_, asked) = svc.get("/v1/locks/lazy?owner=a").await;
    assert_eq!(asked["is_owner"], false);

    // Nobody has taken it: the old lease can still be renewed (lazy expiry, as in Helix).
    let lease = first["lease_id"].as_str().unwrap();
    let (status, renewed) = svc
        .renew("lazy", json!({"lease_id": lease, "lease_ms": 150}))
        .await;
    assert_eq!(status, StatusCode::OK, "{renewed}");
    assert_eq!(renewed["lock"]["state"], "held");
    eventually(Duration::from_secs(5), "state expired again", || async {
        svc.info("lazy").await["state"] == "expired"
    })
    .await;

    let second = svc.must_acquire("lazy", "b", 60000).await;
    assert!(second["fencing_token"].as_u64() > first["fencing_token"].as_u64());
    let (status, refused) = svc.renew("lazy", json!({"lease_id": lease})).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(refused["error"]["code"], "not_owner");
    assert_eq!(refused["lock"]["owner"], "b");
}

async fn renew_extends_and_may_change_the_lease(svc: Service) {
    let body = svc.must_acquire("renew", "a", 5000).await;
    let lease = body["lease_id"].as_str().unwrap();
    let (status, renewed) = svc
        .renew("renew", json!({"lease_id": lease, "lease_ms": 90000}))
        .await;
    assert_eq!(status, StatusCode::OK, "{renewed}");
    assert_eq!(renewed["lock"]["lease_ms"], 90000);
    assert!(renewed["lock"]["remaining_ms"].as_u64().unwrap() > 80000);
    assert_eq!(renewed["lock"]["fencing_token"], body["fencing_token"]);
    let (status, again) = svc.renew("renew", json!({"lease_id": lease})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        again["lock"]["lease_ms"], 90000,
        "renew without lease_ms keeps the lease's own length"
    );
    let (status, stranger) = svc
        .renew(
            "renew",
            json!({"lease_id": uuid::Uuid::new_v4().to_string()}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(stranger["error"]["code"], "not_owner");
    assert_eq!(stranger["lock"]["owner"], "a");
}

async fn release_rules(svc: Service) {
    let stranger = uuid::Uuid::new_v4().to_string();
    let (status, free) = svc.release("rel", &stranger).await;
    assert_eq!(status, StatusCode::OK, "releasing a free lock is a success");
    assert_eq!(free["released"], true);

    let held = svc.must_acquire("rel", "a", 60000).await;
    let (status, refused) = svc.release("rel", &stranger).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(refused["error"]["code"], "not_owner");
    assert_eq!(refused["lock"]["owner"], "a");
    assert_eq!(
        svc.info("rel").await["state"],
        "held",
        "a refused release changes nothing"
    );

    let (status, released) = svc.release("rel", held["lease_id"].as_str().unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(released["lock"]["state"], "free");
    assert_eq!(svc.info("rel").await["state"], "free");

    svc.must_acquire("rel", "b", 150).await;
    eventually(Duration::from_secs(5), "expiry", || async {
        svc.info("rel").await["state"] == "expired"
    })
    .await;
    let (status, _) = svc.release("rel", &stranger).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "releasing an expired lock is a success"
    );
}

async fn reacquire_with_the_lease_keeps_lease_and_token(svc: Service) {
    let first = svc.must_acquire("re", "a", 5000).await;
    let lease = first["lease_id"].as_str().unwrap();
    let (status, again) = svc
        .acquire("re", json!({"owner": "a", "lease_ms": 70000, "message": "phase 2", "priority": 3, "lease_id": lease}))
        .await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["lease_id"], lease);
    assert_eq!(again["fencing_token"], first["fencing_token"]);
    assert_eq!(again["lock"]["message"], "phase 2");
    assert_eq!(again["lock"]["priority"], 3);
    assert_eq!(again["lock"]["lease_ms"], 70000);
    assert_eq!(again["lock"]["acquired_at"], first["lock"]["acquired_at"]);

    let (status, _) = svc
        .acquire("re", json!({"owner": "a", "lease_ms": 1000}))
        .await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "the owner string alone is not the lease"
    );
}

async fn a_retried_request_id_gets_the_same_outcome(svc: Service) {
    let body = json!({"owner": "a", "lease_ms": 60000, "request_id": "req-1"});
    let (s1, first) = svc.acquire("idem", body.clone()).await;
    let (s2, second) = svc.acquire("idem", body.clone()).await;
    assert_eq!((s1, s2), (StatusCode::OK, StatusCode::OK));
    assert_eq!(first["lease_id"], second["lease_id"]);
    assert_eq!(first["fencing_token"], second["fencing_token"]);

    let (status, reused) = svc
        .acquire(
            "idem",
            json!({"owner": "a", "lease_ms": 5, "request_id": "req-1"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(reused["error"]["code"], "invalid_request");

    let refused_body = json!({"owner": "b", "lease_ms": 60000, "request_id": "req-2"});
    let (s3, _) = svc.acquire("idem", refused_body.clone()).await;
    let (status, _) = svc
        .release("idem", first["lease_id"].as_str().unwrap())
        .await;
    assert_eq!(status, StatusCode::OK);
    let (s4, again) = svc.acquire("idem", refused_body).await;
    assert_eq!(
        (s3, s4),
        (StatusCode::CONFLICT, StatusCode::CONFLICT),
        "{again}"
    );
}

async fn a_never_used_lock_reads_as_free(svc: Service) {
    let info = svc.info("never/used").await;
    assert_eq!(
        info,
        json!({"name": "never/used", "state": "free", "owner": null, "message": "", "priority": 0,
               "lease_ms": null, "acquired_at": null, "expires_at": null, "remaining_ms": null,
               "cleanup_ms": 0, "waiting_ms": null, "forceful": false, "fencing_token": null,
               "requestor": null, "cleanup_remaining_ms": null, "waiters": 0})
    );
}

async fn listing_pages_through_held_and_expired_locks_in_name_order(svc: Service) {
    for name in ["ls/b", "ls/a", "ls/a/x", "ls/a-z", "other/x"] {
        svc.must_acquire(name, "o", 60000).await;
    }
    let released = svc.must_acquire("ls/c", "o", 60000).await;
    svc.release("ls/c", released["lease_id"].as_str().unwrap())
        .await;
    svc.must_acquire("ls/d", "o", 100).await;
    eventually(Duration::from_secs(5), "ls/d to expire", || async {
        svc.info("ls/d").await["state"] == "expired"
    })
    .await;

    let mut names = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            None => "/v1/locks?prefix=ls/&limit=2".to_string(),
            Some(c) => format!("/v1/locks?prefix=ls/&limit=2&cursor={c}"),
        };
        let (status, page) = svc.get(&path).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        let locks = page["locks"].as_array().unwrap();
        assert!(locks.len() <= 2);
        names.extend(locks.iter().map(|l| l["name"].as_str().unwrap().to_owned()));
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(names, ["ls/a", "ls/a/x", "ls/a-z", "ls/b", "ls/d"]);
    // A cursor is a position in name order: any lock name, listed or never used.
    for (cursor, after) in [
        ("ls/a0", vec!["ls/b", "ls/d"]),
        ("ls/a/m", vec!["ls/a/x", "ls/a-z", "ls/b", "ls/d"]),
    ] {
        let path = format!("/v1/locks?prefix=ls/&cursor={cursor}");
        let (status, page) = svc.get(&path).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        let listed: Vec<&str> = page["locks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["name"].as_str().unwrap())
            .collect();
        assert_eq!(listed, after, "after {cursor}");
    }
    let (_, all) = svc.get("/v1/locks").await;
    assert_eq!(all["locks"].as_array().unwrap().len(), 6);
    assert_eq!(all["next_cursor"], Value::Null);
}

/// A listing shows what `GET /v1/locks/{name}` shows of each lock's queue: its waiters and
/// its live requestor (it once showed 0 and null for every lock).
async fn a_listing_shows_each_locks_waiters_and_live_requestor(svc: Service) {
    svc.must_acquire("lq/quiet", "nobody-waits", 60_000).await;
    let holder = json!({"owner": "holder", "lease_ms": 60_000, "cleanup_ms": 60_000});
    let (status, held) = svc.acquire("lq/busy", holder).await;
    assert_eq!(status, StatusCode::OK, "{held}");
    let svc = std::sync::Arc::new(svc);
    let waiting = |body: Value| {
        let svc = svc.clone();
        tokio::spawn(async move { svc.acquire("lq/busy", body).await })
    };
    let queued = waiting(json!({"owner": "next", "lease_ms": 60_000, "waiting_ms": 30_000}));
    svc.wait_for_waiters("lq/busy", 1).await;
    let boss = waiting(json!({"owner": "boss", "lease_ms": 60_000, "priority": 5,
                              "waiting_ms": 30_000}));
    svc.wait_for_waiters("lq/busy", 2).await;
    // Boss joins the queue first and then registers as the requestor: a second write.
    eventually(
        Duration::from_secs(10),
        "boss registered as the requestor",
        || async { svc.info("lq/busy").await["requestor"]["owner"] == "boss" },
    )
    .await;

    let (status, page) = svc.get("/v1/locks?prefix=lq/").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let single = svc.info("lq/busy").await;
    let locks = page["locks"].as_array().unwrap();
    let names: Vec<&str> = locks.iter().map(|l| l["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["lq/busy", "lq/quiet"]);
    let (busy, quiet) = (&locks[0], &locks[1]);
    assert_eq!(busy["waiters"], 2, "{busy}");
    assert_eq!(busy["requestor"]["owner"], "boss", "{busy}");
    assert_eq!(busy["requestor"], single["requestor"]);
    assert_eq!(busy["waiters"], single["waiters"]);
    assert_eq!(quiet["waiters"], 0, "{quiet}");
    assert_eq!(quiet["requestor"], Value::Null, "{quiet}");
    queued.abort();
    boss.abort();
}
