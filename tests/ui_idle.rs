//! What ten open dashboards cost the service while nothing changes (issue 12's target:
//! under 1 % of one CPU). Not part of the regular suite (`#[ignore]`: it takes over two
//! minutes); run it with
//! `cargo test --release --test ui_idle -- --ignored --nocapture`.
//!
//! A `lockwarden` process on a real ZooKeeper holds a few locks, a semaphore's permits and an
//! election's leadership, all with long leases; ten headless Chromiums (ten people: one
//! browser keeps at most 6 connections to a server, and a tab in the background lets its
//! stream go) each open the dashboard, which follows its event stream: six the lock list,
//! two a semaphore's page, two an election's page (the semaphore and election lists are
//! read once, and hold no stream). The service's CPU time (user + system, from /proc/PID/stat) is read over 60 s
//! with nobody watching, then over 60 s with the ten dashboards open.

mod common;

use std::time::{Duration, Instant};

use common::dashboard::{with_browsers, WAIT};
use common::instance::{Instance, InstanceOptions};
use common::{unique_root, zk, zk_flags};
use serde_json::json;

const DASHBOARDS: usize = 10;
const WINDOW: Duration = Duration::from_secs(60);

/// The process's CPU time so far (user + system), in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // After the command name (in parentheses): state is field 3; utime, stime are 14, 15.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf reads a constant of the running system.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    ticks as f64 / per_second
}

/// The share of one CPU the process used over `WINDOW`, in percent.
async fn cpu_share(pid: u32) -> f64 {
    let (before, started) = (cpu_seconds(pid), Instant::now());
    tokio::time::sleep(WINDOW).await;
    (cpu_seconds(pid) - before) / started.elapsed().as_secs_f64() * 100.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "takes two minutes; run on purpose (see the module's doc)"]
async fn ten_idle_dashboards_cost_the_service_under_one_percent_of_a_cpu() {
    let root = unique_root();
    let semaphores = format!("{root}/semaphores");
    let flags = zk_flags(zk::shared(), &root, &["--semaphore-root", &semaphores]);
    let service = Instance::start(InstanceOptions::new(&flags)).await;
    for i in 0..5 {
        let (status, body) = service
            .post(
                &format!("/v1/locks/idle%2Flock-{i}/acquire"),
                json!({"owner": format!("job-{i}"), "lease_ms": 3_600_000}),
            )
            .await;
        assert!(status.is_success(), "{body}");
    }
    let (status, body) = service
        .post(
            "/v1/semaphores/idle%2Fpool/acquire",
            json!({"owner": "worker", "limit": 3, "lease_ms": 3_600_000}),
        )
        .await;
    assert!(status.is_success(), "{body}");
    let (status, body) = service
        .post(
            "/v1/elections/idle%2Flead/campaign",
            json!({"candidate": "node-1", "value": "v", "lease_ms": 3_600_000}),
        )
        .await;
    assert!(status.is_success(), "{body}");
    let pid = service.pid().unwrap();
    let alone = cpu_share(pid).await;
    println!("service alone, idle: {alone:.3} % of a CPU over {WINDOW:?}");

    let url = format!("{}/ui", service.base());
    with_browsers(DASHBOARDS, move |browsers| async move {
        for (i, browser) in browsers.iter().enumerate() {
            let (route, shown) = match i {
                0..=5 => ("", "document.querySelectorAll('#locks tbody tr').length === 5"),
                6 | 7 => (
                    "#/semaphore/idle%2Fpool",
                    "document.querySelectorAll('#holders tbody tr').length === 1",
                ),
                _ => (
                    "#/election/idle%2Flead",
                    "document.querySelector('[data-field=\"leader\"]')?.textContent \
                     === 'node-1'",
                ),
            };
            browser.goto(&format!("{url}{route}")).await;
            browser
                .wait_for(
                    WAIT,
                    "the page follows its event stream and shows what it follows",
                    &format!(
                        "return document.getElementById('connection').dataset.state \
                         === 'live' && {shown};"
                    ),
                )
                .await;
        }
        // The pages' first reads (each lock once) are over before measuring.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let watched = cpu_share(pid).await;
        println!(
            "service with {DASHBOARDS} dashboards open, idle: {watched:.3} % of a CPU over {WINDOW:?}"
        );
        for browser in &browsers {
            let state = browser
                .script("return document.getElementById('connection').dataset.state;", vec![])
                .await;
            assert_eq!(state, "live", "every dashboard still follows its stream");
        }
        assert!(watched < 1.0, "{watched:.3} % of a CPU");
    })
    .await;
}
