//! `/metrics` after real traffic on ZooKeeper (a grant, a contended hand-off, releases, an
//! expiry takeover, a preemption, an admin force release, an open event stream): the
//! families say what happened, no label carries a lock name, and `promtool check metrics`
//! (Debian's `prometheus` package, which `scripts/install-test-deps` installs) accepts the
//! text, build info and the `process_*` families included. Without promtool these tests
//! fail rather than skip.

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use common::sse::SseStream;
use common::{encode, eventually, Service};
use reqwest::StatusCode;
use serde_json::json;
use tokio::io::AsyncWriteExt;

const ADMIN: &str = "admin-metrics-7c1d";
/// Every lock here is named with this, which no label value may contain.
const MARK: &str = "zz-metric-probe";
const WAIT: Duration = Duration::from_secs(20);

/// One sample: its family-qualified name and its labels.
pub(crate) type Series = (String, Vec<(String, String)>);

/// The samples of a classic text exposition.
pub(crate) fn samples(text: &str) -> Vec<(Series, f64)> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').expect("a sample has a value");
            let value: f64 = value.parse().expect("a numeric value");
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (name, labels(rest.strip_suffix('}').unwrap())),
                None => (series, Vec::new()),
            };
            ((name.to_owned(), labels), value)
        })
        .collect()
}

/// `a="x",b="y"`, with `\\`, `\"` and `\n` escapes in values.
fn labels(mut text: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    while let Some((key, rest)) = text.split_once("=\"") {
        let (mut value, mut chars) = (String::new(), rest.char_indices());
        let end = loop {
            match chars.next().expect("a closed label value") {
                (_, '\\') => value.push(match chars.next().unwrap().1 {
                    'n' => '\n',
                    other => other,
                }),
                (at, '"') => break at,
                (_, other) => value.push(other),
            }
        };
        found.push((key.trim_start_matches(',').to_owned(), value));
        text = &rest[end + 1..];
    }
    found
}

/// The value of the sample `name` whose labels include `wanted` (0 if there is none).
fn value(text: &str, name: &str, wanted: &[(&str, &str)]) -> f64 {
    samples(text)
        .into_iter()
        .find(|((n, labels), _)| {
            n == name
                && wanted
                    .iter()
                    .all(|(k, v)| labels.iter().any(|(lk, lv)| lk == k && lv == v))
        })
        .map_or(0.0, |(_, v)| v)
}

/// Runs `promtool check metrics` on `text`: its exit status and everything it printed.
async fn promtool(text: &str) -> (bool, String) {
    let mut child = tokio::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool runs (Debian's `prometheus`; scripts/install-test-deps installs it)");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(text.as_bytes()).await.unwrap();
    drop(stdin);
    let output = child.wait_with_output().await.unwrap();
    let printed = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), printed)
}

async fn assert_promtool_accepts(text: &str) {
    let (ok, printed) = promtool(text).await;
    assert!(
        ok && printed.trim().is_empty(),
        "promtool: {printed}\n{text}"
    );
}

/// Acquires `name` in the background (the body says how long it may wait); yields the
/// answer.
fn waiting_acquire(
    svc: &Service,
    name: &str,
    body: serde_json::Value,
) -> tokio::task::JoinHandle<(StatusCode, serde_json::Value)> {
    let (http, base, name) = (svc.http.clone(), svc.base.clone(), name.to_owned());
    tokio::spawn(async move {
        let path = format!("/v1/locks/{}/acquire", encode(&name));
        common::send(&http, &base, "POST", &path, Some(body), None).await
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_after_real_traffic_tell_what_happened_and_pass_promtool() {
    let svc = Service::zk_with(|args| args.admin_token = Some(ADMIN.into())).await;
    eventually(WAIT, "the ZooKeeper session", || async {
        svc.get("/readyz").await.0 == StatusCode::OK
    })
    .await;
    let lock = |n: u32| format!("{MARK}/lock-{n}");

    // A grant, then a contended hand-off to a caller waiting in the queue, then a release
    // with nobody waiting.
    let first = svc.must_acquire(&lock(1), "first", 60_000).await;
    let second = waiting_acquire(
        &svc,
        &lock(1),
        json!({"owner": "second", "lease_ms": 60_000, "waiting_ms": 15_000}),
    );
    eventually(WAIT, "the second caller to wait", || async {
        svc.waiters(&lock(1)).await == 1
    })
    .await;
    let (status, _) = svc
        .release(&lock(1), first["lease_id"].as_str().unwrap())
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, second) = second.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{second}");
    let (status, body) = svc
        .release(&lock(1), second["lease_id"].as_str().unwrap())
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // An expiry takeover: a short lease runs out, and the next caller takes the lock.
    svc.must_acquire(&lock(2), "brief", 150).await;
    eventually(WAIT, "the brief lease to be taken over", || async {
        let body = json!({"owner": "next", "lease_ms": 60_000});
        svc.acquire(&lock(2), body).await.0 == StatusCode::OK
    })
    .await;

    // A preemption: a higher priority asks the holder to clean up, and once the holder's
    // cleanup window has passed, takes the lock (forceful). Then an admin force-releases it.
    let holder = json!({"owner": "batch", "lease_ms": 60_000, "priority": 1, "cleanup_ms": 100});
    assert_eq!(svc.acquire(&lock(3), holder).await.0, StatusCode::OK);
    let preemptor = json!({"owner": "deploy", "lease_ms": 60_000, "priority": 5, "forceful": true, "waiting_ms": 15_000});
    let (status, body) = waiting_acquire(&svc, &lock(3), preemptor).await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    let path = format!("/v1/locks/{}", encode(&lock(3)));
    let (status, body) = svc.send("DELETE", &path, None, Some(ADMIN)).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // One lock stays held, and one event stream stays open, while /metrics is read.
    svc.must_acquire(&lock(4), "keeper", 60_000).await;
    let url = format!("{}/v1/locks/{}/events", svc.base, encode(&lock(4)));
    let mut stream = SseStream::open(&url, None).await;
    stream.next_of("snapshot", WAIT).await;
    // And a refusal, which the request metrics label with its error code.
    let refused = svc
        .acquire(&lock(4), json!({"owner": "other", "lease_ms": 1000}))
        .await;
    assert_eq!(refused.0, StatusCode::CONFLICT, "{}", refused.1);

    let response = svc
        .http
        .get(format!("{}/metrics", svc.base))
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.headers()["content-type"],
        "text/plain; version=0.0.4"
    );
    let text = response.text().await.unwrap();
    let at_least_one = [
        ("lockwarden_grants_total", &[][..]),
        ("lockwarden_handoffs_total", &[]),
        ("lockwarden_expirations_total", &[]),
        ("lockwarden_preemptions_total", &[]),
        ("lockwarden_takeovers_total", &[]),
        ("lockwarden_waits_total", &[]),
        (
            "lockwarden_force_releases_total",
            &[("outcome", "released")],
        ),
        (
            "lockwarden_acquire_wait_seconds_count",
            &[("outcome", "granted")],
        ),
        ("lockwarden_handoff_write_seconds_count", &[]),
        (
            "lockwarden_lock_hold_seconds_count",
            &[("end", "handed_off")],
        ),
        ("lockwarden_lock_hold_seconds_count", &[("end", "released")]),
        ("lockwarden_lock_hold_seconds_count", &[("end", "expired")]),
        (
            "lockwarden_lock_hold_seconds_count",
            &[("end", "taken_over")],
        ),
        ("lockwarden_lock_hold_seconds_count", &[("end", "forced")]),
        ("lockwarden_locks_held", &[]),
        (
            "lockwarden_zookeeper_request_duration_seconds_count",
            &[("operation", "multi")],
        ),
        (
            "lockwarden_zookeeper_request_duration_seconds_count",
            &[("operation", "get_data")],
        ),
        (
            "lockwarden_zookeeper_request_duration_seconds_count",
            &[("operation", "get_children")],
        ),
        (
            "lockwarden_http_request_duration_seconds_count",
            &[
                ("route", "/v1/locks/{name}/acquire"),
                ("method", "post"),
                ("outcome", "ok"),
            ],
        ),
        (
            "lockwarden_http_request_duration_seconds_count",
            &[
                ("route", "/v1/locks/{name}/acquire"),
                ("outcome", "lock_held"),
            ],
        ),
        (
            "lockwarden_http_request_duration_seconds_count",
            &[
                ("route", "/v1/locks/{name}"),
                ("method", "delete"),
                ("outcome", "ok"),
            ],
        ),
    ];
    for (name, labels) in at_least_one {
        assert!(
            value(&text, name, labels) >= 1.0,
            "{name}{labels:?} ≥ 1 in\n{text}"
        );
    }
    let exactly = [
        ("lockwarden_event_stream_subscribers", &[][..], 1.0),
        ("lockwarden_waiters", &[], 0.0),
        ("lockwarden_webhook_queue_depth", &[], 0.0),
        (
            "lockwarden_zookeeper_session_state",
            &[("state", "connected")],
            1.0,
        ),
        (
            "lockwarden_zookeeper_session_state",
            &[("state", "connecting")],
            0.0,
        ),
        (
            "lockwarden_zookeeper_session_state",
            &[("state", "disconnected")],
            0.0,
        ),
    ];
    for (name, labels, expected) in exactly {
        assert_eq!(
            value(&text, name, labels),
            expected,
            "{name}{labels:?} in\n{text}"
        );
    }
    assert!(
        text.lines().any(|l| l == "lockwarden_zookeeper_stand_in 0"),
        "no stand-in session serves while the primary is connected:\n{text}"
    );

    let routes: Vec<&str> = lockwarden::api::ROUTES.iter().map(|(_, p)| *p).collect();
    for ((name, labels), _) in samples(&text) {
        for (key, label) in labels {
            assert!(
                !label.contains(MARK) && !label.contains("lock-"),
                "{name} {key}={label}"
            );
            if key == "route" {
                assert!(
                    routes.contains(&label.as_str()) || label == "unmatched",
                    "route {label}"
                );
            }
        }
    }
    assert_promtool_accepts(&text).await;

    drop(stream);
    eventually(WAIT, "the closed stream to be uncounted", || async {
        value(
            &svc.metrics().await,
            "lockwarden_event_stream_subscribers",
            &[],
        ) == 0.0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scraper_that_prefers_openmetrics_gets_it() {
    let svc = Service::memory().await;
    svc.must_acquire("om", "o", 60_000).await;
    let accept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    let response = svc
        .http
        .get(format!("{}/metrics", svc.base))
        .header("accept", accept)
        .send()
        .await
        .unwrap();
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("application/openmetrics-text; version=1.0.0"),
        "{content_type}"
    );
    let text = response.text().await.unwrap();
    assert!(text.ends_with("# EOF\n"), "{text}");
    assert!(
        text.contains("# TYPE lockwarden_grants counter\n"),
        "{text}"
    );
    assert!(
        text.contains("\nlockwarden_grants_total{resource=\"lock\"} 1\n"),
        "{text}"
    );
    let build_info = format!(
        "\nlockwarden_build_info{{version=\"{}\"}} 1\n",
        env!("CARGO_PKG_VERSION")
    );
    assert!(text.contains(&build_info), "{text}");
    if cfg!(target_os = "linux") {
        assert!(
            text.contains("# TYPE process_cpu_seconds counter\n"),
            "{text}"
        );
        assert!(text.contains("\nprocess_cpu_seconds_total "), "{text}");
        assert!(text.contains("\nprocess_start_time_seconds "), "{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_in_memory_store_shows_each_resource_and_no_zookeeper_series_and_passes_promtool() {
    let svc = Service::memory().await;
    svc.must_acquire("mem", "o", 60_000).await;
    let semaphore = json!({"owner": "o", "limit": 2, "lease_ms": 60_000});
    let (status, _) = svc.post("/v1/semaphores/mem/acquire", semaphore).await;
    assert_eq!(status, StatusCode::OK);
    let campaign = json!({"candidate": "c", "lease_ms": 60_000});
    let (status, _) = svc.post("/v1/elections/mem/campaign", campaign).await;
    assert_eq!(status, StatusCode::OK);
    let text = svc.metrics().await;
    for kind in ["lock", "semaphore", "election"] {
        let grants = value(&text, "lockwarden_grants_total", &[("resource", kind)]);
        assert_eq!(grants, 1.0, "{kind} in {text}");
        let held = value(&text, "lockwarden_locks_held", &[("resource", kind)]);
        assert_eq!(held, 1.0, "{kind} in {text}");
    }
    assert!(!text.contains("zookeeper"), "{text}");
    let version = [("version", env!("CARGO_PKG_VERSION"))];
    assert_eq!(value(&text, "lockwarden_build_info", &version), 1.0);
    if cfg!(target_os = "linux") {
        assert!(value(&text, "process_open_fds", &[]) > 0.0, "{text}");
        assert!(value(&text, "process_resident_memory_bytes", &[]) > 0.0);
    }
    assert_promtool_accepts(&text).await;
}

#[test]
fn label_values_are_unescaped() {
    let parsed = labels(r#"a="x",b="q\"u\\o\nte""#);
    assert_eq!(
        parsed,
        [("a".into(), "x".into()), ("b".into(), "q\"u\\o\nte".into())]
    );
}
