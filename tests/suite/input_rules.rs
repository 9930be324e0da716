//! Input rules (docs/api.md, "Input rules"): characters an owner may not contain, an audit line
//! that stays one line whatever the message holds, integral floats, the empty cursor, and
//! the `/metrics` token.

use crate::common;

use std::time::Duration;

use common::{eventually, unique_root, zk, zk_flags, Process, Service};
use reqwest::StatusCode;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owners_with_control_separator_or_bidi_characters_are_refused() {
    let svc = Service::zk().await;
    let classes = [
        ("C0 control", '\u{1}'),
        ("escape", '\u{1b}'),
        ("DEL", '\u{7f}'),
        ("C1 control (NEL)", '\u{85}'),
        ("line separator", '\u{2028}'),
        ("paragraph separator", '\u{2029}'),
        ("left-to-right mark", '\u{200e}'),
        ("right-to-left mark", '\u{200f}'),
        ("Arabic letter mark", '\u{061c}'),
        ("right-to-left override", '\u{202e}'),
        ("left-to-right embedding", '\u{202a}'),
        ("first strong isolate", '\u{2068}'),
        ("pop directional isolate", '\u{2069}'),
    ];
    for (class, c) in classes {
        let owner = format!("deploy{c}bot");
        let (status, body) = svc
            .acquire("hygiene", json!({"owner": owner, "lease_ms": 1000}))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{class}: {body}");
        assert_eq!(body["error"]["code"], "invalid_request", "{class}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("owner"), "{class}: {message}");
    }
    assert_eq!(svc.info("hygiene").await["state"], "free");
    svc.must_acquire("hygiene", "zoë-日本-🙂", 1000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_line_of_an_override_stays_one_line() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let flags = zk_flags(zk::shared(), &unique_root(), &["--admin-token", "sre"]);
    let svc = Process::start_logging(&flags, Some(log.path())).await;
    let http = common::http_client();
    let message = "INC-9\nINFO lockwarden::audit: forged\r\u{2028}x\u{202e}y\\n";
    let body = json!({"owner": "sre-oncall", "lease_ms": 60_000, "priority": 2147483647,
                      "message": message});
    let (status, reply) = common::send(
        &http,
        &svc.base,
        "POST",
        "/v1/locks/audited/acquire",
        Some(body),
        Some("sre"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(
        reply["lock"]["message"], message,
        "the record keeps it as sent"
    );
    // As the audit line's JSON writes it.
    let escaped = r"INC-9\nINFO lockwarden::audit: forged\r\u2028x\u202ey\\n";
    eventually(WAIT, "the audit line", || async {
        let text = std::fs::read_to_string(log.path()).unwrap();
        text.lines()
            .any(|line| line.contains("sre_override") && line.contains(escaped))
    })
    .await;
    let text = std::fs::read_to_string(log.path()).unwrap();
    // One audit line per step of the override (requested, granted), each whole.
    for line in text.lines().filter(|l| l.contains("forged")) {
        assert!(
            line.contains("sre_override") && line.contains(escaped),
            "the message added a line: {line:?}"
        );
    }
    for raw in ['\r', '\u{2028}', '\u{202e}'] {
        assert!(!text.contains(raw), "{raw:?} reached the log raw");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn integral_floats_are_integers_and_an_empty_cursor_is_the_first_page() {
    let svc = Service::zk().await;
    let (status, body) = svc
        .acquire(
            "floats",
            json!({"owner": "o", "lease_ms": 73339.0, "priority": 3.0, "waiting_ms": 0.0}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["lock"]["lease_ms"], 73339);
    assert_eq!(body["lock"]["priority"], 3);
    let (status, body) = svc
        .renew(
            "floats",
            json!({"lease_id": body["lease_id"], "lease_ms": 60000.0}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["lock"]["lease_ms"], 60000);
    for (field, value) in [("lease_ms", json!(73339.5)), ("priority", json!(1e300))] {
        let mut request = json!({"owner": "p", "lease_ms": 1000});
        request[field] = value;
        let (status, body) = svc.acquire("floats2", request).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{field}: {body}");
        assert_eq!(body["error"]["code"], "invalid_request");
    }
    let (status, listed) = svc.get("/v1/locks?cursor=").await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert_eq!(listed["locks"][0]["name"], "floats");
    for bad in ["+1", "%2B1", "1.0", "9223372036854775808"] {
        let path = format!("/v1/locks/floats/validate?fencing_token={bad}");
        let (status, body) = svc.get(&path).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
    }
    let (status, _) = svc.get("/v1/locks?limit=%2B5").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "limit=+5");
}

async fn metrics_status(svc: &Service, token: Option<&str>) -> (StatusCode, String) {
    let mut request = svc.http.get(format!("{}/metrics", svc.base));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    (response.status(), response.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_need_the_metrics_token_only_when_one_is_set() {
    let open = Service::zk().await;
    let (status, text) = metrics_status(&open, None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(text.contains("lockwarden_grants_total"));

    let closed = Service::zk_with(|args| {
        args.metrics_token = Some("scrape".into());
        args.api_tokens = vec!["api".into()];
        args.admin_token = Some("admin".into());
    })
    .await;
    for token in [None, Some("api"), Some("admin"), Some("scrapE")] {
        let (status, text) = metrics_status(&closed, token).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{token:?}: {text}");
        let body: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(body["error"]["code"], "unauthorized", "{token:?}");
    }
    let (status, text) = metrics_status(&closed, Some("scrape")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(text.contains("lockwarden_grants_total"));
    let (status, _) = closed.send("GET", "/v1/locks", None, Some("scrape")).await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "the metrics token opens nothing else"
    );
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_lockwarden"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    assert!(help.contains("--metrics-token") && help.contains("LOCKWARDEN_METRICS_TOKEN"));
    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_lockwarden"))
        .args(["serve", "--metrics-token", ""])
        .output()
        .unwrap();
    assert!(
        !refused.status.success(),
        "an empty --metrics-token is refused"
    );
}
