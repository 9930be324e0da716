//! Hand-built histories for the checker's own tests: one lock, instance 0, times from a
//! realistic origin, and a run that prints the report.

use super::{check, Call, Check, CheckConfig, History, Op, Report};

/// A realistic unix-ms origin; every hand-built time is `T + something`.
pub const T: i64 = 1_760_000_000_000;
pub const L: &str = "wl/l0";

pub fn acquire(client: usize, priority: u32, lease_ms: u64) -> Op {
    Op::new(
        client,
        0,
        L,
        Call::acquire(&format!("c{client}"), priority, lease_ms),
    )
}

/// A grant answered by instance 0 (offset 0): acquired at `at`, expiring `at + lease`.
pub fn grant(client: usize, priority: u32, lease: &str, token: u64, invoke: i64, done: i64) -> Op {
    acquire(client, priority, 1000)
        .at(T + invoke, T + done)
        .granted(lease, token, T + done - 1, T + done - 1 + 1000)
}

pub fn run(ops: Vec<Op>) -> Report {
    run_with(ops, &CheckConfig::default())
}

pub fn run_with(ops: Vec<Op>, config: &CheckConfig) -> Report {
    let report = check(&History::new(ops), config);
    println!("{report}");
    report
}

pub fn only(report: &Report, check: Check, n: usize) {
    assert_eq!(report.count(check), n, "{report}");
    assert_eq!(report.violations.len(), n, "{report}");
}
