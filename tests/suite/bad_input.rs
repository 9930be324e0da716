//! The bad-input table: every malformed request gets a clear 4xx in the contract's error
//! shape, and nothing reaches the store.

use crate::common;

use common::{zk, zk_client, znodes_under, Service};
use reqwest::StatusCode;
use serde_json::{json, Value};

fn assert_error(status: StatusCode, body: &Value, want: StatusCode, code: &str, case: &str) {
    assert_eq!(status, want, "{case}: {body}");
    assert_eq!(body["error"]["code"], code, "{case}: {body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{case}: {body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_lock_names_are_refused() {
    let svc = Service::zk().await;
    let long_part = "x".repeat(129);
    let long_name = vec!["y".repeat(100); 6].join("%2F");
    let many_parts = vec!["p"; 17].join("%2F");
    for name in [
        "a%2F%2Fb",
        "%2Fa",
        "a%2F",
        "a%2F..%2Fb",
        "a%20b",
        "%C3%A4",
        "%FF",
        "a%2Fb%3F",
        long_part.as_str(),
        long_name.as_str(),
        many_parts.as_str(),
    ] {
        for (method, path, body) in [
            (
                "POST",
                format!("/v1/locks/{name}/acquire"),
                Some(json!({"owner": "o", "lease_ms": 1000})),
            ),
            (
                "POST",
                format!("/v1/locks/{name}/release"),
                Some(json!({"lease_id": uuid::Uuid::new_v4().to_string()})),
            ),
            ("GET", format!("/v1/locks/{name}"), None),
            (
                "GET",
                format!("/v1/locks/{name}/validate?fencing_token=1"),
                None,
            ),
        ] {
            let (status, reply) = svc.send(method, &path, body, None).await;
            assert_error(
                status,
                &reply,
                StatusCode::BAD_REQUEST,
                "invalid_lock_name",
                &path,
            );
        }
    }
}

/// Sends raw bytes and reads the whole answer: URL-spec clients rewrite `.` and `..`
/// segments (even percent-encoded) before sending, and a client still writing a body the
/// server has already refused may fail with EPIPE before it reads the answer.
async fn raw_exchange(svc: &Service, request: &[u8]) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(svc.base.trim_start_matches("http://"))
        .await
        .unwrap();
    let _ = stream.write_all(request).await;
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer[9..12].parse().unwrap();
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

async fn raw_request_line(svc: &Service, method: &str, target: &str) -> (u16, Value) {
    let request = format!("{method} {target} HTTP/1.1\r\nhost: test\r\nconnection: close\r\ncontent-length: 0\r\n\r\n");
    raw_exchange(svc, request.as_bytes()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dot_segments_are_refused_as_lock_names() {
    let svc = Service::zk().await;
    for name in [".", "..", "%2E", "%2e%2E"] {
        let (status, body) = raw_request_line(&svc, "GET", &format!("/v1/locks/{name}")).await;
        assert_eq!(status, 400, "{name}: {body}");
        assert_eq!(body["error"]["code"], "invalid_lock_name");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_acquire_bodies_are_refused() {
    let svc = Service::zk().await;
    let ok = json!({"owner": "o", "lease_ms": 1000});
    let with = |field: &str, value: Value| {
        let mut body = ok.clone();
        body[field] = value;
        body
    };
    let cases = vec![
        ("missing owner", json!({"lease_ms": 1000})),
        ("missing lease_ms", json!({"owner": "o"})),
        ("empty owner", with("owner", json!(""))),
        ("owner NONE", with("owner", json!("NONE"))),
        ("owner too long", with("owner", json!("o".repeat(257)))),
        ("owner control char", with("owner", json!("a\u{7}b"))),
        ("owner not a string", with("owner", json!(5))),
        ("lease 0", with("lease_ms", json!(0))),
        ("lease negative", with("lease_ms", json!(-5))),
        ("lease over max", with("lease_ms", json!(86_400_001))),
        ("lease fraction", with("lease_ms", json!(1.5))),
        ("lease string", with("lease_ms", json!("1000"))),
        ("lease huge", with("lease_ms", json!(1e30))),
        ("message too long", with("message", json!("m".repeat(1025)))),
        ("message null", with("message", Value::Null)),
        ("priority negative", with("priority", json!(-1))),
        (
            "priority over INT_MAX",
            with("priority", json!(2_147_483_648_i64)),
        ),
        ("cleanup negative", with("cleanup_ms", json!(-1))),
        ("waiting negative", with("waiting_ms", json!(-1))),
        ("waiting over max", with("waiting_ms", json!(300_001))),
        ("forceful not bool", with("forceful", json!("yes"))),
        (
            "notify_url ftp",
            with("notify_url", json!("ftp://127.0.0.1/x")),
        ),
        ("notify_url garbage", with("notify_url", json!("not a url"))),
        (
            "notify_url credentials",
            with("notify_url", json!("http://u:p@127.0.0.1/x")),
        ),
        (
            "notify_url too long",
            with(
                "notify_url",
                json!(format!("http://h/{}", "a".repeat(2048))),
            ),
        ),
        ("request_id empty", with("request_id", json!(""))),
        (
            "request_id too long",
            with("request_id", json!("r".repeat(129))),
        ),
        ("lease_id not a uuid", with("lease_id", json!("nope"))),
        ("unknown field", with("lease", json!(1000))),
        ("array body", json!([1, 2])),
        ("null body", Value::Null),
    ];
    for (case, body) in cases {
        let (status, reply) = svc.acquire("bad", body).await;
        assert_error(
            status,
            &reply,
            StatusCode::BAD_REQUEST,
            "invalid_request",
            case,
        );
    }
    let zk = zk_client(zk::shared()).await;
    assert!(
        znodes_under(&zk, &format!("{}/locks", svc.root))
            .await
            .is_empty(),
        "no bad request wrote anything"
    );
    assert_eq!(svc.info("bad").await["state"], "free");
}

async fn raw(
    svc: &Service,
    path: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
) -> (StatusCode, Value) {
    let mut request = svc.http.post(format!("{}{path}", svc.base)).body(body);
    if let Some(ct) = content_type {
        request = request.header("content-type", ct);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    (
        status,
        response.json().await.expect("the error body is JSON"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bodies_and_content_types_are_refused() {
    let svc = Service::zk().await;
    let path = "/v1/locks/x/acquire";
    let (s, b) = raw(
        &svc,
        path,
        Some("application/json"),
        b"{\"owner\": ".to_vec(),
    )
    .await;
    assert_error(
        s,
        &b,
        StatusCode::BAD_REQUEST,
        "invalid_request",
        "truncated JSON",
    );
    let (s, b) = raw(&svc, path, Some("application/json"), b"".to_vec()).await;
    assert_error(
        s,
        &b,
        StatusCode::BAD_REQUEST,
        "invalid_request",
        "empty body",
    );
    let (s, b) = raw(&svc, path, Some("application/json"), vec![0xff, 0xfe]).await;
    assert_error(
        s,
        &b,
        StatusCode::BAD_REQUEST,
        "invalid_request",
        "not UTF-8",
    );
    let (s, b) = raw(
        &svc,
        path,
        Some("text/plain"),
        br#"{"owner":"o","lease_ms":1}"#.to_vec(),
    )
    .await;
    assert_error(
        s,
        &b,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        "text/plain",
    );
    let (s, b) = raw(&svc, path, None, br#"{"owner":"o","lease_ms":1}"#.to_vec()).await;
    assert_error(
        s,
        &b,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        "no content type",
    );
    let head = "POST /v1/locks/x/acquire HTTP/1.1\r\nhost: t\r\nconnection: close\r\ncontent-type: application/json\r\n";
    let declared = format!(
        "{head}content-length: {}\r\n\r\n{{\"owner\":\"o\"",
        70 * 1024
    );
    let (s, b) = raw_exchange(&svc, declared.as_bytes()).await;
    assert_eq!(s, 413, "{b}");
    assert_eq!(b["error"]["code"], "payload_too_large");
    let mut chunked = format!("{head}transfer-encoding: chunked\r\n\r\n").into_bytes();
    for _ in 0..70 {
        chunked.extend(format!("400\r\n{}\r\n", " ".repeat(1024)).as_bytes());
    }
    chunked.extend(b"0\r\n\r\n");
    let (s, b) = raw_exchange(&svc, &chunked).await;
    assert_eq!(s, 413, "a 70 KiB chunked body without a length: {b}");
    assert_eq!(b["error"]["code"], "payload_too_large");
    let (s, b) = raw(
        &svc,
        path,
        Some("application/json; charset=utf-8"),
        br#"{"owner":"o","lease_ms":1000}"#.to_vec(),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "a charset parameter is fine: {b}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_renew_release_validate_and_list_inputs_are_refused() {
    let svc = Service::zk().await;
    let lease = uuid::Uuid::new_v4().to_string();
    let cases: Vec<(&str, String, Option<Value>)> = vec![
        (
            "POST",
            "/v1/locks/x/renew".into(),
            Some(json!({"lease_id": lease, "lease_ms": 0})),
        ),
        (
            "POST",
            "/v1/locks/x/renew".into(),
            Some(json!({"lease_id": lease, "lease_ms": 86_400_001})),
        ),
        (
            "POST",
            "/v1/locks/x/renew".into(),
            Some(json!({"lease_id": "nope"})),
        ),
        ("POST", "/v1/locks/x/renew".into(), Some(json!({}))),
        ("POST", "/v1/locks/x/release".into(), Some(json!({}))),
        (
            "POST",
            "/v1/locks/x/release".into(),
            Some(json!({"lease_id": 5})),
        ),
        ("GET", "/v1/locks/x/validate".into(), None),
        ("GET", "/v1/locks/x/validate?fencing_token=abc".into(), None),
        ("GET", "/v1/locks/x/validate?fencing_token=-1".into(), None),
        ("GET", "/v1/locks?limit=0".into(), None),
        ("GET", "/v1/locks?limit=1001".into(), None),
        ("GET", "/v1/locks?limit=ten".into(), None),
        ("GET", "/v1/locks?cursor=%%%".into(), None),
        ("GET", "/v1/locks?cursor=a%2F..".into(), None),
        ("GET", format!("/v1/locks?prefix={}", "p".repeat(513)), None),
    ];
    for (method, path, body) in cases {
        let (status, reply) = svc.send(method, &path, body, None).await;
        assert_error(
            status,
            &reply,
            StatusCode::BAD_REQUEST,
            "invalid_request",
            &path,
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_routes_and_methods_answer_in_the_error_shape() {
    let svc = Service::zk().await;
    let (status, body) = svc.get("/v2/nothing").await;
    assert_error(
        status,
        &body,
        StatusCode::NOT_FOUND,
        "not_found",
        "unknown route",
    );
    let (status, body) = svc
        .send("PUT", "/v1/locks/x/acquire", Some(json!({})), None)
        .await;
    assert_error(
        status,
        &body,
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "PUT acquire",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raw_slash_in_a_lock_name_is_a_404_that_says_to_send_it_as_2f() {
    let svc = Service::memory().await;
    for (method, path, to_use) in [
        ("GET", "/v1/locks/jobs/etl", "/v1/locks/jobs%2Fetl"),
        ("DELETE", "/v1/locks/a/b/c", "/v1/locks/a%2Fb%2Fc"),
        (
            "GET",
            "/v1/locks/jobs/etl/queue",
            "/v1/locks/jobs%2Fetl/queue",
        ),
        (
            "POST",
            "/v1/locks/jobs/etl/acquire",
            "/v1/locks/jobs%2Fetl/acquire",
        ),
    ] {
        let (status, body) = svc.send(method, path, Some(json!({})), None).await;
        assert_error(status, &body, StatusCode::NOT_FOUND, "not_found", path);
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("%2F"), "{method} {path}: {message}");
        assert!(message.contains(to_use), "{method} {path}: {message}");
    }
    // Any other unknown route is a plain 404.
    let (status, body) = svc.get("/v1/nothing/here").await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "not_found", "unknown");
    assert_eq!(body["error"]["message"], "no such route");
}
