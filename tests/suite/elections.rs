//! Leader election over HTTP, on both stores: a campaign wins or is refused, a resignation
//! hands over in one write, a proclaim keeps the term, leadership is never renewed once its
//! lease has ended (I17), a higher candidate preempts, the stream tells `elected`,
//! `proclaimed` and `no_leader` (a lease's end within a second, with nobody calling), a
//! retried campaign gets the same win, and a candidate that disconnects is never elected.

use crate::common;

use std::time::{Duration, SystemTime};

use common::sse::SseStream;
use common::{encode, Service};
use reqwest::StatusCode;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(10);

async fn campaign(svc: &Service, name: &str, body: Value) -> (StatusCode, Value) {
    svc.post(&format!("/v1/elections/{}/campaign", encode(name)), body)
        .await
}

async fn must_win(svc: &Service, name: &str, candidate: &str, value: &str) -> Value {
    let (status, won) = campaign(
        svc,
        name,
        json!({"candidate": candidate, "value": value, "lease_ms": 60_000}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{won}");
    assert_eq!(won["elected"], true);
    won
}

async fn act(svc: &Service, name: &str, action: &str, body: Value) -> (StatusCode, Value) {
    svc.post(&format!("/v1/elections/{}/{action}", encode(name)), body)
        .await
}

async fn election(svc: &Service, name: &str) -> Value {
    let (status, body) = svc.get(&format!("/v1/elections/{}", encode(name))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

fn millis_of(rfc3339: &str) -> u128 {
    let at = time::OffsetDateTime::parse(rfc3339, &time::format_description::well_known::Rfc3339)
        .unwrap();
    (at.unix_timestamp_nanos() / 1_000_000) as u128
}

fn now_millis() -> u128 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

async fn a_campaign_wins_and_the_next_is_told_who_leads(svc: Service) {
    let won = must_win(&svc, "jobs/scheduler", "node-1", "10.0.0.1:80").await;
    let term = won["term"].as_u64().unwrap();
    let leader = &won["election"]["leader"];
    assert_eq!(leader["candidate"], "node-1");
    assert_eq!(leader["value"], "10.0.0.1:80");
    assert_eq!(leader["term"], term);
    let (status, refused) = campaign(
        &svc,
        "jobs/scheduler",
        json!({"candidate": "node-2", "lease_ms": 60_000}),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["error"]["code"], "leader_exists");
    assert_eq!(refused["elected"], false);
    assert_eq!(refused["election"]["leader"]["candidate"], "node-1");
    assert!(refused.get("lock").is_none(), "{refused}");
    let seen = election(&svc, "jobs/scheduler").await;
    assert_eq!(seen["leader"]["term"], term);
    assert_eq!(seen["candidates"], 0);
    let current = |t: u64| {
        let svc = &svc;
        async move {
            let path = format!("/v1/elections/jobs%2Fscheduler/validate?term={t}");
            svc.get(&path).await.1["current"].clone()
        }
    };
    assert_eq!(current(term).await, true);
    assert_eq!(current(term + 1).await, false);
    // A lock of the same name is another thing altogether.
    svc.must_acquire("jobs/scheduler", "someone", 60_000).await;
    let (status, listed) = svc.get("/v1/elections?prefix=jobs").await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert_eq!(listed["elections"][0]["name"], "jobs/scheduler");
    assert_eq!(listed["elections"].as_array().unwrap().len(), 1);
}

async fn a_resignation_elects_the_waiting_candidate_in_one_write(svc: Service) {
    let won = must_win(&svc, "e", "first", "a").await;
    let waiting = {
        let request = svc
            .http
            .post(format!("{}/v1/elections/e/campaign", svc.base))
            .json(&json!({"candidate": "second", "value": "b", "lease_ms": 60_000, "waiting_ms": 30_000}));
        tokio::spawn(async move { request.send().await.unwrap().json::<Value>().await.unwrap() })
    };
    common::eventually(WAIT, "a candidate waits", || async {
        election(&svc, "e").await["candidates"] == 1
    })
    .await;
    let (status, resigned) = act(&svc, "e", "resign", json!({"lease_id": won["lease_id"]})).await;
    assert_eq!(status, StatusCode::OK, "{resigned}");
    assert_eq!(resigned["resigned"], true);
    assert_eq!(resigned["election"]["leader"]["candidate"], "second");
    let second = waiting.await.unwrap();
    assert_eq!(second["elected"], true, "{second}");
    assert!(second["term"].as_u64() > won["term"].as_u64(), "terms grow");
    // The old leader's lease leads nothing now.
    let (status, not) = act(&svc, "e", "resign", json!({"lease_id": won["lease_id"]})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{not}");
    assert_eq!(not["error"]["code"], "not_leader");
    assert_eq!(not["election"]["leader"]["candidate"], "second");
}

async fn a_proclaim_changes_the_value_and_keeps_the_term(svc: Service) {
    let won = must_win(&svc, "p", "leader", "old").await;
    let lease = won["lease_id"].clone();
    let (status, said) = act(
        &svc,
        "p",
        "proclaim",
        json!({"lease_id": lease, "value": "new"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{said}");
    assert_eq!(said["election"]["leader"]["value"], "new");
    assert_eq!(said["election"]["leader"]["term"], won["term"]);
    let stranger = json!({"lease_id": uuid::Uuid::new_v4().to_string(), "value": "x"});
    let (status, refused) = act(&svc, "p", "proclaim", stranger).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["error"]["code"], "not_leader");
    let long = json!({"lease_id": lease, "value": "v".repeat(4097)});
    let (status, bad) = act(&svc, "p", "proclaim", long).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
    let (status, renewed) = act(
        &svc,
        "p",
        "renew",
        json!({"lease_id": lease, "lease_ms": 5000}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{renewed}");
    assert_eq!(
        renewed["election"]["leader"]["value"], "new",
        "a renewal keeps it"
    );
}

async fn leadership_is_not_renewed_once_its_lease_has_ended(svc: Service) {
    let (status, won) = campaign(&svc, "s", json!({"candidate": "brief", "lease_ms": 300})).await;
    assert_eq!(status, StatusCode::OK, "{won}");
    let ends = millis_of(won["election"]["leader"]["expires_at"].as_str().unwrap());
    common::eventually(WAIT, "the lease ends", || async { now_millis() > ends }).await;
    assert_eq!(election(&svc, "s").await["leader"], Value::Null);
    for (action, body) in [
        ("renew", json!({"lease_id": won["lease_id"]})),
        (
            "proclaim",
            json!({"lease_id": won["lease_id"], "value": "late"}),
        ),
    ] {
        let (status, refused) = act(&svc, "s", action, body).await;
        assert_eq!(status, StatusCode::CONFLICT, "{action}: {refused}");
        assert_eq!(refused["error"]["code"], "not_leader");
    }
    // A lock's lease, by contrast, is renewed lazily.
    let held = svc
        .acquire("s", json!({"owner": "brief", "lease_ms": 300}))
        .await
        .1;
    let ends = millis_of(held["lock"]["expires_at"].as_str().unwrap());
    common::eventually(WAIT, "the lock's lease ends", || async {
        now_millis() > ends
    })
    .await;
    let (status, _) = svc.renew("s", json!({"lease_id": held["lease_id"]})).await;
    assert_eq!(status, StatusCode::OK);
}

async fn a_higher_candidate_preempts_a_leader_without_cleanup(svc: Service) {
    let won = must_win(&svc, "h", "low", "l").await;
    let (status, took) = campaign(
        &svc,
        "h",
        json!({"candidate": "high", "value": "h", "lease_ms": 60_000, "priority": 5, "waiting_ms": 10_000}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{took}");
    assert_eq!(took["election"]["leader"]["candidate"], "high");
    assert!(took["term"].as_u64() > won["term"].as_u64());
    let (status, refused) = act(&svc, "h", "renew", json!({"lease_id": won["lease_id"]})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["error"]["code"], "not_leader");
}

async fn the_stream_tells_elected_proclaimed_and_no_leader(svc: Service) {
    let url = format!("{}/v1/elections/o/events", svc.base);
    let mut stream = SseStream::open(&url, None).await;
    let snapshot = stream.next_of("snapshot", WAIT).await;
    assert_eq!(snapshot.data["election"]["leader"], Value::Null);
    let won = must_win(&svc, "o", "one", "v1").await;
    let elected = stream.next_event(WAIT).await;
    assert_eq!(elected.event, "elected");
    assert_eq!(elected.data["election"]["leader"]["term"], won["term"]);
    let lease = won["lease_id"].clone();
    act(&svc, "o", "renew", json!({"lease_id": lease})).await;
    act(
        &svc,
        "o",
        "proclaim",
        json!({"lease_id": lease, "value": "v2"}),
    )
    .await;
    let proclaimed = stream.next_event(WAIT).await;
    assert_eq!(
        proclaimed.event, "proclaimed",
        "a plain renewal says nothing"
    );
    assert_eq!(proclaimed.data["election"]["leader"]["value"], "v2");
    act(&svc, "o", "resign", json!({"lease_id": lease})).await;
    let gone = stream.next_event(WAIT).await;
    assert_eq!(gone.event, "no_leader");
    assert_eq!(gone.data["election"]["leader"], Value::Null);

    // A lease that runs out with nobody calling: `no_leader` within a second of its end.
    let (_, brief) = campaign(&svc, "o", json!({"candidate": "two", "lease_ms": 500})).await;
    assert_eq!(stream.next_event(WAIT).await.event, "elected");
    let ends = millis_of(brief["election"]["leader"]["expires_at"].as_str().unwrap());
    let ran_out = stream.next_event(WAIT).await;
    let told = now_millis();
    println!(
        "no_leader {} ms after the lease's end",
        told as i128 - ends as i128
    );
    assert_eq!(ran_out.event, "no_leader", "{:?}", ran_out.data);
    assert!(
        told >= ends && told <= ends + 1000,
        "no_leader {} ms after the lease's end",
        told as i128 - ends as i128
    );
}

async fn bad_campaigns_are_told_what_is_wrong(svc: Service) {
    for (body, says) in [
        (json!({"candidate": "NONE", "lease_ms": 1000}), "candidate"),
        (
            json!({"candidate": "c", "lease_ms": 1000, "value": "v".repeat(4097)}),
            "4096",
        ),
        (json!({"candidate": "c", "lease_ms": 0}), "lease_ms"),
        (
            json!({"candidate": "c", "lease_ms": 1000, "message": "m"}),
            "message",
        ),
    ] {
        let (status, refused) = campaign(&svc, "b", body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {refused}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{body}: {message}");
    }
    let (status, bad) = svc.get("/v1/elections/b/validate").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
}

async fn a_campaign_retried_with_its_request_id_gets_the_same_win(svc: Service) {
    let body = json!({"candidate": "c", "lease_ms": 60_000, "request_id": "boot-7"});
    let (status, first) = campaign(&svc, "r", body.clone()).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let (status, again) = campaign(&svc, "r", body).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(
        (&again["lease_id"], &again["term"]),
        (&first["lease_id"], &first["term"]),
        "a retry is answered with the same leadership, not a second one"
    );
    let other = json!({"candidate": "c", "lease_ms": 60_000, "value": "x", "request_id": "boot-7"});
    let (status, reused) = campaign(&svc, "r", other).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{reused}");
}

async fn a_candidate_that_disconnects_while_waiting_is_never_elected(svc: Service) {
    let won = must_win(&svc, "d", "leader", "v").await;
    let impatient = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let gone = impatient
        .post(format!("{}/v1/elections/d/campaign", svc.base))
        .json(&json!({"candidate": "leaver", "lease_ms": 60_000, "waiting_ms": 10_000}))
        .send()
        .await;
    assert!(gone.is_err());
    common::eventually(WAIT, "the candidate leaves the queue", || async {
        election(&svc, "d").await["candidates"] == 0
    })
    .await;
    let (_, resigned) = act(&svc, "d", "resign", json!({"lease_id": won["lease_id"]})).await;
    assert_eq!(
        resigned["election"]["leader"],
        Value::Null,
        "nobody is elected after they left: {resigned}"
    );
}

/// The graceful hand-over to a preferred leader: the leader is asked to clean up by a signed
/// `election.cleanup_requested`, and the preferred candidate is elected when it resigns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preferred_candidate_asks_the_leader_to_hand_over() {
    let svc = Service::zk_with(|args| {
        args.webhook_secret = Some(common::receiver::SECRET.into());
        args.webhook_allow_private = true;
    })
    .await;
    let hook = common::receiver::Receiver::start().await;
    let leader = json!({"candidate": "old", "lease_ms": 60_000, "cleanup_ms": 30_000, "notify_url": hook.url});
    let (status, won) = campaign(&svc, "g", leader).await;
    assert_eq!(status, StatusCode::OK, "{won}");
    let preferred = {
        let request = svc.http.post(format!("{}/v1/elections/g/campaign", svc.base)).json(
            &json!({"candidate": "new", "lease_ms": 60_000, "priority": 10, "waiting_ms": 30_000}),
        );
        tokio::spawn(async move { request.send().await.unwrap().json::<Value>().await.unwrap() })
    };
    let asked = hook.wait_for("election.cleanup_requested", 1, WAIT).await;
    assert!(asked[0].signature_ok);
    assert_eq!(asked[0].body["data"]["election"], "g");
    assert_eq!(asked[0].body["data"]["requestor"]["owner"], "new");
    assert!(asked[0].body["data"].get("lock").is_none());
    let (status, resigned) = act(&svc, "g", "resign", json!({"lease_id": won["lease_id"]})).await;
    assert_eq!(status, StatusCode::OK, "{resigned}");
    let elected = preferred.await.unwrap();
    assert_eq!(elected["elected"], true, "{elected}");
    assert_eq!(elected["election"]["leader"]["candidate"], "new");
}

on_both_stores!(
    a_campaign_wins_and_the_next_is_told_who_leads,
    a_resignation_elects_the_waiting_candidate_in_one_write,
    a_proclaim_changes_the_value_and_keeps_the_term,
    leadership_is_not_renewed_once_its_lease_has_ended,
    a_higher_candidate_preempts_a_leader_without_cleanup,
    the_stream_tells_elected_proclaimed_and_no_leader,
    bad_campaigns_are_told_what_is_wrong,
    a_campaign_retried_with_its_request_id_gets_the_same_win,
    a_candidate_that_disconnects_while_waiting_is_never_elected,
);
