//! The benchmark tool runs every scenario (briefly) against a real service and ZooKeeper.
//! It checks that the tool works; the figures belong in BENCHMARKS.md, not in assertions.

mod common;

use common::receiver::SECRET;
use common::{zk, Service};
use lockwarden::bench::{run, BenchArgs};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_runs_and_reports() {
    let svc = Service::zk_with(|args| {
        args.webhook_secret = Some(SECRET.into());
        args.webhook_allow_private = true;
    })
    .await;
    let mut args = BenchArgs::quick(svc.base.clone(), zk::shared().connect_string());
    args.service_pid = Some(std::process::id());
    let rows = run(args).await.expect("the benchmark runs");
    for scenario in [
        "floor",
        "uncontended",
        "parallel",
        "contended",
        "handoff",
        "preempt",
        "memory",
    ] {
        assert!(
            rows.iter().any(|r| r.scenario.starts_with(scenario)),
            "no {scenario} row in {rows:?}"
        );
    }
    let uncontended = rows
        .iter()
        .find(|r| r.scenario.starts_with("uncontended"))
        .unwrap();
    assert!(uncontended.operations > 0 && uncontended.p50_us > 0.0);
    assert!(
        uncontended.zk_writes_per_op >= 2.0,
        "the server counters are read: {uncontended:?}"
    );
    let preempt = rows
        .iter()
        .find(|r| r.scenario.starts_with("preempt"))
        .unwrap();
    assert!(preempt.operations > 0, "{preempt:?}");
    let listing = rows
        .iter()
        .find(|r| r.scenario.starts_with("memory: list"))
        .unwrap();
    assert!(listing.note.starts_with("200 locks listed"), "{listing:?}");
}
