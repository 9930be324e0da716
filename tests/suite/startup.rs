//! The start-up warnings (src/startup.rs) reach the binary's log: on ZooKeeper with nothing
//! else set, one warning line each for the missing API token, the open znode ACLs and the
//! built-in record secret, each naming the flag that closes it; none once those are set.
//! The listen address stays on loopback here; its warnings are unit-tested.

use crate::common;

use common::instance::{Instance, InstanceOptions};
use common::{unique_root, zk, zk_flags};

/// How a start-up warning begins in the log (tracing's plain format, level then target).
const STARTUP_WARNING: &str = "WARN lockwarden::startup: ";

/// Runs the binary on the shared ZooKeeper with `extra` flags and returns its log once it
/// answers /healthz. The warnings are written before it listens, so they are all there.
async fn log_of_a_start(extra: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("lockwarden.log");
    let flags = zk_flags(zk::shared(), &unique_root(), extra);
    let instance = Instance::start(InstanceOptions::new(&flags).log(&log)).await;
    let text = std::fs::read_to_string(&log).unwrap();
    drop(instance);
    assert!(text.contains("lockwarden listening"), "the log: {text}");
    text
}

fn startup_warnings(log: &str) -> Vec<&str> {
    log.lines()
        .filter_map(|line| Some(line.split_once(STARTUP_WARNING)?.1))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_zookeeper_with_nothing_else_set_three_warnings_name_their_flags() {
    let log = log_of_a_start(&[]).await;
    let warnings = startup_warnings(&log);
    assert_eq!(warnings.len(), 3, "{warnings:#?}");
    for flag in ["--api-token", "--zk-auth", "--record-secret"] {
        let naming = warnings.iter().filter(|w| w.contains(flag)).count();
        assert_eq!(naming, 1, "one warning names {flag}: {warnings:#?}");
    }
    assert!(
        !warnings.iter().any(|w| w.contains("--listen")),
        "127.0.0.1 is loopback: {warnings:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_configuration_logs_no_startup_warning() {
    let log = log_of_a_start(&[
        "--api-token",
        "startup-token",
        "--zk-auth",
        "digest:lockwarden:startup-password",
        "--record-secret",
        "startup-secret",
    ])
    .await;
    assert_eq!(startup_warnings(&log), [] as [&str; 0], "the log: {log}");
}

/// A SIGHUP (as `systemctl reload` sends) without a token file is logged and ignored: it
/// does not end the service as the signal's default action would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sighup_without_a_token_file_leaves_the_service_running() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("lockwarden.log");
    let flags = zk_flags(zk::shared(), &unique_root(), &[]);
    let instance = Instance::start(InstanceOptions::new(&flags).log(&log)).await;
    let pid = instance.pid().expect("running") as libc::pid_t;
    // SAFETY: a plain signal to our own child, which has not been reaped.
    unsafe { libc::kill(pid, libc::SIGHUP) };
    common::eventually(
        std::time::Duration::from_secs(10),
        "the SIGHUP is logged",
        || {
            let log = log.clone();
            async move {
                std::fs::read_to_string(&log)
                    .unwrap_or_default()
                    .contains("no --token-file to read again")
            }
        },
    )
    .await;
    let (status, _) = instance.get("/healthz").await;
    assert_eq!(
        status,
        reqwest::StatusCode::OK,
        "still serving after SIGHUP"
    );
}
