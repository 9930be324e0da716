//! The audit trail (`--audit-log`) and request ids (`x-request-id`), on the real binary.

use crate::common;

use std::time::Duration;

use common::{eventually, unique_root, zk, zk_flags, Process};
use reqwest::StatusCode;
use serde_json::{json, Value};

const ADMIN: &str = "admin-token-9f3c1e77b2";
const API: &str = "api-token-52d8aa0c61";

async fn call(
    base: &str,
    method: reqwest::Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = common::http_client()
        .request(method, format!("{base}{path}"))
        .bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn acquire(base: &str, lock: &str, token: &str, body: Value) -> (StatusCode, Value) {
    let path = format!("/v1/locks/{lock}/acquire");
    call(base, reqwest::Method::POST, &path, token, Some(body)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_actions_and_takeovers_are_one_json_line_each_without_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let trail = dir.path().join("audit.log");
    let flags = zk_flags(
        zk::shared(),
        &unique_root(),
        &[
            "--audit-log",
            trail.to_str().unwrap(),
            "--admin-token",
            ADMIN,
            "--api-token",
            API,
        ],
    );
    let lw = Process::start(&flags).await;
    let base = lw.base.as_str();

    // A forceful preemption: the holder's 200 ms cleanup window passes, the preemptor takes.
    let holder = json!({"owner": "h1", "lease_ms": 600_000, "priority": 1, "cleanup_ms": 200});
    let (status, held) = acquire(base, "a", API, holder).await;
    assert_eq!(status, StatusCode::OK, "{held}");
    let preempt = json!({"owner": "p1", "lease_ms": 600_000, "priority": 5, "forceful": true,
                         "message": "deploy\n{\"action\":\"forged\"}"});
    let (status, body) = acquire(base, "a", API, preempt).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // An SRE override of a holder with a short cleanup window, then a force release.
    let holder = json!({"owner": "h2", "lease_ms": 600_000, "cleanup_ms": 200});
    assert_eq!(acquire(base, "b", API, holder).await.0, StatusCode::OK);
    let sre = json!({"owner": "sre", "lease_ms": 600_000, "priority": 2147483647u32,
                     "forceful": true, "message": "incident 42"});
    let (status, body) = acquire(base, "b", ADMIN, sre).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = call(base, reqwest::Method::DELETE, "/v1/locks/b", ADMIN, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    let text = std::fs::read_to_string(&trail).unwrap();
    assert!(!text.contains(ADMIN) && !text.contains(API), "{text}");
    let records: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    for record in &records {
        assert!(record.is_object(), "{record}");
        for field in ["time", "action", "lock", "actor", "outcome"] {
            assert!(!record[field].is_null(), "{field} missing in {record}");
        }
        let time = record["time"].as_str().unwrap();
        time::OffsetDateTime::parse(time, &time::format_description::well_known::Rfc3339).unwrap();
        assert!(time.ends_with('Z'), "{time}");
    }
    let find = |action: &str, outcome: &str| {
        records
            .iter()
            .find(|r| r["action"] == action && r["outcome"] == outcome)
            .unwrap_or_else(|| panic!("no {action} {outcome} in {text}"))
            .clone()
    };
    let takeover = find("preemption_takeover", "took_over");
    assert_eq!(takeover["lock"], "a");
    assert_eq!(takeover["actor"]["role"], "api");
    let api_id = takeover["actor"]["credential"].as_str().unwrap();
    assert!(
        api_id.starts_with("sha256:") && api_id.len() == 19,
        "{api_id}"
    );
    assert_eq!(takeover["owner"], "p1");
    assert_eq!(takeover["affected"]["owner"], "h1");
    assert_eq!(takeover["affected"]["fencing_token"], held["fencing_token"]);
    assert_eq!(takeover["reason"], "deploy\n{\"action\":\"forged\"}");
    assert!(!records.iter().any(|r| r["action"] == "forged"));

    let requested = find("sre_override", "requested");
    assert_eq!(requested["actor"]["role"], "admin");
    assert_ne!(requested["actor"]["credential"].as_str(), Some(api_id));
    assert_eq!(requested["reason"], "incident 42");
    let took = find("sre_override", "took_over");
    assert_eq!(took["affected"]["owner"], "h2");
    let forced = find("force_release", "released");
    assert_eq!(forced["lock"], "b");
    assert_eq!(forced["actor"]["role"], "admin");
    assert_eq!(forced["affected"]["owner"], "sre");
    assert!(forced["affected"]["fencing_token"].is_u64(), "{forced}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_carry_a_request_id_and_its_log_lines_name_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("lockwarden.log");
    let flags = zk_flags(zk::shared(), &unique_root(), &["--admin-token", ADMIN]);
    let lw = Process::start_logging(&flags, Some(&log)).await;
    let http = common::http_client();
    let id_of = |r: &reqwest::Response| {
        r.headers()
            .get("x-request-id")
            .map(|v| v.to_str().unwrap().to_owned())
    };

    let given = http
        .get(format!("{}/healthz", lw.base))
        .header("x-request-id", "given id 1")
        .send()
        .await
        .unwrap();
    assert_eq!(id_of(&given).as_deref(), Some("given id 1"));
    let fresh = http
        .get(format!("{}/healthz", lw.base))
        .send()
        .await
        .unwrap();
    let fresh = id_of(&fresh).unwrap();
    assert_eq!(uuid::Uuid::parse_str(&fresh).unwrap().get_version_num(), 4);
    let too_long = http
        .get(format!("{}/healthz", lw.base))
        .header("x-request-id", "x".repeat(129))
        .send()
        .await
        .unwrap();
    assert!(uuid::Uuid::parse_str(&id_of(&too_long).unwrap()).is_ok());

    let missing = http
        .get(format!("{}/nowhere", lw.base))
        .header("x-request-id", "lost-1")
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    assert_eq!(id_of(&missing).as_deref(), Some("lost-1"));
    let bad = http
        .post(format!("{}/v1/locks/x/acquire", lw.base))
        .header("x-request-id", "bad-1")
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    assert_eq!(id_of(&bad).as_deref(), Some("bad-1"));

    // An override logs its audit record (on stderr without --audit-log) inside the span.
    let sre = json!({"owner": "sre", "lease_ms": 60_000, "priority": 2147483647u32});
    let traced = http
        .post(format!("{}/v1/locks/y/acquire", lw.base))
        .bearer_auth(ADMIN)
        .header("x-request-id", "trace-me-7")
        .json(&sre)
        .send()
        .await
        .unwrap();
    assert_eq!(traced.status(), StatusCode::OK);
    assert_eq!(id_of(&traced).as_deref(), Some("trace-me-7"));
    eventually(
        Duration::from_secs(10),
        "the audit lines in the log",
        || {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            async move {
                let lines: Vec<&str> = text
                    .lines()
                    .filter(|l| l.contains("lockwarden::audit"))
                    .collect();
                lines.len() >= 2 && lines.iter().all(|l| l.contains("request_id=trace-me-7"))
            }
        },
    )
    .await;
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains(ADMIN), "{text}");
}

/// A JSON value with every leaf replaced by its type: what two records of one shape share.
fn shape(value: &Value) -> Value {
    match value {
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(key, value)| (key.clone(), shape(value)))
                .collect(),
        ),
        Value::Null => json!("null"),
        Value::Bool(_) => json!("boolean"),
        Value::Number(_) => json!("number"),
        Value::String(_) => json!("string"),
        Value::Array(_) => json!("array"),
    }
}

/// The first line of the first ``` block of `kind` after `heading` in docs/api.md.
fn readme_example(heading: &str, kind: &str) -> String {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/api.md")).unwrap();
    let section = &readme[readme.find(heading).expect(heading)..];
    let fence = format!("```{kind}\n");
    let block = &section[section.find(&fence).expect(&fence) + fence.len()..];
    block.lines().next().unwrap().to_owned()
}

/// A log line split into what tracing writes before the record and the record itself.
fn split_audit_line(line: &str) -> (&str, Value) {
    let (head, record) = line
        .split_once(" audit=")
        .unwrap_or_else(|| panic!("no audit= in {line}"));
    let record = serde_json::from_str(record).unwrap_or_else(|e| panic!("{e}: {record}"));
    (head, record)
}

/// The audit examples of docs/api.md (the SRE override's log line and the trail's JSON object)
/// have the shape of what the service writes: a key=value line once stood there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readmes_audit_examples_have_the_shape_of_real_lines() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("lockwarden.log");
    let flags = ["--admin-token".to_owned(), ADMIN.to_owned()];
    let lw = Process::start_logging(&flags, Some(&log)).await;
    let base = lw.base.as_str();
    // The example of docs/api.md, with a short cleanup window so that the override takes over.
    let holder = json!({"owner": "batch", "lease_ms": 600_000, "cleanup_ms": 200});
    let (status, body) = acquire(base, "db%2Fprimary", ADMIN, holder).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let sre = json!({"owner": "sre-oncall", "lease_ms": 600_000, "priority": 2147483647u32,
                     "waiting_ms": 5000, "forceful": true,
                     "message": "INC-1234: fail over the primary"});
    let (status, body) = acquire(base, "db%2Fprimary", ADMIN, sre).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let mut real = String::new();
    eventually(Duration::from_secs(10), "the took_over audit line", || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        real = text
            .lines()
            .find(|l| l.contains("lockwarden::audit") && l.contains("\"took_over\""))
            .unwrap_or_default()
            .to_owned();
        std::future::ready(!real.is_empty())
    })
    .await;

    let shown = readme_example("#### The SRE override", "text");
    let (real_head, real_record) = split_audit_line(&real);
    let (shown_head, shown_record) = split_audit_line(&shown);
    // `<time>  INFO request{…}: lockwarden::audit: audit`
    let parts = |head: &str| {
        let (time, rest) = head.split_once(' ').unwrap();
        let (span, after) = rest.split_once("}: ").unwrap();
        (
            time.to_owned(),
            span.trim_start().split('{').next().unwrap().to_owned(),
            after.to_owned(),
        )
    };
    let (real_time, real_span, real_after) = parts(real_head);
    let (shown_time, shown_span, shown_after) = parts(shown_head);
    for time in [&real_time, &shown_time] {
        time::OffsetDateTime::parse(time, &time::format_description::well_known::Rfc3339)
            .unwrap_or_else(|e| panic!("{e}: {time}"));
    }
    assert_eq!(shown_span, real_span, "{shown}\n{real}");
    assert_eq!(shown_after, real_after, "{shown}\n{real}");
    assert_eq!(shape(&shown_record), shape(&real_record), "{shown}\n{real}");
    for field in [
        "action", "lock", "outcome", "owner", "priority", "reason", "affected",
    ] {
        if field != "affected" {
            assert_eq!(shown_record[field], real_record[field], "{field}");
        }
    }
    assert_eq!(
        shown_record["affected"]["owner"],
        real_record["affected"]["owner"]
    );

    let trail: Value = serde_json::from_str(&readme_example("### Audit trail", "json")).unwrap();
    assert_eq!(shape(&trail), shape(&real_record), "{trail}\n{real}");
}
