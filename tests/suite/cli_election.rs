//! `lockwarden elect`, `leader` and `observe`: a command runs while its candidate leads, with
//! the election in its environment; candidates lead one after another; `leader` says who
//! leads (exit 1 when nobody does), and `observe` prints each change.

use crate::cli::{cli, finish, lines, next_line, stdout_of, wait_for_line};
use crate::common::Service;

use std::process::Stdio;

use lockwarden::cli::exit;
use tokio::io::{AsyncBufReadExt, BufReader};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elected_commands_run_one_after_the_other_with_the_term_in_their_environment() {
    let service = Service::zk().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let script = format!(
        "echo start $LOCKWARDEN_ELECTION $LOCKWARDEN_TERM >> {log}; sleep 0.3; echo end >> {log}",
        log = log.display()
    );
    let mut children: Vec<_> = (0..2)
        .map(|i| {
            cli(&service)
                .args(["elect", "jobs/leader", "--value", &format!("node-{i}")])
                .args(["--lease", "2s", "--wait", "30s", "--", "sh", "-c", &script])
                .spawn()
                .unwrap()
        })
        .collect();
    for child in &mut children {
        assert_eq!(finish(child, "lockwarden elect").await.code(), Some(0));
    }
    let lines = lines(&log);
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(
        lines[1] == "end" && lines[3] == "end",
        "one at a time: {lines:?}"
    );
    let terms: Vec<u64> = [&lines[0], &lines[2]]
        .iter()
        .map(|l| {
            let words: Vec<&str> = l.split(' ').collect();
            assert_eq!(words[1], "jobs/leader", "{l}");
            words[2].parse().unwrap()
        })
        .collect();
    assert!(terms[1] > terms[0], "terms grow: {lines:?}");
    // Both resigned as their commands ended: nobody leads.
    let (code, _) = stdout_of(cli(&service).args(["leader", "jobs/leader"])).await;
    assert_eq!(code, i32::from(exit::NOT_ACQUIRED));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_and_observe_show_who_leads() {
    let service = Service::zk().await;
    let mut observer = cli(&service)
        .args(["observe", "svc"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(observer.stdout.take().unwrap()).lines();
    let first = next_line(&mut out).await;
    assert!(first.ends_with("snapshot no leader"), "{first}");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let mut leading = cli(&service)
        .args([
            "elect",
            "svc",
            "--value",
            "10.0.0.1:80",
            "--candidate",
            "node-1",
        ])
        .args([
            "--",
            "sh",
            "-c",
            &format!("echo started >> {}; sleep 60", log.display()),
        ])
        .spawn()
        .unwrap();
    wait_for_line(&log, "started").await;
    let elected = next_line(&mut out).await;
    assert!(
        elected.contains(" elected candidate=node-1 term=")
            && elected.ends_with("value=10.0.0.1:80"),
        "{elected}"
    );
    let (code, said) = stdout_of(cli(&service).args(["leader", "svc"])).await;
    assert_eq!(code, 0);
    assert!(said.starts_with("candidate=node-1 term="), "{said}");
    let (code, _) =
        stdout_of(cli(&service).args(["elect", "svc", "--wait", "0s", "--", "true"])).await;
    assert_eq!(code, i32::from(exit::NOT_ACQUIRED), "another leads");
    let (code, status) = stdout_of(cli(&service).args(["status", "svc", "--election"])).await;
    assert_eq!(code, 0);
    assert!(status.contains("leader:        node-1"), "{status}");
    let (code, listed) = stdout_of(cli(&service).args(["list", "--election"])).await;
    assert_eq!(code, 0);
    assert!(listed.starts_with("svc candidate=node-1 term="), "{listed}");
    let mut watching = cli(&service)
        .args(["watch", "svc", "--election"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut watched = BufReader::new(watching.stdout.take().unwrap()).lines();
    let first = next_line(&mut watched).await;
    assert!(first.contains(" snapshot candidate=node-1 "), "{first}");
    // SIGTERM reaches the command, which ends; the leader resigns.
    let pid = leading.id().unwrap() as i32;
    // SAFETY: kill has no memory effects; the child is ours and not yet waited for.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    finish(&mut leading, "lockwarden elect").await;
    let gone = next_line(&mut out).await;
    assert!(gone.ends_with("no_leader no leader"), "{gone}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preferred_candidate_stops_the_leaders_command_and_takes_over() {
    let service = Service::zk().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let mut leader = cli(&service)
        .args(["elect", "svc", "--cleanup", "30s", "--", "sh", "-c"])
        .arg(crate::cli::stoppable(&log))
        .spawn()
        .unwrap();
    wait_for_line(&log, "started").await;
    let second = format!("echo second >> {}", log.display());
    let mut preferred = cli(&service)
        .args([
            "elect",
            "svc",
            "--priority",
            "5",
            "--wait",
            "30s",
            "--",
            "sh",
            "-c",
            &second,
        ])
        .spawn()
        .unwrap();
    // Asked to hand over, the leader's command is stopped and the leader resigns.
    assert_eq!(
        finish(&mut leader, "the old leader").await.code(),
        Some(i32::from(exit::LOST))
    );
    assert_eq!(
        finish(&mut preferred, "the preferred candidate")
            .await
            .code(),
        Some(0)
    );
    assert_eq!(lines(&log), ["started", "term", "second"]);
}
