//! The semaphore routes against `openapi.yaml`: the acquire's fields, and every answer of
//! every route (successes and refusals).

use crate::common;
use crate::contract::{check_response, spec};

use std::collections::BTreeSet;

use common::Service;
use lockwarden::api::dto::ACQUIRE_FIELDS;
use reqwest::StatusCode;
use serde_json::json;

#[test]
fn acquire_fields_are_a_locks_and_the_limit() {
    let spec = spec();
    let acquire = &spec["components"]["schemas"]["SemaphoreAcquireRequest"];
    let fields: BTreeSet<&str> = acquire["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut expected: BTreeSet<&str> = ACQUIRE_FIELDS.into_iter().collect();
    expected.insert("limit");
    assert_eq!(fields, expected);
    assert_eq!(acquire["additionalProperties"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_semaphore_answers_match_their_schemas() {
    let spec = spec();
    let svc = Service::zk_with(|args| args.admin_token = Some("root".into())).await;
    let at = |action: &str| format!("/v1/semaphores/c%2Fs/{action}");
    let route = |action: &str| format!("/v1/semaphores/{{name}}/{action}");
    let body = |owner: &str, limit: u32| json!({"owner": owner, "limit": limit, "lease_ms": 60000});
    let (s, first) = svc.post(&at("acquire"), body("a", 1)).await;
    assert_eq!(s, StatusCode::OK, "{first}");
    check_response(&spec, "post", &route("acquire"), s, &first);
    for refused in [body("b", 1), body("b", 2)] {
        let (s, answer) = svc.post(&at("acquire"), refused).await;
        assert_eq!(s, StatusCode::CONFLICT, "{answer}");
        check_response(&spec, "post", &route("acquire"), s, &answer);
    }
    let (s, bad) = svc.post(&at("acquire"), json!({"owner": "b"})).await;
    check_response(&spec, "post", &route("acquire"), s, &bad);
    let lease = first["lease_id"].clone();
    let stranger = uuid::Uuid::new_v4().to_string();
    for (action, body) in [
        ("renew", json!({"lease_id": lease, "lease_ms": 30000})),
        ("renew", json!({"lease_id": stranger})),
        ("release", json!({"lease_id": stranger})),
    ] {
        let (s, body) = svc.post(&at(action), body).await;
        check_response(&spec, "post", &route(action), s, &body);
    }
    let (s, semaphore) = svc.get("/v1/semaphores/c%2Fs").await;
    check_response(&spec, "get", "/v1/semaphores/{name}", s, &semaphore);
    let (s, listed) = svc.get("/v1/semaphores?limit=1").await;
    check_response(&spec, "get", "/v1/semaphores", s, &listed);
    let token = first["fencing_token"].as_u64().unwrap();
    let (s, valid) = svc
        .get(&format!("{}?fencing_token={token}", at("validate")))
        .await;
    check_response(&spec, "get", &route("validate"), s, &valid);
    assert_eq!(valid["current"], true);
    let (s, released) = svc.post(&at("release"), json!({"lease_id": lease})).await;
    check_response(&spec, "post", &route("release"), s, &released);
    svc.post(&at("acquire"), body("c", 1)).await;
    let (s, forced) = svc
        .send("DELETE", "/v1/semaphores/c%2Fs", None, Some("root"))
        .await;
    assert_eq!(s, StatusCode::OK, "{forced}");
    check_response(&spec, "delete", "/v1/semaphores/{name}", s, &forced);
    let (s, free) = svc.get("/v1/semaphores/c%2Fs").await;
    check_response(&spec, "get", "/v1/semaphores/{name}", s, &free);
}
