//! Scoped tokens (`--token-file`): every call on a name is held to the token's prefixes and
//! an acquire to its `max_priority`, each refusal a `403 forbidden` that names the limit and
//! matches the contract; listings and prefix streams show only names in scope; the audit
//! trail names the token; the file is re-read on SIGHUP, and a bad one keeps the old tokens.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use crate::common;
use crate::contract::{check_response, spec};
use common::sse::SseStream;
use common::{eventually, Process, Service};
use lockwarden::api::ROUTES;
use lockwarden::config::ServeArgs;
use reqwest::StatusCode;
use serde_json::{json, Value};

const CI: &str = "ci-secret";
const PLAIN: &str = "plain-token";
const ADMIN: &str = "admin-secret";
const PREFIXES: &str = "outside this token's prefixes (ci/)";

fn tokens(prefixes: &str) -> String {
    format!(
        "[[token]]\nname = \"ci\"\nsecret = \"{CI}\"\nprefixes = [{prefixes}]\nmax_priority = 10\n"
    )
}

fn token_file(text: &str) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(text.as_bytes()).unwrap();
    file
}

/// An instance (on the embedded store, or with `on_zookeeper` on the shared ZooKeeper) with
/// the token file, an unscoped `--api-token` and an admin token.
async fn service(file: &Path, audit_log: Option<&Path>, on_zookeeper: bool) -> Service {
    let mut args = match on_zookeeper {
        true => common::zk_args(common::zk::shared(), &common::unique_root()),
        false => ServeArgs::defaults(),
    };
    args.max_clock_skew_ms = 0;
    args.api_tokens = vec![PLAIN.into()];
    args.admin_token = Some(ADMIN.into());
    args.token_file = Some(file.to_owned());
    args.audit_log = audit_log.map(Path::to_owned);
    Service::start(args).await
}

fn acquire_body(owner: &str, priority: u32) -> Value {
    json!({"owner": owner, "lease_ms": 60000, "priority": priority})
}

/// Asserts a `403 forbidden` whose message says `what`, in the shape the spec declares for
/// `method path`.
fn assert_forbidden(answer: (StatusCode, Value), what: &str, method: &str, path: &str) {
    let (status, reply) = answer;
    assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}: {reply}");
    assert_eq!(reply["error"]["code"], "forbidden");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(message.contains(what), "{method} {path}: {message}");
    check_response(&spec(), method, path, status, &reply);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_on_a_name_is_held_to_the_tokens_scope() {
    let file = token_file(&tokens("\"ci/\""));
    let svc = service(file.path(), None, false).await;
    // In scope: every route works.
    let (status, held) = svc
        .send(
            "POST",
            "/v1/locks/ci%2Fa/acquire",
            Some(acquire_body("ci", 10)),
            Some(CI),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{held}");
    let lease = json!({"lease_id": held["lease_id"]});
    let token = held["fencing_token"].as_u64().unwrap();
    for (method, path, body) in [
        ("GET", "/v1/locks/ci%2Fa".to_string(), None),
        ("GET", "/v1/locks/ci".into(), None),
        (
            "GET",
            format!("/v1/locks/ci%2Fa/validate?fencing_token={token}"),
            None,
        ),
        ("GET", "/v1/locks/ci%2Fa/queue".into(), None),
        ("POST", "/v1/locks/ci%2Fa/renew".into(), Some(lease.clone())),
        (
            "POST",
            "/v1/locks/ci%2Fa/release".into(),
            Some(lease.clone()),
        ),
    ] {
        let (status, reply) = svc.send(method, &path, body, Some(CI)).await;
        assert_eq!(status, StatusCode::OK, "{method} {path}: {reply}");
    }
    let url = format!("{}/v1/locks/ci%2Fa/events", svc.base);
    let mut stream = SseStream::open_as(&url, None, Some(CI)).await;
    assert_eq!(stream.status, StatusCode::OK);
    stream.next_of("snapshot", Duration::from_secs(10)).await;

    // Out of scope: every route on the name is refused, whatever the lease presented.
    let (status, other) = svc
        .send(
            "POST",
            "/v1/locks/other%2Fx/acquire",
            Some(acquire_body("p", 0)),
            Some(PLAIN),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "an --api-token is unscoped: {other}"
    );
    let lease = json!({"lease_id": other["lease_id"]});
    // Every route on a name, as the router lists them, so that a new one cannot be missed.
    let named = ROUTES.iter().filter(|(_, path)| path.contains("{name}"));
    for name in ["other%2Fx", "ci2%2Fx", "c"] {
        for (method, template) in named.clone() {
            let mut path = template.replace("{name}", name);
            let body = match template.rsplit('/').next() {
                Some("acquire") => Some(acquire_body("ci", 0)),
                Some("renew" | "release") => Some(lease.clone()),
                Some("validate") => {
                    path.push_str("?fencing_token=1");
                    None
                }
                _ => None,
            };
            let answer = svc
                .send(&method.to_uppercase(), &path, body, Some(CI))
                .await;
            assert_forbidden(answer, PREFIXES, method, template);
        }
    }
    assert_eq!(
        named.count(),
        22,
        "a lock's acquire, renew, release, get, delete, validate, queue, events; an \
         election's get, campaign, proclaim, renew, resign, validate, events; a \
         semaphore's acquire, renew, release, get, delete, validate, events"
    );
    let (_, untouched) = svc
        .send("GET", "/v1/locks/other%2Fx", None, Some(PLAIN))
        .await;
    assert_eq!(untouched["state"], "held", "{untouched}");

    // Max priority: the limit is named; the override still needs the admin token.
    let answer = svc
        .send(
            "POST",
            "/v1/locks/ci%2Fb/acquire",
            Some(acquire_body("ci", 11)),
            Some(CI),
        )
        .await;
    let acquire = "/v1/locks/{name}/acquire";
    assert_forbidden(
        answer,
        "priority 11 is above this token's max_priority (10)",
        "post",
        acquire,
    );
    let answer = svc
        .send(
            "POST",
            "/v1/locks/ci%2Fb/acquire",
            Some(acquire_body("ci", 2147483647)),
            Some(CI),
        )
        .await;
    assert_forbidden(answer, "needs the admin token", "post", acquire);
    let (status, _) = svc
        .send(
            "POST",
            "/v1/locks/ci%2Fb/acquire",
            Some(acquire_body("a", 2147483647)),
            Some(ADMIN),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "the admin token is never scoped");
}

fn names(listing: &Value) -> Vec<&str> {
    let locks = listing["locks"].as_array().expect("a listing");
    locks.iter().map(|l| l["name"].as_str().unwrap()).collect()
}

/// On ZooKeeper too: its listing skips whole subtrees outside the scope.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listings_and_prefix_streams_keep_to_the_scope() {
    listings_and_prefix_streams(false).await;
    listings_and_prefix_streams(true).await;
}

async fn listings_and_prefix_streams(on_zookeeper: bool) {
    let file = token_file(&tokens("\"ci/\""));
    let audit = tempfile::NamedTempFile::new().unwrap();
    let svc = service(file.path(), Some(audit.path()), on_zookeeper).await;
    for (name, token) in [
        ("other%2Fx", PLAIN),
        ("ci2%2Fy", PLAIN),
        ("ci%2Fa", CI),
        ("ci%2Fb%2Fc", CI),
    ] {
        let path = format!("/v1/locks/{name}/acquire");
        let (status, reply) = svc
            .send("POST", &path, Some(acquire_body("o", 0)), Some(token))
            .await;
        assert_eq!(status, StatusCode::OK, "{name}: {reply}");
    }
    let list = |query: &'static str, token: &'static str| {
        let svc = &svc;
        async move {
            svc.send("GET", &format!("/v1/locks{query}"), None, Some(token))
                .await
        }
    };
    let (_, all) = list("", PLAIN).await;
    assert_eq!(names(&all), ["ci/a", "ci/b/c", "ci2/y", "other/x"]);
    for query in ["", "?prefix=", "?prefix=c", "?prefix=ci", "?prefix=ci/"] {
        let (status, listed) = list(query, CI).await;
        assert_eq!(status, StatusCode::OK, "{query}: {listed}");
        assert_eq!(names(&listed), ["ci/a", "ci/b/c"], "{query}");
    }
    let (_, page) = list("?limit=1", CI).await;
    assert_eq!(
        (names(&page), page["next_cursor"].as_str()),
        (vec!["ci/a"], Some("ci/a"))
    );
    let (_, page) = list("?limit=1&cursor=ci/a", CI).await;
    assert_eq!(names(&page), ["ci/b/c"]);
    for query in ["?prefix=ci2", "?prefix=other/", "?prefix=x"] {
        let prefix = query.trim_start_matches("?prefix=");
        let what = format!("prefix '{prefix}' is {PREFIXES}");
        assert_forbidden(list(query, CI).await, &what, "get", "/v1/locks");
        let path = format!("/v1/events{query}");
        let answer = svc.send("GET", &path, None, Some(CI)).await;
        assert_forbidden(answer, &what, "get", "/v1/events");
    }

    // The stream of every lock shows the scope's only, from its snapshot on.
    let url = format!("{}/v1/events", svc.base);
    let mut stream = SseStream::open_as(&url, None, Some(CI)).await;
    let snapshot = stream.next_of("snapshot", Duration::from_secs(10)).await;
    assert_eq!(names(&snapshot.data), ["ci/a", "ci/b/c"]);
    // Taken from a holder that declared no cleanup window: the audit trail names the token.
    let (status, _) = svc
        .send(
            "POST",
            "/v1/locks/ci2%2Fz/acquire",
            Some(acquire_body("p", 0)),
            Some(PLAIN),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, reply) = svc
        .send(
            "POST",
            "/v1/locks/ci%2Fa/acquire",
            Some(acquire_body("ci", 5)),
            Some(CI),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    let event = stream.next_event(Duration::from_secs(10)).await;
    assert_eq!(
        event.data["lock"]["name"], "ci/a",
        "ci2/z is not shown: {event:?}"
    );
    let mut line = String::new();
    eventually(Duration::from_secs(10), "the takeover's audit line", || {
        line = std::fs::read_to_string(audit.path()).unwrap_or_default();
        std::future::ready(line.contains("preemption_takeover"))
    })
    .await;
    let record: Value = serde_json::from_str(line.lines().last().unwrap()).unwrap();
    assert_eq!(record["actor"]["token"], "ci", "{record}");
    assert_eq!(record["actor"]["role"], "api");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_token_file_and_a_bad_file_keeps_the_old_tokens() {
    let file = token_file(&tokens("\"ci/\""));
    let log = tempfile::NamedTempFile::new().unwrap();
    let flags = [
        "--token-file".to_string(),
        file.path().display().to_string(),
    ];
    let process = Process::start_logging(&flags, Some(log.path())).await;
    let http = common::http_client();
    let status_of = |name: &'static str| {
        let (http, base) = (http.clone(), process.base.clone());
        async move {
            let path = format!("/v1/locks/{name}");
            common::send(&http, &base, "GET", &path, None, Some(CI))
                .await
                .0
        }
    };
    assert_eq!(status_of("b%2Fx").await, StatusCode::FORBIDDEN);
    assert_eq!(status_of("ci%2Fx").await, StatusCode::OK);

    std::fs::write(file.path(), tokens("\"b/\"")).unwrap();
    process.signal(libc::SIGHUP);
    eventually(Duration::from_secs(10), "the new scope", || async {
        status_of("b%2Fx").await == StatusCode::OK
    })
    .await;
    assert_eq!(status_of("ci%2Fx").await, StatusCode::FORBIDDEN);
    let logged = std::fs::read_to_string(log.path()).unwrap();
    assert!(
        logged.contains("token file reloaded") && logged.contains("tokens=1"),
        "{logged}"
    );

    std::fs::write(
        file.path(),
        "[[token]]\nsecret = \"x\"\nmax_priority = -1\n",
    )
    .unwrap();
    process.signal(libc::SIGHUP);
    let mut logged = String::new();
    eventually(Duration::from_secs(10), "the reload's error", || {
        logged = std::fs::read_to_string(log.path()).unwrap();
        std::future::ready(logged.contains("not reloaded"))
    })
    .await;
    assert!(logged.contains("line 3: max_priority -1"), "{logged}");
    assert_eq!(
        status_of("b%2Fx").await,
        StatusCode::OK,
        "the old tokens stay"
    );
    assert_eq!(status_of("ci%2Fx").await, StatusCode::FORBIDDEN);
}

#[test]
fn a_bad_token_file_stops_the_start_naming_file_and_line() {
    let file = token_file("[[token]]\nsecret = \"x\"\nprefixes = [\"ok\", \"no way\"]\n");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lockwarden"))
        .args(["serve", "--listen", "127.0.0.1:0", "--token-file"])
        .arg(file.path())
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let expected = format!(
        "token file {}, line 3: prefix \"no way\"",
        file.path().display()
    );
    assert!(stderr.contains(&expected), "{stderr}");
}
