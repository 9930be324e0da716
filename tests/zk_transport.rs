//! The ZooKeeper client's socket is served by tokio's reactor (zk-transport, patched in for
//! `async-net`): a ZooKeeper answer wakes the tokio worker that runs the request, not
//! `async-io`'s thread first. Its own test binary, so that no other test's traffic moves the
//! count it reads.

mod common;

use common::Service;

/// Context switches so far of this process's `async-io` thread, if it has one.
fn async_io_switches() -> Option<u64> {
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let dir = task.ok()?.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim() != "async-io" {
            continue;
        }
        let status = std::fs::read_to_string(dir.join("status")).ok()?;
        let switches = status
            .lines()
            .filter(|l| l.contains("ctxt_switches:"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum();
        return Some(switches);
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_answers_do_not_pass_through_the_async_io_thread() {
    let svc = Service::zk().await;
    // Warm up: the first lock creates the root's nodes; the session's timers are set.
    let lease = svc.must_acquire("warm", "t", 60_000).await;
    svc.release("warm", lease["lease_id"].as_str().unwrap())
        .await;

    let before = async_io_switches();
    let cycles = 300;
    for _ in 0..cycles {
        let lease = svc.must_acquire("hot", "t", 60_000).await;
        let (status, _) = svc
            .release("hot", lease["lease_id"].as_str().unwrap())
            .await;
        assert!(status.is_success());
    }
    let after = async_io_switches();
    // Each cycle is two ZooKeeper writes, one after the other. Read through async-io's
    // reactor, each answer would wake its thread (600 switches or more); only its timers
    // (the session's tick, a few a second) may wake it now.
    if let (Some(before), Some(after)) = (before, after) {
        let woken = after - before;
        assert!(
            woken < 60,
            "async-io's thread switched {woken} times over {cycles} lock cycles"
        );
    }
}
