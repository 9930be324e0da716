//! The contract files agree with the code: openapi.yaml (routes, codes, fields, and the shape
//! of real responses and stream events), docker-compose.yml (which wants an admin token and
//! publishes on loopback unless told otherwise), the Dockerfile, README.md and .ci/run.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::sse::SseStream;
use common::Service;
use lockwarden::api::{dto::ACQUIRE_FIELDS, error::ErrorCode, ROUTES};
use reqwest::StatusCode;
use serde_json::{json, Value};

pub(crate) fn spec() -> Value {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.yaml")).unwrap();
    serde_yaml::from_str(&text).expect("openapi.yaml is valid YAML")
}

fn resolve<'a>(spec: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(reference) => {
            let target = reference
                .trim_start_matches("#/")
                .split('/')
                .fold(spec, |node, key| &node[key]);
            resolve(spec, target)
        }
        None => schema,
    }
}

fn type_matches(kind: &str, value: &Value) -> bool {
    match kind {
        "null" => value.is_null(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => false,
    }
}

/// A structural check of `value` against an OpenAPI 3.2 schema: types, enums, consts,
/// required and declared properties, nested objects and arrays, and JSON held in a string
/// (`contentSchema`, as in an event's `data`). Patterns are not checked here.
fn check(spec: &Value, schema: &Value, value: &Value, at: &str) {
    let schema = resolve(spec, schema);
    for combinator in ["allOf"] {
        if let Some(parts) = schema.get(combinator).and_then(Value::as_array) {
            for part in parts {
                check(spec, part, value, at);
            }
        }
    }
    if let Some(options) = schema
        .get("oneOf")
        .or_else(|| schema.get("anyOf"))
        .and_then(Value::as_array)
    {
        let fits = options
            .iter()
            .any(|option| std::panic::catch_unwind(|| check(spec, option, value, at)).is_ok());
        assert!(fits, "{at}: {value} fits none of the alternatives");
        return;
    }
    match schema.get("type") {
        Some(Value::String(kind)) => {
            assert!(type_matches(kind, value), "{at}: {value} is not {kind}")
        }
        Some(Value::Array(kinds)) => {
            assert!(
                kinds
                    .iter()
                    .any(|k| type_matches(k.as_str().unwrap(), value)),
                "{at}: {value} is not {kinds:?}"
            )
        }
        _ => {}
    }
    if let Some(choices) = schema.get("enum").and_then(Value::as_array) {
        assert!(
            choices.contains(value),
            "{at}: {value} is not one of {choices:?}"
        );
    }
    if let Some(constant) = schema.get("const") {
        assert_eq!(constant, value, "{at}");
    }
    if let (Some(object), Some(properties)) = (
        value.as_object(),
        schema.get("properties").and_then(Value::as_object),
    ) {
        for required in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            assert!(
                object.contains_key(required.as_str().unwrap()),
                "{at}: {required} is missing from {value}"
            );
        }
        for (key, item) in object {
            match properties.get(key) {
                Some(property) => check(spec, property, item, &format!("{at}.{key}")),
                None => assert_ne!(
                    schema.get("additionalProperties"),
                    Some(&Value::Bool(false)),
                    "{at}: undeclared {key}"
                ),
            }
        }
        let undeclared: Vec<&String> = object
            .keys()
            .filter(|k| !properties.contains_key(*k))
            .collect();
        assert!(
            undeclared.is_empty()
                || schema.get("additionalProperties") != Some(&Value::Bool(false)),
            "{at}: {undeclared:?}"
        );
    }
    if let (Some(items), Some(schema)) = (value.as_array(), schema.get("items")) {
        for (i, item) in items.iter().enumerate() {
            check(spec, schema, item, &format!("{at}[{i}]"));
        }
    }
    if let (Some(text), Some(content)) = (value.as_str(), schema.get("contentSchema")) {
        assert_eq!(schema["contentMediaType"], "application/json", "{at}");
        let parsed: Value =
            serde_json::from_str(text).unwrap_or_else(|e| panic!("{at}: {text} is not JSON: {e}"));
        check(spec, content, &parsed, &format!("{at}(json)"));
    }
}

/// Checks a live response against the schema the spec declares for that operation and status.
pub(crate) fn check_response(
    spec: &Value,
    method: &str,
    path: &str,
    status: StatusCode,
    body: &Value,
) {
    let operation = &spec["paths"][path][method];
    assert!(operation.is_object(), "no {method} {path} in the spec");
    let response = resolve(spec, &operation["responses"][status.as_str()]);
    assert!(
        response.is_object(),
        "{method} {path} does not declare {status}"
    );
    let schema = &response["content"]["application/json"]["schema"];
    assert!(
        schema.is_object(),
        "{method} {path} {status} has no JSON schema"
    );
    check(spec, schema, body, &format!("{method} {path} {status}"));
}

#[test]
fn every_route_is_in_the_spec_and_nothing_else() {
    let spec = spec();
    // 3.2, for `itemSchema`: each event of a stream has its schema.
    assert!(spec["openapi"].as_str().unwrap().starts_with("3.2"));
    let documented: BTreeSet<(String, String)> = spec["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .unwrap()
                .keys()
                .filter(|k| ["get", "post", "put", "delete", "patch"].contains(&k.as_str()))
                .map(move |m| (m.clone(), path.clone()))
        })
        .collect();
    let served: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    assert_eq!(documented, served);
}

#[test]
fn the_dashboard_serves_the_documented_assets() {
    let spec = spec();
    let documented: BTreeSet<&str> = spec["paths"]["/ui/{asset}"]["get"]["parameters"][0]["schema"]
        ["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let served: BTreeSet<&str> = lockwarden::api::ui::ASSETS
        .iter()
        .map(|(name, _, _)| *name)
        .collect();
    assert_eq!(documented, served);
}

#[test]
fn error_codes_and_acquire_fields_match() {
    let spec = spec();
    let codes: BTreeSet<&str> = spec["components"]["schemas"]["ErrorCode"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let ours: BTreeSet<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(codes, ours);
    let acquire = &spec["components"]["schemas"]["AcquireRequest"];
    let fields: BTreeSet<&str> = acquire["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(fields, ACQUIRE_FIELDS.into_iter().collect());
    assert_eq!(acquire["additionalProperties"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_responses_match_their_schemas() {
    let spec = spec();
    let svc = Service::zk_with(|args| {
        args.admin_token = Some("adm".into());
        args.webhook_secret = Some(common::receiver::SECRET.into());
        args.webhook_allow_private = true;
    })
    .await;
    let (s, acquired) = svc
        .acquire(
            "c/x",
            json!({"owner": "o", "lease_ms": 60000, "notify_url": "http://127.0.0.1:9/h"}),
        )
        .await;
    check_response(&spec, "post", "/v1/locks/{name}/acquire", s, &acquired);
    let (s, refused) = svc
        .acquire("c/x", json!({"owner": "p", "lease_ms": 60000}))
        .await;
    check_response(&spec, "post", "/v1/locks/{name}/acquire", s, &refused);
    let (s, bad) = svc.acquire("c/x", json!({"owner": "p"})).await;
    check_response(&spec, "post", "/v1/locks/{name}/acquire", s, &bad);
    let lease = acquired["lease_id"].clone();
    let (s, renewed) = svc.renew("c/x", json!({"lease_id": lease})).await;
    check_response(&spec, "post", "/v1/locks/{name}/renew", s, &renewed);
    let (s, not_owner) = svc
        .renew("c/x", json!({"lease_id": uuid::Uuid::new_v4().to_string()}))
        .await;
    check_response(&spec, "post", "/v1/locks/{name}/renew", s, &not_owner);
    let (s, info) = svc.get("/v1/locks/c%2Fx?owner=o").await;
    check_response(&spec, "get", "/v1/locks/{name}", s, &info);
    // A queue with a caller in it, so that its entries are checked too.
    let waiter = {
        let request = svc
            .http
            .post(format!("{}/v1/locks/c%2Fx/acquire", svc.base))
            .json(&json!({"owner": "w", "lease_ms": 60000, "waiting_ms": 30000}));
        tokio::spawn(request.send())
    };
    common::eventually(Duration::from_secs(10), "a caller queues", || async {
        svc.get("/v1/locks/c%2Fx/queue").await.1["queue"]
            .as_array()
            .is_some_and(|q| !q.is_empty())
    })
    .await;
    let (s, queued) = svc.get("/v1/locks/c%2Fx/queue").await;
    check_response(&spec, "get", "/v1/locks/{name}/queue", s, &queued);
    waiter.abort();
    let (s, listed) = svc.get("/v1/locks?limit=1").await;
    check_response(&spec, "get", "/v1/locks", s, &listed);
    let (s, valid) = svc.get("/v1/locks/c%2Fx/validate?fencing_token=1").await;
    check_response(&spec, "get", "/v1/locks/{name}/validate", s, &valid);
    let (s, released) = svc.release("c/x", lease.as_str().unwrap()).await;
    check_response(&spec, "post", "/v1/locks/{name}/release", s, &released);
    let (s, forbidden) = svc.send("DELETE", "/v1/locks/c%2Fx", None, None).await;
    check_response(&spec, "delete", "/v1/locks/{name}", s, &forbidden);
    let (s, forced) = svc
        .send("DELETE", "/v1/locks/c%2Fx", None, Some("adm"))
        .await;
    check_response(&spec, "delete", "/v1/locks/{name}", s, &forced);
    let (s, bad_name) = svc.get("/v1/locks/a%20b").await;
    check_response(&spec, "get", "/v1/locks/{name}", s, &bad_name);
    for path in ["/healthz", "/readyz"] {
        let (s, body) = svc.get(path).await;
        check_response(&spec, "get", path, s, &body);
    }
    let live_info_keys: BTreeSet<&str> = info
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    // Only a lock in its takeover margin shows `takeover_at` (see the test below).
    let documented: BTreeSet<&str> = lock_info_fields(&spec)
        .filter(|field| *field != "takeover_at")
        .collect();
    assert_eq!(
        live_info_keys, documented,
        "LockInfo with ?owner= shows every documented field"
    );
}

fn lock_info_fields(spec: &Value) -> impl Iterator<Item = &str> {
    spec["components"]["schemas"]["LockInfo"]["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
}

/// A lock whose lease has ended but which may not be taken over yet, as GET and a refused
/// acquire show it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_in_the_takeover_margin_match_their_schemas() {
    let spec = spec();
    let mut args = lockwarden::config::ServeArgs::defaults();
    // Far longer than the test runs: it never leaves the margin.
    args.max_clock_skew_ms = 600_000;
    let svc = Service::start(args).await;
    svc.must_acquire("m", "o", 1).await;
    common::eventually(Duration::from_secs(10), "the lease ends", || async {
        svc.info("m").await["state"] == "expired"
    })
    .await;
    let (s, info) = svc.get("/v1/locks/m?owner=o").await;
    check_response(&spec, "get", "/v1/locks/{name}", s, &info);
    let shown: BTreeSet<&str> = info
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(shown, lock_info_fields(&spec).collect(), "{info}");
    let (s, refused) = svc
        .acquire("m", json!({"owner": "p", "lease_ms": 1000}))
        .await;
    check_response(&spec, "post", "/v1/locks/{name}/acquire", s, &refused);
    assert_eq!(refused["lock"]["takeover_at"], info["takeover_at"]);
}

/// `EventId`'s pattern, written out: a zxid (digits, no leading zero), then optionally `.n`
/// with n at least 1.
fn is_event_id(id: &str) -> bool {
    let number = |s: &str| {
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'))
    };
    match id.split_once('.') {
        None => number(id),
        Some((zxid, n)) => number(zxid) && number(n) && n != "0",
    }
}

/// An open event stream and the schema its events must fit.
pub(crate) struct Followed<'a> {
    spec: &'a Value,
    item_schema: Value,
    stream: SseStream,
    name: &'static str,
}

impl<'a> Followed<'a> {
    /// Opens GET `path_template` at `url`, with the stream's `itemSchema`.
    pub(crate) async fn open(
        spec: &'a Value,
        path_template: &str,
        url: &str,
        last_event_id: Option<&str>,
        name: &'static str,
    ) -> Followed<'a> {
        let response = resolve(
            spec,
            &spec["paths"][path_template]["get"]["responses"]["200"],
        );
        let item_schema = response["content"]["text/event-stream"]["itemSchema"].clone();
        assert!(
            item_schema.is_object(),
            "GET {path_template} describes each event"
        );
        let stream = SseStream::open(url, last_event_id).await;
        assert_eq!(stream.status, StatusCode::OK, "{name}");
        assert!(
            stream.content_type.starts_with("text/event-stream"),
            "{name}"
        );
        Followed {
            spec,
            item_schema,
            stream,
            name,
        }
    }

    /// Reads events up to the first named `last`, checking each as an SSE parser
    /// (schemathesis' among them) presents it: `event`, `id`, and `data` as its text.
    pub(crate) async fn until(&mut self, last: &str) -> Vec<common::sse::SseEvent> {
        let mut seen = Vec::new();
        loop {
            let event = self.stream.next_event(Duration::from_secs(10)).await;
            let item =
                json!({"event": event.event, "id": event.id, "data": event.data.to_string()});
            let at = format!("{} {}", self.name, event.event);
            check(self.spec, &self.item_schema, &item, &at);
            assert!(is_event_id(&event.id), "{at}: {item} has no event id");
            let done = event.event == last;
            seen.push(event);
            if done {
                return seen;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_events_match_their_item_schemas() {
    let spec = spec();
    assert_eq!(
        spec["components"]["schemas"]["EventId"]["pattern"],
        r"^(?:0|[1-9][0-9]*)(?:\.[1-9][0-9]*)?$",
        "is_event_id implements EventId's pattern"
    );
    let svc = Service::zk_with(|args| args.admin_token = Some("adm".into())).await;
    // Held before the prefix stream opens, so that its snapshot lists a lock.
    svc.must_acquire("s/held", "o", 60_000).await;
    let lock_path = "/v1/locks/{name}/events";
    let lock_url = format!("{}/v1/locks/s%2Fx/events", svc.base);
    let mut lock = Followed::open(&spec, lock_path, &lock_url, None, "lock stream").await;
    let prefix_url = format!("{}/v1/events?prefix=s/", svc.base);
    let mut prefix = Followed::open(&spec, "/v1/events", &prefix_url, None, "prefix stream").await;
    assert_eq!(lock.until("snapshot").await.len(), 1, "it starts so");
    let listed = prefix.until("snapshot").await;
    assert_eq!(listed.len(), 1, "a prefix stream starts with its snapshot");
    assert_eq!(listed[0].data["locks"][0]["name"], "s/held");

    let acquired = svc.must_acquire("s/x", "o", 60_000).await;
    let lease = acquired["lease_id"].as_str().unwrap();
    let (s, body) = svc.renew("s/x", json!({"lease_id": lease})).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let (s, body) = svc.release("s/x", lease).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    svc.must_acquire("s/x", "p", 60_000).await;
    let (s, body) = svc
        .send("DELETE", "/v1/locks/s%2Fx", None, Some("adm"))
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let changes = lock.until("force_released").await;
    prefix.until("force_released").await;

    // Resumed after its first change, a stream replays what followed, without a snapshot.
    let after = Some(changes[0].id.as_str());
    let mut resumed = Followed::open(&spec, lock_path, &lock_url, after, "resumed").await;
    let replayed = resumed.until("force_released").await;
    assert!(
        replayed.iter().all(|e| e.event != "snapshot"),
        "{replayed:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spec_is_served_as_is() {
    let svc = Service::memory().await;
    let response = svc
        .http
        .get(format!("{}/openapi.yaml", svc.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers()["content-type"]
        .to_str()
        .unwrap()
        .contains("yaml"));
    assert_eq!(response.text().await.unwrap(), lockwarden::api::OPENAPI);
}

fn serve_help() -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lockwarden"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()
}

/// `serve --help` shows the value of a variable it reads, except a secret's.
#[test]
fn serve_help_never_shows_a_secret_from_the_environment() {
    let secrets = [
        ("LOCKWARDEN_ADMIN_TOKEN", "admin-s3cret"),
        ("LOCKWARDEN_API_TOKEN", "api-s3cret"),
        ("LOCKWARDEN_METRICS_TOKEN", "metrics-s3cret"),
        ("LOCKWARDEN_RECORD_SECRET", "record-s3cret"),
        ("LOCKWARDEN_WEBHOOK_SECRET", "whsec_d2ViaG9vay1zM2NyZXQ="),
        ("LOCKWARDEN_ZK_AUTH", "digest:user:zk-s3cret"),
    ];
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lockwarden"))
        .args(["serve", "--help"])
        .envs(secrets)
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    for (name, value) in secrets {
        assert!(help.contains(&format!("env: {name}")), "{name} is listed");
        assert!(!help.contains(value), "serve --help shows {name}'s value");
    }
}

/// The compose interpolation `${NAME<op>ARG}` at the start of `text`: its name, operator
/// (`:-` or `-` for a default, `:?` or `?` for a required variable, `""` for none), argument,
/// and the text after it.
fn interpolation(text: &str) -> Option<(&str, &str, &str, &str)> {
    let inner = text.strip_prefix("${")?;
    let (body, rest) = inner.split_once('}')?;
    let name_end = body
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(body.len());
    let (name, tail) = body.split_at(name_end);
    let operator = [":-", ":?", "-", "?"]
        .into_iter()
        .find(|op| tail.starts_with(op))
        .unwrap_or("");
    Some((name, operator, &tail[operator.len()..], rest))
}

/// The address a short-syntax port `[HOST:]PUBLISHED:TARGET` is published on when no
/// variable is set; `None` for every interface (no HOST, or a variable without a default).
fn default_bind(port: &str) -> Option<std::net::IpAddr> {
    let parts: Vec<&str> = port.rsplitn(3, ':').collect();
    let host = *parts.get(2)?;
    let host = match interpolation(host) {
        Some((_, ":-", default, "")) => default,
        Some(_) => return None,
        None => host,
    };
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

/// What docker-compose.yml must be given: the admin token, the API token every `/v1` call
/// carries, and the record secret the replicas share.
const SECRETS: [&str; 3] = [
    "LOCKWARDEN_ADMIN_TOKEN",
    "LOCKWARDEN_API_TOKEN",
    "LOCKWARDEN_RECORD_SECRET",
];

#[test]
fn docker_compose_and_dockerfile_fit_the_binary() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docker-compose.yml"))
        .unwrap();
    let mut compose: serde_yaml::Value =
        serde_yaml::from_str(&text).expect("docker-compose.yml is valid YAML");
    compose.apply_merge().expect("its merge keys resolve");
    let compose: Value = serde_json::to_value(compose).unwrap();
    let services = compose["services"].as_object().unwrap();
    let zks: Vec<&String> = services.keys().filter(|k| k.starts_with("zk")).collect();
    assert_eq!(zks.len(), 3, "a 3-node ensemble");
    for (i, zk) in zks.iter().enumerate() {
        let env = &services[*zk]["environment"];
        assert_eq!(env["ZOO_MY_ID"].as_u64(), Some(i as u64 + 1));
        let servers = env["ZOO_SERVERS"].as_str().unwrap();
        for other in &zks {
            assert!(
                servers.contains(&format!("={other}:2888:3888")),
                "{zk} lists {other}"
            );
        }
    }
    let help = serve_help();
    let replicas: Vec<&String> = services
        .keys()
        .filter(|k| k.starts_with("lockwarden"))
        .collect();
    assert_eq!(replicas.len(), 2, "two replicas");
    for replica in replicas {
        let service = &services[replica];
        assert_eq!(
            service["build"], ".",
            "{replica} builds the local Dockerfile"
        );
        let env = service["environment"].as_object().unwrap();
        for key in env.keys() {
            assert!(
                // (`env: NAME]` for a secret, whose value help does not show)
                help.contains(&format!("env: {key}=")) || help.contains(&format!("env: {key}]")),
                "{replica} sets {key}, which `lockwarden serve` does not read"
            );
        }
        let connect = env["LOCKWARDEN_ZK"].as_str().unwrap();
        for zk in &zks {
            assert!(
                connect.contains(&format!("{zk}:2181")),
                "{replica} connects to {zk}"
            );
        }
        let listen = env["LOCKWARDEN_LISTEN"].as_str().unwrap();
        let port = listen.rsplit(':').next().unwrap();
        let published = service["ports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p.as_str().unwrap().ends_with(&format!(":{port}")));
        assert!(published, "{replica} publishes its listen port {port}");
        for secret in SECRETS {
            let value = env[secret].as_str().unwrap_or_default();
            assert!(
                matches!(interpolation(value), Some((name, ":?", _, "")) if name == secret),
                "{replica} must refuse to start without {secret} \
                 (${{{secret}:?…}}), not fall back to a value: {value:?}"
            );
        }
        for published in service["ports"].as_array().unwrap() {
            let published = published.as_str().expect("ports in the short syntax");
            let bind =
                default_bind(published).map_or("every interface".to_string(), |ip| ip.to_string());
            assert!(
                default_bind(published).is_some_and(|ip| ip.is_loopback()),
                "{replica} publishes {published} on {bind} by default, not on loopback \
                 (\"${{LOCKWARDEN_BIND:-127.0.0.1}}:HOST_PORT:PORT\")"
            );
        }
    }
    for secret in SECRETS {
        for (at, _) in text.match_indices(&format!("${{{secret}")) {
            let (_, operator, _, _) = interpolation(&text[at..]).unwrap();
            assert_eq!(operator, ":?", "no default for {secret}: {}", &text[at..]);
        }
    }
    let dockerfile =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Dockerfile")).unwrap();
    assert!(dockerfile.contains("target/release/lockwarden"));
    assert!(dockerfile.contains("ENTRYPOINT [\"lockwarden\"]"));
}

#[test]
fn readme_gives_the_two_commands_and_ci_runs_the_test_one() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    assert!(readme.contains("cargo run --release -- serve"));
    assert!(readme.contains("./scripts/test"));
    let ci = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/run")).unwrap();
    assert!(
        ci.lines().any(|line| line.trim() == "./scripts/test"),
        ".ci/run runs the README's test command"
    );
}

/// `lockwarden lock NAME` without a command holds NAME until it is interrupted, and then
/// releases it; releasing its lease from elsewhere makes it exit 75 as a lost lock. So no
/// README example pairs such a hold with `lockwarden release NAME`.
#[test]
fn readme_never_releases_a_lease_that_a_running_lock_command_holds() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let commands: Vec<Vec<&str>> = readme
        .lines()
        .map(|line| line.split('#').next().unwrap().split_whitespace().collect())
        .collect();
    let held: BTreeSet<&str> = commands
        .iter()
        .filter(|words| words.len() >= 3 && words[..2] == ["lockwarden", "lock"])
        .filter(|words| !words.contains(&"--"))
        .map(|words| words[2])
        .collect();
    assert!(
        !held.is_empty(),
        "the README shows holding a lock without a command"
    );
    for words in &commands {
        if words.len() >= 3 && words[..2] == ["lockwarden", "release"] {
            assert!(
                !held.contains(words[2]),
                "the README releases {} by its lease id, which a running `lockwarden lock` holds",
                words[2]
            );
        }
    }
}
