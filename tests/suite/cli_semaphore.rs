//! `lockwarden lock NAME -n N`: at most N commands run at once under a semaphore's permits,
//! with the permit in their environment; a lock of the same name is another thing; and
//! `status`, `list` and `watch` show semaphores with `--semaphore`.

use crate::cli::{cli, finish, lines, next_line, stdout_of};
use crate::common::Service;

use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};

use lockwarden::cli::exit;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_n_commands_run_at_once_under_a_semaphore() {
    let service = Service::zk().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    // Each command notes its start and end; three share two permits.
    let script = format!(
        "echo start $LOCKWARDEN_FENCING_TOKEN >> {log}; sleep 0.5; echo end >> {log}",
        log = log.display()
    );
    let mut children: Vec<_> = (0..3)
        .map(|_| {
            cli(&service)
                .args(["lock", "db/pool", "-n", "2", "--wait", "30s", "--"])
                .args(["sh", "-c", &script])
                .spawn()
                .unwrap()
        })
        .collect();
    for child in &mut children {
        assert_eq!(finish(child, "lockwarden lock -n").await.code(), Some(0));
    }
    let lines = lines(&log);
    assert_eq!(lines.len(), 6, "{lines:?}");
    let mut running = 0;
    let mut most = 0;
    for line in &lines {
        running += if line.starts_with("start ") { 1 } else { -1 };
        most = most.max(running);
    }
    assert_eq!(most, 2, "two at once, never three: {lines:?}");
    let mut tokens: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("start "))
        .collect();
    tokens.sort_unstable();
    tokens.dedup();
    assert_eq!(tokens.len(), 3, "a token each: {lines:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_semaphore_refuses_and_a_lock_of_its_name_is_unrelated() {
    let service = Service::zk().await;
    let mut holder = cli(&service)
        .args(["lock", "s", "-n", "1", "--", "sleep", "60"])
        .spawn()
        .unwrap();
    crate::common::eventually(
        std::time::Duration::from_secs(10),
        "the permit is held",
        || async {
            let (_, out) = stdout_of(cli(&service).args(["status", "s", "--semaphore"])).await;
            out.contains("held:          1 of 1")
        },
    )
    .await;
    let (code, _) =
        stdout_of(cli(&service).args(["lock", "s", "-n", "1", "--wait", "0s", "--", "true"])).await;
    assert_eq!(code, i32::from(exit::NOT_ACQUIRED), "no permit left");
    let (code, _) =
        stdout_of(cli(&service).args(["lock", "s", "--wait", "0s", "--", "true"])).await;
    assert_eq!(code, 0, "the lock s is not the semaphore s");
    let (code, listed) = stdout_of(cli(&service).args(["list", "--semaphore"])).await;
    assert_eq!(code, 0);
    assert!(
        listed.starts_with("s held=1/1 waiters=0 holders="),
        "{listed}"
    );
    let (code, json) =
        stdout_of(cli(&service).args(["status", "s", "--semaphore", "--json"])).await;
    assert_eq!(code, 0);
    let shown: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(shown["limit"], 1);
    holder.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_semaphore_prints_each_event_with_its_permit() {
    let service = Service::zk().await;
    let mut watching = cli(&service)
        .args(["watch", "w", "--semaphore"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut watched = BufReader::new(watching.stdout.take().unwrap()).lines();
    let first = next_line(&mut watched).await;
    assert!(first.contains(" snapshot token=- w held=0/- "), "{first}");
    let body = serde_json::json!({"owner": "a", "limit": 2, "lease_ms": 60_000});
    let (_, got) = service.post("/v1/semaphores/w/acquire", body).await;
    let token = &got["fencing_token"];
    let acquired = next_line(&mut watched).await;
    assert!(
        acquired.contains(&format!(" acquired token={token} w held=1/2 ")),
        "{acquired}"
    );
    let lease = serde_json::json!({"lease_id": got["lease_id"]});
    service.post("/v1/semaphores/w/release", lease).await;
    let released = next_line(&mut watched).await;
    assert!(
        released.contains(&format!(" released token={token} w held=0/- ")),
        "{released}"
    );
    watching.kill().await.unwrap();
}
