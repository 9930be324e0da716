//! The `lockwarden` client commands, run as a user runs them: the real binary in child
//! processes against services on a real ZooKeeper, with `sh -c` children that record
//! what happened to them in files.

use crate::common;

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use common::{eventually, zk, zk_args, Service};
use lockwarden::cli::exit;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The lockwarden binary as a client of `service`.
pub(crate) fn cli(service: &Service) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_lockwarden"));
    command
        .env("LOCKWARDEN_ADDR", &service.base)
        .env_remove("LOCKWARDEN_TOKEN")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

pub(crate) async fn finish(child: &mut Child, what: &str) -> ExitStatus {
    tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within 60 s"))
        .unwrap()
}

async fn code(command: &mut Command) -> i32 {
    let mut child = command.spawn().unwrap();
    finish(&mut child, "the command").await.code().unwrap()
}

pub(crate) fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

pub(crate) async fn wait_for_line(path: &Path, line: &str) {
    eventually(Duration::from_secs(20), line, || async {
        lines(path).iter().any(|l| l == line)
    })
    .await;
}

/// A `sh -c` script that records "started", then records "term" when sent SIGTERM and
/// exits 0; it runs until then.
pub(crate) fn stoppable(log: &Path) -> String {
    let log = log.display();
    format!("trap 'echo term >> {log}; exit 0' TERM; echo started >> {log}; while :; do sleep 0.1; done")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_commands_on_one_name_run_one_after_the_other() {
    let service = Service::zk().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let script = format!(
        "echo start $$ >> {log}; sleep 0.3; echo end $$ >> {log}",
        log = log.display()
    );
    let mut children: Vec<Child> = (0..3)
        .map(|_| {
            cli(&service)
                .args(["lock", "jobs/nightly", "--lease", "2s", "--wait", "30s"])
                .args(["--", "sh", "-c", &script])
                .spawn()
                .unwrap()
        })
        .collect();
    for child in &mut children {
        assert_eq!(finish(child, "lockwarden lock").await.code(), Some(0));
    }
    let lines = lines(&log);
    assert_eq!(lines.len(), 6, "{lines:?}");
    let mut pids = Vec::new();
    for pair in lines.chunks(2) {
        let start = pair[0].strip_prefix("start ").expect("a start");
        let end = pair[1]
            .strip_prefix("end ")
            .expect("its end, before any other start");
        assert_eq!(start, end, "{lines:?}");
        pids.push(start.to_owned());
    }
    pids.sort();
    pids.dedup();
    assert_eq!(pids.len(), 3, "each command ran once: {lines:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_higher_priority_stops_the_holders_command_and_then_runs_its_own() {
    let service = Service::zk().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let mut holder = cli(&service)
        .args(["lock", "db/primary", "--lease", "2s", "--cleanup", "20s"])
        .args(["--", "sh", "-c", &stoppable(&log)])
        .spawn()
        .unwrap();
    wait_for_line(&log, "started").await;
    let mut boss = cli(&service)
        .args(["lock", "db/primary", "--priority", "10", "--wait", "30s"])
        .args(["--", "sh", "-c"])
        .arg(format!("echo boss >> {}", log.display()))
        .spawn()
        .unwrap();
    let holder_status = finish(&mut holder, "the holder").await;
    assert_eq!(holder_status.code(), Some(i32::from(exit::LOST)));
    assert_eq!(finish(&mut boss, "the boss").await.code(), Some(0));
    assert_eq!(lines(&log), ["started", "term", "boss"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_force_release_stops_the_command_and_exits_with_the_lost_code() {
    let service = Service::zk_with(|args| args.admin_token = Some("admin-secret".into())).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let mut holder = cli(&service)
        .args(["lock", "deploy/web", "--lease", "2s", "--grace", "5s"])
        .args(["--", "sh", "-c", &stoppable(&log)])
        .spawn()
        .unwrap();
    wait_for_line(&log, "started").await;
    // Without the admin token the service refuses, and nothing happens to the holder.
    let refused = code(cli(&service).args(["force-release", "deploy/web"])).await;
    assert_eq!(refused, i32::from(exit::REFUSED));
    let forced = cli(&service)
        .args(["force-release", "deploy/web", "--token", "admin-secret"])
        .status()
        .await
        .unwrap();
    assert!(forced.success());
    let status = finish(&mut holder, "the holder").await;
    assert_eq!(status.code(), Some(i32::from(exit::LOST)));
    assert_eq!(lines(&log), ["started", "term"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_pass_the_command_through_and_name_each_failure() {
    let service = Service::zk().await;
    let run = |args: &[&str]| {
        let mut command = cli(&service);
        command.args(args).stderr(Stdio::null());
        command
    };
    assert_eq!(
        code(&mut run(&["lock", "e/x", "--", "sh", "-c", "exit 7"])).await,
        7
    );
    assert_eq!(
        code(&mut run(&["lock", "e/x", "sh", "-c", "exit 0"])).await,
        0
    );
    let killed = ["lock", "e/x", "--", "sh", "-c", "kill -9 $$"];
    assert_eq!(code(&mut run(&killed)).await, 128 + 9);
    let env = ["lock", "e/x", "--", "sh", "-c"];
    let script = r#"test "$LOCKWARDEN_LOCK_NAME" = e/x && test -n "$LOCKWARDEN_LEASE_ID" && test "$LOCKWARDEN_FENCING_TOKEN" -gt 0"#;
    assert_eq!(code(run(&env).arg(script)).await, 0, "the environment");
    let missing = ["lock", "e/x", "--", "/nonexistent/command"];
    assert_eq!(code(&mut run(&missing)).await, i32::from(exit::NOT_FOUND));

    let held = service.must_acquire("e/x", "someone-else", 60_000).await;
    let busy = ["lock", "e/x", "--wait", "0s", "--", "true"];
    assert_eq!(code(&mut run(&busy)).await, i32::from(exit::NOT_ACQUIRED));
    let busy = ["lock", "e/x", "--wait", "300ms", "-E", "42", "--", "true"];
    assert_eq!(code(&mut run(&busy)).await, 42);
    let not_an_error = ["lock", "e/x", "--wait", "0s", "-E", "0", "--", "true"];
    assert_eq!(code(&mut run(&not_an_error)).await, 0);
    service
        .release("e/x", held["lease_id"].as_str().unwrap())
        .await;

    let bad_name = ["lock", "e//x", "--", "true"];
    assert_eq!(code(&mut run(&bad_name)).await, i32::from(exit::REFUSED));
    assert_eq!(code(&mut run(&["lock", "e/x", "--lease", "30"])).await, 2);
    assert_eq!(code(&mut run(&["lock", "e/x", "--no-such-flag"])).await, 2);
    let nobody = format!("http://127.0.0.1:{}", zk::free_port());
    let unreachable = [
        "lock",
        "e/x",
        "--addr",
        &nobody,
        "--retry-for",
        "0s",
        "--",
        "true",
    ];
    assert_eq!(
        code(&mut run(&unreachable)).await,
        i32::from(exit::UNREACHABLE)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_command_the_lock_is_held_until_sigterm_then_released() {
    let service = Service::zk().await;
    let mut holder = cli(&service)
        .args(["lock", "hold/me", "--lease", "2s"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(holder.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(20), out.next_line())
        .await
        .expect("the lease is printed")
        .unwrap()
        .unwrap();
    let token = service.info("hold/me").await["fencing_token"]
        .as_u64()
        .unwrap();
    assert!(line.starts_with("lock=hold/me lease_id="), "{line}");
    assert!(line.ends_with(&format!(" fencing_token={token}")), "{line}");
    // The CLI renews: the 2 s lease is still held later, with the same token.
    eventually(Duration::from_secs(20), "three leases' time", || async {
        let info = service.info("hold/me").await;
        assert_eq!(info["state"], "held");
        assert_eq!(info["fencing_token"].as_u64(), Some(token));
        info["acquired_at"].is_string() && holder_ran_for(&info, 6_000)
    })
    .await;
    let pid = i32::try_from(holder.id().unwrap()).unwrap();
    // SAFETY: signals our own child, which has not been waited for.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    assert_eq!(finish(&mut holder, "the holder").await.code(), Some(0));
    assert_eq!(service.info("hold/me").await["state"], "free");
}

/// Whether the holder in `info` acquired at least `ms` before its lease's current expiry
/// minus the lease: i.e. it has renewed for that long.
fn holder_ran_for(info: &serde_json::Value, ms: i64) -> bool {
    let parse = |field: &str| {
        time::OffsetDateTime::parse(
            info[field].as_str().unwrap(),
            &time::format_description::well_known::Rfc3339,
        )
        .unwrap()
    };
    let lease = info["lease_ms"].as_i64().unwrap();
    let held = parse("expires_at") - parse("acquired_at");
    held.whole_milliseconds() as i64 - lease >= ms
}

/// Needs the service's event streams (GET /v1/locks/{name}/events).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_on_one_instance_prints_a_change_made_through_another() {
    let root = common::unique_root();
    let a = Service::start(zk_args(zk::shared(), &root)).await;
    let b = Service::start(zk_args(zk::shared(), &root)).await;
    let mut watcher = cli(&b)
        .args(["watch", "shared/thing"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(watcher.stdout.take().unwrap()).lines();
    let snapshot = next_line(&mut out).await;
    assert!(
        snapshot.contains(" snapshot shared/thing state=free"),
        "{snapshot}"
    );
    let grant = a.must_acquire("shared/thing", "through-a", 30_000).await;
    let token = grant["fencing_token"].as_u64().unwrap();
    let acquired = next_line(&mut out).await;
    assert!(
        acquired.contains(" acquired shared/thing state=held owner=through-a"),
        "{acquired}"
    );
    assert!(acquired.contains(&format!(" token={token}")), "{acquired}");
    a.release("shared/thing", grant["lease_id"].as_str().unwrap())
        .await;
    let released = next_line(&mut out).await;
    assert!(
        released.contains(" released shared/thing state=free"),
        "{released}"
    );
}

pub(crate) async fn next_line(
    out: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
) -> String {
    tokio::time::timeout(Duration::from_secs(20), out.next_line())
        .await
        .expect("an event within 20 s")
        .unwrap()
        .expect("watch keeps running")
}

pub(crate) async fn stdout_of(command: &mut Command) -> (i32, String) {
    let output = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("the command finishes")
        .unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    (output.status.code().unwrap(), text)
}

/// Runs `command`, which must end as a usage error (exit 2); its stderr.
async fn usage_error_of(command: &mut Command) -> String {
    let output = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("the command finishes")
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(
        output.status.code(),
        Some(i32::from(exit::USAGE)),
        "{command:?}: {stderr}"
    );
    stderr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_list_and_release_show_and_act_on_locks() {
    let service = Service::zk().await;
    let first = service.must_acquire("shown/a", "alice", 60_000).await;
    service.must_acquire("shown/b", "bob", 60_000).await;
    service.must_acquire("other", "carol", 60_000).await;

    let (code, table) = stdout_of(cli(&service).args(["list", "--prefix", "shown/"])).await;
    assert_eq!(code, 0);
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0],
        ["NAME", "STATE", "OWNER", "TOKEN", "REMAINING", "WAITERS"]
    );
    assert_eq!(rows.len(), 3, "{table}");
    assert_eq!(rows[1][..3], ["shown/a", "held", "alice"]);
    assert_eq!(rows[2][..3], ["shown/b", "held", "bob"]);
    let (_, json) = stdout_of(cli(&service).args(["list", "--json"])).await;
    let all: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(all.as_array().unwrap().len(), 3);

    let (code, json) = stdout_of(cli(&service).args(["status", "shown/a", "--json"])).await;
    assert_eq!(code, 0);
    let info: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(info["fencing_token"], first["fencing_token"]);
    let (_, text) = stdout_of(cli(&service).args(["status", "shown/a"])).await;
    assert!(text.contains("owner:         alice"), "{text}");

    let wrong = uuid::Uuid::new_v4().to_string();
    let refused = ["release", "shown/a", "--lease-id", &wrong];
    let (code, _) = stdout_of(cli(&service).args(refused).stderr(Stdio::null())).await;
    assert_eq!(
        code,
        i32::from(exit::NOT_ACQUIRED),
        "another lease holds it"
    );
    let lease = first["lease_id"].as_str().unwrap();
    let (code, _) =
        stdout_of(cli(&service).args(["release", "shown/a", "--lease-id", lease])).await;
    assert_eq!(code, 0);
    assert_eq!(service.info("shown/a").await["state"], "free");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_comes_from_lockwarden_token_or_the_flag() {
    let service = Service::zk_with(|args| args.api_tokens = vec!["user-token".into()]).await;
    let take = ["lock", "auth/x", "--", "true"];
    let without = code(cli(&service).args(take).stderr(Stdio::null())).await;
    assert_eq!(without, i32::from(exit::REFUSED));
    let from_env = code(
        cli(&service)
            .args(take)
            .env("LOCKWARDEN_TOKEN", "user-token"),
    )
    .await;
    assert_eq!(from_env, 0);
    let flag = ["lock", "auth/x", "--token", "user-token", "--", "true"];
    assert_eq!(code(cli(&service).args(flag)).await, 0);
}

/// The listing's WAITERS (and `--json`'s `waiters` and `requestor`) are the lock's own, as
/// `status` shows them, not 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_shows_each_locks_waiters_in_its_table_and_json() {
    let service = std::sync::Arc::new(Service::zk().await);
    let holder = serde_json::json!({"owner": "holder", "lease_ms": 60_000, "cleanup_ms": 60_000});
    let (status, body) = service.acquire("queued/job", holder).await;
    assert_eq!(status, reqwest::StatusCode::OK, "{body}");
    service.must_acquire("queued/quiet", "alone", 60_000).await;
    let mut waiting = Vec::new();
    for (owner, priority) in [("next", 0), ("boss", 5)] {
        let service = service.clone();
        let body = serde_json::json!({"owner": owner, "lease_ms": 60_000, "priority": priority,
                                      "waiting_ms": 30_000});
        waiting.push(tokio::spawn(async move {
            service.acquire("queued/job", body).await
        }));
    }
    service.wait_for_waiters("queued/job", 2).await;

    let (code, table) = stdout_of(cli(&service).args(["list", "--prefix", "queued/"])).await;
    assert_eq!(code, 0);
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0].last(), Some(&"WAITERS"), "{table}");
    assert_eq!(rows[1].first(), Some(&"queued/job"), "{table}");
    assert_eq!(rows[1].last(), Some(&"2"), "{table}");
    assert_eq!(rows[2].first(), Some(&"queued/quiet"), "{table}");
    assert_eq!(rows[2].last(), Some(&"0"), "{table}");

    let (code, json) =
        stdout_of(cli(&service).args(["list", "--prefix", "queued/", "--json"])).await;
    assert_eq!(code, 0);
    let locks: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(locks[0]["waiters"], 2, "{locks}");
    assert_eq!(locks[0]["requestor"]["owner"], "boss", "{locks}");
    assert_eq!(locks[1]["waiters"], 0, "{locks}");
    for task in waiting {
        task.abort();
    }
}

/// An `--addr` without a scheme is a usage error at once, naming the form it needs; it was
/// retried for `--retry-for` and then reported as unreachable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_addr_without_a_scheme_is_refused_at_once() {
    let addr = format!("127.0.0.1:{}", zk::free_port());
    for (flag, env) in [(Some(addr.as_str()), None), (None, Some(addr.as_str()))] {
        let mut command = Command::new(env!("CARGO_BIN_EXE_lockwarden"));
        command.args(["status", "some/lock"]).stdin(Stdio::null());
        if let Some(addr) = flag {
            command.args(["--addr", addr]);
        }
        if let Some(addr) = env {
            command.env("LOCKWARDEN_ADDR", addr);
        }
        let started = std::time::Instant::now();
        let stderr = usage_error_of(&mut command).await;
        assert!(
            stderr.contains("http://host:port or https://host:port"),
            "{stderr}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "refused at once, not after retrying: {:?}",
            started.elapsed()
        );
    }
}

/// A duration beyond its flag's limit is a usage error in the unit it was written in, not
/// the service's refusal in milliseconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duration_beyond_its_limit_is_refused_in_the_users_units() {
    let service = Service::zk().await;
    for (args, message) in [
        (
            &["lock", "d/x", "--lease", "48h", "--", "true"][..],
            "--lease must be at most 24h",
        ),
        (
            &["lock", "d/x", "--wait", "10m", "--", "true"][..],
            "--wait must be at most 5m",
        ),
        (
            &["lock", "d/x", "--cleanup", "2000m", "--", "true"][..],
            "--cleanup must be at most 1440m",
        ),
    ] {
        let stderr = usage_error_of(cli(&service).args(args)).await;
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert!(!stderr.contains("_ms"), "{args:?}: {stderr}");
    }
}

/// `force-release` says what happened: released a holder, or found the lock free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_release_of_a_free_lock_says_it_was_already_free() {
    let service = Service::zk_with(|args| args.admin_token = Some("admin-secret".into())).await;
    let force = ["force-release", "fr/x", "--token", "admin-secret"];
    let (code, text) = stdout_of(cli(&service).args(force)).await;
    assert_eq!(code, 0, "{text}");
    assert_eq!(text.trim(), "fr/x was already free; nothing to release");

    service.must_acquire("fr/x", "someone", 60_000).await;
    let (code, text) = stdout_of(cli(&service).args(force)).await;
    assert_eq!(code, 0, "{text}");
    assert_eq!(text.trim(), "force-released fr/x");
    assert_eq!(service.info("fr/x").await["state"], "free");
}

/// Without `$USER` (and `$LOGNAME`) the default owner names the uid's user from the system.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_user_the_default_owner_is_the_uids_name() {
    let service = Service::zk().await;
    let id = std::process::Command::new("id")
        .arg("-un")
        .output()
        .unwrap();
    let user = if id.status.success() {
        String::from_utf8(id.stdout).unwrap().trim().to_owned()
    } else {
        // SAFETY: getuid has no preconditions.
        unsafe { libc::getuid() }.to_string()
    };
    let mut holder = cli(&service)
        .args(["lock", "who/me", "--lease", "10s"])
        .env_remove("USER")
        .env_remove("LOGNAME")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(holder.stdout.take().unwrap()).lines();
    next_line(&mut out).await;
    let owner = service.info("who/me").await["owner"]
        .as_str()
        .unwrap()
        .to_owned();
    let pid = holder.id().unwrap();
    assert!(owner.starts_with(&format!("{user}@")), "{owner}");
    assert!(owner.ends_with(&format!(":{pid}")), "{owner}");
    // SAFETY: signals our own child, which has not been waited for.
    unsafe { libc::kill(i32::try_from(pid).unwrap(), libc::SIGTERM) };
    assert_eq!(finish(&mut holder, "the holder").await.code(), Some(0));
}

/// Each line of `watch` starts with the time it arrived: RFC 3339, UTC, to the millisecond.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_lines_start_with_the_time() {
    let service = Service::zk().await;
    let mut watcher = cli(&service)
        .args(["watch", "timed/thing"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(watcher.stdout.take().unwrap()).lines();
    let snapshot = next_line(&mut out).await;
    service.must_acquire("timed/thing", "o", 30_000).await;
    let acquired = next_line(&mut out).await;
    for line in [&snapshot, &acquired] {
        let (at, rest) = line.split_once(' ').unwrap();
        let parsed =
            time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339)
                .unwrap_or_else(|e| panic!("{line}: {e}"));
        assert_eq!(parsed.offset(), time::UtcOffset::UTC, "{line}");
        assert!(
            at.ends_with('Z') && at.len() == "2026-01-01T00:00:00.000Z".len(),
            "{line}"
        );
        let age = time::OffsetDateTime::now_utc() - parsed;
        assert!(age.whole_seconds().abs() < 60, "{line}");
        assert!(rest.contains("timed/thing"), "{line}");
    }
    assert!(
        acquired.contains(" acquired timed/thing state=held"),
        "{acquired}"
    );
}
