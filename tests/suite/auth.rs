//! Credentials: API tokens, the admin role, the SRE override priority and force release.

use crate::common;

use common::Service;
use reqwest::StatusCode;
use serde_json::json;

const ADMIN: &str = "admin-secret";

async fn open_service() -> Service {
    Service::zk_with(|args| args.admin_token = Some(ADMIN.into())).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_override_priority_needs_the_admin_token() {
    let svc = open_service().await;
    let body = json!({"owner": "sre", "lease_ms": 60000, "priority": 2147483647});
    let (status, reply) = svc
        .send("POST", "/v1/locks/o/acquire", Some(body.clone()), None)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(reply["error"]["code"], "forbidden");
    let (status, reply) = svc
        .send(
            "POST",
            "/v1/locks/o/acquire",
            Some(body.clone()),
            Some("guess"),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "an unknown token is refused: {reply}"
    );
    assert_eq!(reply["error"]["code"], "unauthorized");
    let (status, reply) = svc
        .send("POST", "/v1/locks/o/acquire", Some(body), Some(ADMIN))
        .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(reply["lock"]["priority"], 2147483647);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_release_is_admin_only_and_frees_the_lock() {
    let svc = open_service().await;
    let held = svc.must_acquire("stuck", "crashed-job", 3_600_000).await;
    let (status, reply) = svc.send("DELETE", "/v1/locks/stuck", None, None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(reply["error"]["code"], "forbidden");
    assert_eq!(svc.info("stuck").await["state"], "held");
    let (status, reply) = svc
        .send("DELETE", "/v1/locks/stuck", None, Some(ADMIN))
        .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(reply["released"], true);
    assert_eq!(reply["lock"]["state"], "free");
    assert!(
        !svc.validate("stuck", held["fencing_token"].as_u64().unwrap())
            .await
    );
    let (status, _) = svc
        .send("DELETE", "/v1/locks/stuck", None, Some(ADMIN))
        .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "force-releasing a free lock is a success"
    );
    let (status, _) = svc
        .renew("stuck", json!({"lease_id": held["lease_id"]}))
        .await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "the revoked lease no longer renews"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_admin_token_configured_nobody_is_admin() {
    let svc = Service::zk().await;
    let (status, _) = svc.send("DELETE", "/v1/locks/x", None, None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = svc
        .send("DELETE", "/v1/locks/x", None, Some("anything"))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_tokens_guard_every_v1_route_but_not_health_or_the_spec() {
    let svc = Service::zk_with(|args| {
        args.api_tokens = vec!["t1".into(), "t2".into()];
        args.admin_token = Some(ADMIN.into());
    })
    .await;
    let lease = uuid::Uuid::new_v4().to_string();
    let routes = [
        ("GET", "/v1/locks".to_string(), None),
        ("GET", "/v1/locks/a".to_string(), None),
        (
            "GET",
            "/v1/locks/a/validate?fencing_token=1".to_string(),
            None,
        ),
        (
            "POST",
            "/v1/locks/a/acquire".to_string(),
            Some(json!({"owner": "o", "lease_ms": 1000})),
        ),
        (
            "POST",
            "/v1/locks/a/renew".to_string(),
            Some(json!({"lease_id": lease})),
        ),
        (
            "POST",
            "/v1/locks/a/release".to_string(),
            Some(json!({"lease_id": lease})),
        ),
        ("DELETE", "/v1/locks/a".to_string(), None),
    ];
    for (method, path, body) in &routes {
        for token in [None, Some("t3"), Some("")] {
            let (status, reply) = svc.send(method, path, body.clone(), token).await;
            assert_eq!(
                status,
                StatusCode::UNAUTHORIZED,
                "{method} {path} with {token:?}: {reply}"
            );
            assert_eq!(reply["error"]["code"], "unauthorized");
        }
        let (status, reply) = svc.send(method, path, body.clone(), Some(ADMIN)).await;
        assert!(
            status.is_success() || status == StatusCode::CONFLICT,
            "admin on {method} {path}: {reply}"
        );
    }
    let (status, _) = svc.send("GET", "/v1/locks/a", None, Some("t2")).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = svc.send("DELETE", "/v1/locks/a", None, Some("t1")).await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "an API token is not the admin role"
    );
    for path in ["/healthz", "/readyz", "/openapi.yaml"] {
        let response = svc
            .http
            .get(format!("{}{path}", svc.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{path}");
    }
}
