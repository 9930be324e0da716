//! openapi.yaml survives a fuzzer: schemathesis (`st run --checks all`) drives the real
//! `lockwarden` binary on a real ZooKeeper, with generated valid and invalid requests, and
//! every answer must agree with the spec. Once with `--api-token` (schemathesis presents
//! the token), once with no token at all (the server has only `--admin-token`, the mode
//! whose security the spec once described wrongly), and once as the admin, which is the
//! only caller that can force-release a lock.
//!
//! `scripts/install-test-deps` installs schemathesis in a venv; `LOCKWARDEN_ST` names
//! another `st`, `LOCKWARDEN_ST_SEED` another seed (the default one keeps CI repeatable) and
//! `LOCKWARDEN_ST_EXAMPLES` another number of test cases per operation, for a longer hunt.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{unique_root, zk, zk_flags, Process};
use serde_json::{json, Value};

const DEFAULT_ST: &str = "/opt/lockwarden-test-venv/bin/st";
/// Short limits keep every fuzzed call short: a blocking acquire waits at most
/// `MAX_WAITING_MS`, and no lease outlives the run by much.
const MAX_LEASE_MS: u64 = 2_000;
const MAX_WAITING_MS: u64 = 300;
/// Test cases per operation and phase: the three runs, in parallel, take 35–75 s on 2 CPUs.
const MAX_EXAMPLES: &str = "100";
/// A run that takes longer than this per 100 test cases per operation has hung
/// (schemathesis' own request timeout is 5 s).
const RUN_DEADLINE_PER_100: Duration = Duration::from_secs(240);

/// schemathesis' settings beyond its command line. A stream does not end: schemathesis
/// reads one until it has sent `max-stream-events` events or the request timeout has
/// passed, then checks each event it read. The first event (the snapshot, or the first
/// one a `Last-Event-ID` resumes with) comes at once, so one event per call keeps a call
/// to milliseconds instead of the 5-s timeout, over hundreds of calls. tests/suite/contract.rs
/// checks the events of a run of changes, and of a resumed stream, against the same
/// schemas.
const ST_CONFIG: &str = r#"
[[operations]]
include-path-regex = "/events$"
max-stream-events = 1
"#;

const API_TOKEN: &str = "fuzz-api-token";
const ADMIN_TOKEN: &str = "fuzz-admin-token";

fn st_binary() -> PathBuf {
    let st =
        std::env::var_os("LOCKWARDEN_ST").map_or_else(|| PathBuf::from(DEFAULT_ST), PathBuf::from);
    assert!(
        st.is_file(),
        "schemathesis is not installed ({} is missing): run ./scripts/install-test-deps, \
         or set LOCKWARDEN_ST to an `st` of schemathesis 4",
        st.display()
    );
    st
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

fn remove(spec: &mut Value, object: &str, key: &str) {
    let found = spec
        .pointer_mut(object)
        .and_then(Value::as_object_mut)
        .and_then(|o| o.remove(key));
    assert!(
        found.is_some(),
        "openapi.yaml has no {object}/{key}; update tests/schemathesis.rs"
    );
}

fn set(spec: &mut Value, pointer: &str, value: Value) {
    *spec
        .pointer_mut(pointer)
        .unwrap_or_else(|| panic!("openapi.yaml has no {pointer}; update tests/schemathesis.rs")) =
        value;
}

/// openapi.yaml made concrete for the instance under test. The spec's schemas state what
/// any server accepts; where acceptance depends on a server's flags or state, the copy says
/// what *this* one accepts, so that every request generated as valid is valid, and every
/// invalid one must still be refused:
/// - the maxima of `lease_ms`, `cleanup_ms` and `waiting_ms` are the instance's
///   `--max-lease-ms` and `--max-waiting-ms` (the spec gives the defaults), for an acquire
///   and a campaign alike;
/// - `notify_url` must be null. Whether a well-formed URL is accepted depends on the
///   instance and its network, which no schema can say: without `--webhook-secret` every
///   URL is refused; with it, a host that is or resolves to a private address is refused
///   unless `--webhook-allow-private`, and so is one that does not resolve, and the
///   service would look up fuzzed host names, sending DNS queries off this machine. The
///   rules that hold on every instance (the URL's form and length, a host name's length)
///   are in the spec, and tests/suite/bad_input.rs and `api::dto`'s unit tests cover them;
/// - `request_id` is left out (so a body that has one is as refused as any unknown field):
///   a key reused with another body is refused by design (`400`), and the fuzzer would
///   reuse its short keys across bodies; and no schema can say which strings are keys
///   already used, so narrowing it (say, to null) would make valid keys look invalid.
///   tests/suite/bad_input.rs and tests/suite/input_rules.rs cover it;
/// - the dashboard (`/ui`, `/ui/{asset}`) is left out: fixed files for a browser, the same
///   whatever is asked; tests/browser.rs checks their types and headers.
///
/// The event streams stay in, each event checked against its stream's `itemSchema` (see
/// [`ST_CONFIG`]), and so does the listing's `cursor`, any lock name.
fn spec_for_instance(dir: &Path) -> PathBuf {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.yaml")).unwrap();
    let mut spec: Value = serde_yaml::from_str(&text).expect("openapi.yaml is valid YAML");
    // A campaign is an acquire under other names, and a semaphore's is one with a limit:
    // the same limits hold.
    for request in [
        "AcquireRequest",
        "CampaignRequest",
        "SemaphoreAcquireRequest",
    ] {
        let acquire = format!("/components/schemas/{request}/properties");
        set(
            &mut spec,
            &format!("{acquire}/lease_ms/maximum"),
            json!(MAX_LEASE_MS),
        );
        set(
            &mut spec,
            &format!("{acquire}/cleanup_ms/maximum"),
            json!(MAX_LEASE_MS),
        );
        set(
            &mut spec,
            &format!("{acquire}/waiting_ms/maximum"),
            json!(MAX_WAITING_MS),
        );
        set(
            &mut spec,
            &format!("{acquire}/notify_url"),
            json!({"type": "null", "default": null}),
        );
        remove(&mut spec, &acquire, "request_id");
    }
    set(
        &mut spec,
        "/components/schemas/RenewRequest/properties/lease_ms/maximum",
        json!(MAX_LEASE_MS),
    );
    remove(&mut spec, "/paths", "/ui");
    remove(&mut spec, "/paths", "/ui/{asset}");
    let path = dir.join("openapi.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&spec).unwrap()).unwrap();
    path
}

struct Run {
    /// For the report: which run this is.
    name: &'static str,
    /// Server flags besides the ZooKeeper ones.
    flags: &'static [&'static str],
    /// The bearer token schemathesis presents on every request, if any.
    token: Option<&'static str>,
    exclude_checks: &'static [&'static str],
}

async fn fuzz(run: Run) {
    let st = st_binary();
    let dir = tempfile::tempdir().unwrap();
    let spec = spec_for_instance(dir.path());
    let config = dir.path().join("schemathesis.toml");
    std::fs::write(&config, ST_CONFIG).unwrap();
    let limits = [
        "--max-lease-ms".to_string(),
        MAX_LEASE_MS.to_string(),
        "--max-waiting-ms".to_string(),
        MAX_WAITING_MS.to_string(),
    ];
    let mut flags = zk_flags(zk::shared(), &unique_root(), run.flags);
    flags.extend(limits);
    let service = Process::start(&flags).await;

    let examples = env_or("LOCKWARDEN_ST_EXAMPLES", MAX_EXAMPLES);
    let hundreds = examples
        .parse::<u32>()
        .map_or(1, |n| n.div_ceil(100).max(1));
    let deadline = RUN_DEADLINE_PER_100 * hundreds;
    let mut command = Command::new(&st);
    command
        .arg("--config-file")
        .arg(&config)
        .arg("run")
        .arg(&spec)
        .args(["--url", &service.base, "--checks", "all"])
        .args(["--max-examples", &examples])
        .args(["--request-timeout", "5"])
        .args(["--generation-database", "none", "--no-color"])
        .args([
            "--seed",
            &std::env::var("LOCKWARDEN_ST_SEED").unwrap_or("20261122".into()),
        ]);
    if !run.exclude_checks.is_empty() {
        command.args(["--exclude-checks", &run.exclude_checks.join(",")]);
    }
    if let Some(token) = run.token {
        command.args(["-H", &format!("Authorization: Bearer {token}")]);
    }
    // Its own directory, so that nothing it writes lands in the repository.
    let log_path = dir.path().join("st.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let started = Instant::now();
    let mut child = command
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", st.display()));
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let output = std::fs::read_to_string(&log_path).unwrap_or_default();
    let summary = output.lines().last().unwrap_or_default().to_owned();
    eprintln!(
        "schemathesis ({}) finished in {:.1} s: {summary}",
        run.name,
        started.elapsed().as_secs_f64()
    );
    match status {
        Some(status) if status.success() => {}
        Some(status) => panic!("schemathesis found disagreements ({status}):\n{output}"),
        None => panic!("schemathesis did not finish within {deadline:?}:\n{output}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spec_holds_with_an_api_token() {
    fuzz(Run {
        name: "API token",
        flags: &[
            "--api-token",
            API_TOKEN,
            "--admin-token",
            ADMIN_TOKEN,
            // The same token, because schemathesis sends one Authorization header everywhere.
            "--metrics-token",
            API_TOKEN,
        ],
        token: Some(API_TOKEN),
        exclude_checks: &[],
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spec_holds_without_any_token() {
    fuzz(Run {
        name: "no token",
        flags: &["--admin-token", ADMIN_TOKEN],
        token: None,
        exclude_checks: &[],
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spec_holds_for_the_admin() {
    fuzz(Run {
        flags: &[
            "--api-token",
            API_TOKEN,
            "--admin-token",
            ADMIN_TOKEN,
            "--metrics-token",
            ADMIN_TOKEN,
        ],
        token: Some(ADMIN_TOKEN),
        name: "admin token",
        // `use_after_free` expects a 404 from a resource after its DELETE. A lock is a name,
        // not a resource that DELETE destroys: after a force release, GET shows it `free` and
        // validate says `current: false`, both 200, as the spec documents. Only the admin
        // can DELETE, so only this run meets that check.
        exclude_checks: &["use_after_free"],
    })
    .await;
}
