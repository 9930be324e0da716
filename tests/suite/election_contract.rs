//! The election routes against `openapi.yaml`: the campaign's fields, every answer of every
//! route (successes and refusals), and the stream's events, resumed too.

use crate::common;
use crate::contract::{check_response, spec, Followed};

use std::collections::BTreeSet;

use common::Service;
use lockwarden::api::election_dto::CAMPAIGN_FIELDS;
use reqwest::StatusCode;
use serde_json::json;

#[test]
fn campaign_fields_match() {
    let spec = spec();
    let campaign = &spec["components"]["schemas"]["CampaignRequest"];
    let fields: BTreeSet<&str> = campaign["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(fields, CAMPAIGN_FIELDS.into_iter().collect());
    assert_eq!(campaign["additionalProperties"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_election_answers_match_their_schemas() {
    let spec = spec();
    let svc = Service::zk().await;
    let at = |action: &str| format!("/v1/elections/c%2Fe/{action}");
    let route = |action: &str| format!("/v1/elections/{{name}}/{action}");
    let (s, won) = svc
        .post(
            &at("campaign"),
            json!({"candidate": "a", "value": "v", "lease_ms": 60000}),
        )
        .await;
    check_response(&spec, "post", &route("campaign"), s, &won);
    assert_eq!(s, StatusCode::OK);
    let (s, refused) = svc
        .post(
            &at("campaign"),
            json!({"candidate": "b", "lease_ms": 60000}),
        )
        .await;
    assert_eq!(s, StatusCode::CONFLICT);
    check_response(&spec, "post", &route("campaign"), s, &refused);
    let (s, bad) = svc.post(&at("campaign"), json!({"candidate": "b"})).await;
    check_response(&spec, "post", &route("campaign"), s, &bad);
    let lease = won["lease_id"].clone();
    let stranger = uuid::Uuid::new_v4().to_string();
    for (action, body) in [
        ("proclaim", json!({"lease_id": lease, "value": "w"})),
        ("proclaim", json!({"lease_id": stranger, "value": "w"})),
        ("renew", json!({"lease_id": lease, "lease_ms": 30000})),
        ("renew", json!({"lease_id": stranger})),
        ("resign", json!({"lease_id": stranger})),
    ] {
        let (s, body) = svc.post(&at(action), body).await;
        check_response(&spec, "post", &route(action), s, &body);
    }
    let (s, election) = svc.get("/v1/elections/c%2Fe").await;
    check_response(&spec, "get", "/v1/elections/{name}", s, &election);
    assert!(election["leader"].is_object(), "{election}");
    let (s, listed) = svc.get("/v1/elections?limit=1").await;
    check_response(&spec, "get", "/v1/elections", s, &listed);
    let term = won["term"].as_u64().unwrap();
    let (s, valid) = svc.get(&format!("{}?term={term}", at("validate"))).await;
    check_response(&spec, "get", &route("validate"), s, &valid);
    assert_eq!(valid["current"], true);
    let (s, resigned) = svc.post(&at("resign"), json!({"lease_id": lease})).await;
    check_response(&spec, "post", &route("resign"), s, &resigned);
    let (s, free) = svc.get("/v1/elections/c%2Fe").await;
    check_response(&spec, "get", "/v1/elections/{name}", s, &free);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn election_events_match_their_item_schema() {
    let spec = spec();
    let svc = Service::zk().await;
    let path = "/v1/elections/{name}/events";
    let url = format!("{}/v1/elections/o/events", svc.base);
    let mut stream = Followed::open(&spec, path, &url, None, "election stream").await;
    assert_eq!(stream.until("snapshot").await.len(), 1);
    let (s, won) = svc
        .post(
            "/v1/elections/o/campaign",
            json!({"candidate": "a", "value": "v", "lease_ms": 60000}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{won}");
    let lease = won["lease_id"].clone();
    svc.post(
        "/v1/elections/o/proclaim",
        json!({"lease_id": lease, "value": "w"}),
    )
    .await;
    svc.post("/v1/elections/o/resign", json!({"lease_id": lease}))
        .await;
    let told = stream.until("no_leader").await;
    let kinds: Vec<&str> = told.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(kinds, ["elected", "proclaimed", "no_leader"]);
    // Resumed after its first change, the stream replays what followed.
    let after = Some(told[0].id.as_str());
    let mut resumed = Followed::open(&spec, path, &url, after, "resumed").await;
    let replayed = resumed.until("no_leader").await;
    let kinds: Vec<&str> = replayed.iter().map(|e| e.event.as_str()).collect();
    // A resumed stream knows no leader yet: the proclaim tells the leader as `elected`.
    assert_eq!(kinds, ["elected", "no_leader"], "{replayed:?}");
}
