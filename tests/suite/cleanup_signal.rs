//! How fast the holder's side of preemption is: a higher-priority acquire (a raw HTTP call
//! through another instance) until the command that `lockwarden lock` runs gets SIGTERM.
//! The lease is long (renewals 10 s apart), so only the event stream can carry the cleanup
//! request that fast; the figures are printed, not asserted.

use crate::common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{eventually, stats, unique_root, zk, zk_args, Service};
use serde_json::json;
use tokio::process::Command;

fn unix_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cleanup_request_reaches_the_command_as_sigterm_at_once() {
    let root = unique_root();
    let holder_side = Service::start(zk_args(zk::shared(), &root)).await;
    let preemptor_side = Service::start(zk_args(zk::shared(), &root)).await;
    let dir = tempfile::tempdir().unwrap();
    let mut delays = Vec::new();
    for round in 0..5 {
        let started = dir.path().join(format!("started-{round}"));
        let termed = dir.path().join(format!("term-{round}"));
        let name = format!("signal/{round}");
        let script = format!(
            "trap 'date +%s%N > {t}; exit 0' TERM; echo up > {s}; while :; do sleep 0.01; done",
            t = termed.display(),
            s = started.display()
        );
        let mut holder = Command::new(env!("CARGO_BIN_EXE_lockwarden"))
            .env("LOCKWARDEN_ADDR", &holder_side.base)
            .env_remove("LOCKWARDEN_TOKEN")
            .args([
                "lock",
                &name,
                "--lease",
                "30s",
                "--cleanup",
                "20s",
                "--grace",
                "5s",
            ])
            .args(["--", "sh", "-c", &script])
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        eventually(Duration::from_secs(20), "the command runs", || async {
            !read(&started).is_empty()
        })
        .await;
        // Whether or not the holder's event stream is open yet: its snapshot shows the
        // requestor too.
        let sent = unix_ns();
        let preempt = {
            let (http, url) = (
                preemptor_side.http.clone(),
                format!(
                    "{}/v1/locks/{}/acquire",
                    preemptor_side.base,
                    common::encode(&name)
                ),
            );
            tokio::spawn(async move {
                let body =
                    json!({"owner": "boss", "lease_ms": 5000, "priority": 9, "waiting_ms": 20000});
                http.post(url).json(&body).send().await.unwrap().status()
            })
        };
        eventually(
            Duration::from_secs(15),
            "SIGTERM reaches the command",
            || async { !read(&termed).trim().is_empty() },
        )
        .await;
        let at: u128 = read(&termed).trim().parse().unwrap();
        delays.push((at.saturating_sub(sent)) as f64 / 1e6);
        assert!(preempt.await.unwrap().is_success());
        let _ = holder.wait().await;
    }
    let (p50, p99) = stats(&mut delays);
    println!(
        "preempting call → SIGTERM in the command: p50 {p50:.0} ms, max {p99:.0} ms ({delays:?})"
    );
}
