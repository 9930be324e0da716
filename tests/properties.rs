//! Property tests: lock names, the record format, and request bodies, each on inputs that
//! proptest generates, never a panic.
//!
//! 256 cases per property by default; `PROPTEST_CASES=100000 cargo test --release --test
//! properties` runs a long hunt (see CONTRIBUTING.md, "Testing"). Bodies go through the real router
//! (extractors, validation, the in-memory store) with `tower::ServiceExt::oneshot`: this
//! is a test of parsing, which needs no ZooKeeper.

use std::sync::OnceLock;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use lockwarden::config::ServeArgs;
use lockwarden::model::{FencingToken, LeaseId, LockName, UnixMillis};
use lockwarden::record::{Expiry, Forced, Holder, LockRecord, Requestor};
use proptest::prelude::*;
use serde_json::{json, Map, Value};
use tower::ServiceExt;

// ---- lock names ----------------------------------------------------------------------

/// The documented rules, written out independently of `LockName::parse`.
fn follows_the_rules(raw: &str) -> bool {
    let parts: Vec<&str> = raw.split('/').collect();
    !raw.is_empty()
        && raw.len() <= 512
        && parts.len() <= 16
        && parts.iter().all(|part| {
            (1..=128).contains(&part.len())
                && *part != "."
                && *part != ".."
                && part
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        })
}

/// Mostly names near the rules' edges: parts of allowed characters (and some others), with
/// empty, dot and over-long parts, and up to 18 of them.
fn name_like() -> impl Strategy<Value = String> {
    let part = prop_oneof![
        "[A-Za-z0-9._-]{1,8}",
        Just(".".to_string()),
        Just("..".to_string()),
        Just(String::new()),
        "[A-Za-z0-9._-]{120,130}",
        "[A-Za-z0-9 %/\\\\é\u{0}\u{202e}._-]{1,6}",
    ];
    prop::collection::vec(part, 1..18).prop_map(|parts| parts.join("/"))
}

proptest! {
    #[test]
    fn any_string_parses_or_is_refused_by_the_rules(raw in prop_oneof![any::<String>(), name_like()]) {
        match LockName::parse(&raw) {
            Ok(name) => {
                prop_assert!(follows_the_rules(&raw), "accepted {raw:?}");
                prop_assert_eq!(name.as_str(), raw.as_str());
                prop_assert_eq!(name.to_string(), raw.clone());
                prop_assert_eq!(LockName::parse(name.as_str()).unwrap(), name.clone());
                prop_assert_eq!(name.parts().collect::<Vec<_>>().join("/"), raw);
            }
            Err(why) => {
                prop_assert!(!follows_the_rules(&raw), "refused {raw:?}: {why}");
                prop_assert!(!why.is_empty());
            }
        }
    }
}

// ---- the record format ----------------------------------------------------------------

/// Any string a holder or requestor may carry: never `NONE`, which means "nobody".
fn owner() -> impl Strategy<Value = String> {
    any::<String>().prop_filter("NONE means no owner", |s| s != "NONE")
}

/// Durations as the record stores them (decimal strings of non-negative `long`s).
fn ms() -> impl Strategy<Value = u64> {
    prop_oneof![0..100_000u64, 0..=i64::MAX as u64]
}

fn holder() -> impl Strategy<Value = Holder> {
    let expiry = prop_oneof![
        Just(Expiry::Never),
        (i64::MIN..i64::MAX).prop_map(|at| Expiry::At(UnixMillis(at))),
    ];
    (
        (owner(), any::<String>(), expiry, 0..=i32::MAX as u32),
        (prop::option::of(ms()), ms(), any::<bool>()),
        (prop::option::of(any::<u128>()), prop::option::of(ms())),
        (prop::option::of(any::<i64>()), prop::option::of(ms())),
        prop::collection::vec(prop::option::of(any::<String>()), 3),
    )
        .prop_map(
            |(
                (owner, message, expires, priority),
                (waiting_ms, cleanup_ms, forceful),
                (lease, lease_ms),
                (acquired, token),
                strings,
            )| Holder {
                owner,
                message,
                expires,
                priority,
                waiting_ms,
                cleanup_ms,
                forceful,
                lease_id: lease
                    .map(|n| LeaseId::parse(&uuid::Uuid::from_u128(n).to_string()).unwrap()),
                lease_ms,
                acquired_at: acquired.map(UnixMillis),
                fencing_token: token.map(FencingToken),
                notify_url: strings[0].clone(),
                request_id: strings[1].clone(),
                request_digest: strings[2].clone(),
            },
        )
}

fn requestor() -> impl Strategy<Value = Requestor> {
    (
        (owner(), 0..=i32::MAX as u32, prop::option::of(ms())),
        (
            any::<i64>(),
            prop::option::of(any::<String>()),
            any::<bool>(),
        ),
        prop::option::of(any::<i64>()),
    )
        .prop_map(
            |((owner, priority, waiting_ms), (at, waiter, forceful), deadline)| Requestor {
                owner,
                priority,
                waiting_ms,
                requested_at: UnixMillis(at),
                waiter,
                forceful,
                cleanup_deadline: deadline.map(UnixMillis),
            },
        )
}

fn record() -> impl Strategy<Value = LockRecord> {
    (
        // A lock's one holder, or a semaphore's several with its limit.
        prop_oneof![
            prop::option::of(holder()).prop_map(|h| (h.into_iter().collect(), None)),
            (prop::collection::vec(holder(), 0..5), 1..=128u32)
                .prop_map(|(holders, limit)| (holders, Some(limit))),
        ],
        prop::option::of(requestor()),
        prop::option::of(any::<u32>()),
        prop::option::of(prop_oneof![Just(Forced::Admin), Just(Forced::Preemption)]),
        prop::option::of(any::<u128>()),
    )
        .prop_map(
            |((holders, limit), requestor, queued, forced, ended)| LockRecord {
                holders,
                limit,
                requestor,
                queued,
                forced,
                ended_lease: ended
                    .map(|n| LeaseId::parse(&uuid::Uuid::from_u128(n).to_string()).unwrap()),
            },
        )
}

/// A value a foreign writer might leave in a field: numbers in and out of range, junk.
fn field_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(|n| Value::String(n.to_string())),
        any::<u64>().prop_map(|n| Value::String(n.to_string())),
        any::<String>().prop_map(Value::String),
        " ?-?[0-9]{1,25} ?".prop_map(Value::String),
        Just(Value::String("NONE".into())),
        Just(Value::String("true".into())),
        Just(Value::Null),
        any::<f64>().prop_map(|f| json!(f)),
        any::<bool>().prop_map(Value::Bool),
    ]
}

const FIELDS: [&str; 24] = [
    "OWNER",
    "MESSAGE",
    "TIMEOUT",
    "PRIORITY",
    "WAITING_TIMEOUT",
    "CLEANUP_TIMEOUT",
    "REQUESTOR_ID",
    "REQUESTOR_PRIORITY",
    "REQUESTOR_WAITING_TIMEOUT",
    "REQUESTING_TIMESTAMP",
    "LW_LEASE_ID",
    "LW_LEASE_MS",
    "LW_ACQUIRED_AT",
    "LW_FENCING_TOKEN",
    "LW_FORCEFUL",
    "LW_NOTIFY_URL",
    "LW_REQUEST_ID",
    "LW_REQUEST_DIGEST",
    "LW_QUEUED",
    "LW_REQUESTOR_WAITER",
    "LW_REQUESTOR_FORCEFUL",
    "LW_CLEANUP_DEADLINE",
    "id",
    "OTHER",
];

/// ZNRecords with any subset of the known fields, each holding anything.
fn foreign_record() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec((prop::sample::select(&FIELDS[..]), field_value()), 0..24).prop_map(
        |fields| {
            let simple: Map<String, Value> = fields
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect();
            serde_json::to_vec(&json!({"id": "LOCK", "simpleFields": simple})).unwrap()
        },
    )
}

proptest! {
    #[test]
    fn a_generated_record_survives_encode_and_decode(record in record()) {
        prop_assert_eq!(LockRecord::decode(&record.encode()).unwrap(), record);
    }

    #[test]
    fn any_bytes_decode_or_are_refused_without_a_panic(data in prop_oneof![
        prop::collection::vec(any::<u8>(), 0..256),
        any::<String>().prop_map(String::into_bytes),
        record().prop_map(|r| r.encode()),
        record().prop_flat_map(|r| {
            let bytes = r.encode();
            let len = bytes.len();
            (Just(bytes), 0..=len).prop_map(|(b, cut)| b[..cut].to_vec())
        }),
    ]) {
        let _ = LockRecord::decode(&data);
    }

    #[test]
    fn any_simple_fields_read_with_helix_defaults(data in foreign_record()) {
        let record = LockRecord::decode(&data).expect("a ZNRecord always decodes");
        let doc: Value = serde_json::from_slice(&data).unwrap();
        let text = |k: &str| doc["simpleFields"][k].as_str().map(str::to_owned);
        match text("OWNER").as_deref() {
            None | Some("NONE") => prop_assert!(record.holder().is_none()),
            Some(owner) => {
                let holder = record.holder().unwrap();
                prop_assert_eq!(holder.owner.as_str(), owner);
                let priority = text("PRIORITY").and_then(|p| p.trim().parse::<i64>().ok());
                let want = priority.map_or(0, |p| p.clamp(0, i64::from(i32::MAX)) as u32);
                prop_assert_eq!(holder.priority, want, "a missing or unparsable PRIORITY reads as 0");
            }
        }
        if matches!(text("REQUESTOR_ID").as_deref(), None | Some("NONE")) {
            prop_assert!(record.requestor.is_none());
        }
    }
}

// ---- request bodies --------------------------------------------------------------------

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    // Multi-threaded, so the service's background tasks run between the cases too.
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap()
    })
}

/// One router on the in-memory store for every case. `--max-waiting-ms 5` keeps a generated
/// waiting acquire short; without `--webhook-secret`, no `notify_url` is resolved.
fn app() -> Router {
    static APP: OnceLock<Router> = OnceLock::new();
    APP.get_or_init(|| {
        let mut args = ServeArgs::defaults();
        args.max_waiting_ms = 5;
        args.max_clock_skew_ms = 0;
        runtime().block_on(async { lockwarden::server::app(&args).unwrap() })
    })
    .clone()
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("JSON has no NaN or infinity", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        (0..100_000i64).prop_map(|n| json!(n as f64)),
        any::<String>().prop_map(Value::String),
        "[0-9a-f-]{36}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(any::<String>(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

const BODY_FIELDS: [&str; 11] = [
    "owner",
    "lease_ms",
    "message",
    "priority",
    "cleanup_ms",
    "waiting_ms",
    "forceful",
    "notify_url",
    "request_id",
    "lease_id",
    "unknown",
];

/// Objects of the body fields (plus one unknown), each with any JSON value.
fn body_like() -> impl Strategy<Value = Value> {
    prop::collection::vec((prop::sample::select(&BODY_FIELDS[..]), json_value()), 0..8).prop_map(
        |fields| {
            Value::Object(
                fields
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect(),
            )
        },
    )
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => body_like().prop_map(|v| serde_json::to_vec(&v).unwrap()),
        1 => json_value().prop_map(|v| serde_json::to_vec(&v).unwrap()),
        1 => prop::collection::vec(any::<u8>(), 0..64),
    ]
}

/// POSTs a JSON `body` to the router; the answer's status and body.
fn post(path: &str, body: Vec<u8>) -> (StatusCode, Vec<u8>) {
    let request = Request::post(path)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap();
    let app = app();
    runtime().block_on(async {
        let response = app.oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, bytes.to_vec())
    })
}

/// Sends `body` to `op` and checks that the answer is a clean one in the contract's shape.
fn exchange(op: &str, lock: &str, body: Vec<u8>) -> Result<(), TestCaseError> {
    let (status, bytes) = post(&format!("/v1/locks/{lock}/{op}"), body);
    let value = serde_json::from_slice::<Value>(&bytes);
    let value = value.map_err(|e| {
        TestCaseError::fail(format!("{op}: {status} with a body that is not JSON: {e}"))
    })?;
    let allowed = [
        StatusCode::OK,
        StatusCode::BAD_REQUEST,
        StatusCode::FORBIDDEN,
        StatusCode::CONFLICT,
    ];
    prop_assert!(allowed.contains(&status), "{op}: {status} {value}");
    if status != StatusCode::OK {
        prop_assert!(value["error"]["code"].is_string(), "{op}: {value}");
        prop_assert!(value["error"]["message"].is_string(), "{op}: {value}");
    }
    if status == StatusCode::BAD_REQUEST {
        prop_assert_eq!(&value["error"]["code"], "invalid_request");
    }
    Ok(())
}

proptest! {
    #[test]
    fn acquire_bodies_get_an_answer_or_a_clean_error(lock in "[a-c]", body in body()) {
        exchange("acquire", &lock, body)?;
    }

    #[test]
    fn renew_and_release_bodies_get_an_answer_or_a_clean_error(
        lock in "[a-c]",
        op in prop::sample::select(&["renew", "release"][..]),
        body in prop_oneof![
            body(),
            (json_value(), prop::option::of(json_value())).prop_map(|(lease, ms)| {
                let mut body = json!({"lease_id": lease});
                if let Some(ms) = ms { body["lease_ms"] = ms; }
                serde_json::to_vec(&body).unwrap()
            }),
        ],
    ) {
        exchange(op, &lock, body)?;
    }

    #[test]
    fn integral_floats_are_integers_and_fractions_are_refused(n in 1..=86_400_000i64, frac in 1..1000i32) {
        let whole = format!(r#"{{"owner": "o", "lease_ms": {n}.0, "priority": 1.0, "cleanup_ms": 0.0, "waiting_ms": 0.0}}"#);
        let (status, _) = post("/v1/locks/floats/acquire", whole.into_bytes());
        prop_assert!(status == StatusCode::OK || status == StatusCode::CONFLICT, "{status}");
        let fraction = format!(r#"{{"owner": "o", "lease_ms": {n}.{frac:03}}}"#);
        let (status, _) = post("/v1/locks/floats/acquire", fraction.into_bytes());
        prop_assert_eq!(status, StatusCode::BAD_REQUEST);
    }
}
