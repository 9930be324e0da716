//! Hand-built histories for the checker's own tests: one lock, instance 0, times from a
//! realistic origin, and a run that prints the report. An election's ops (`E`) carry the
//! outcomes `parse_outcome` reads from answers shaped as the election API writes them, as
//! in a chaos run.

use serde_json::{json, Value};

use super::{check, parse_outcome, Call, Check, CheckConfig, History, Op, Outcome, Report};

/// A realistic unix-ms origin; every hand-built time is `T + something`.
pub const T: i64 = 1_760_000_000_000;
pub const L: &str = "wl/l0";
/// The chaos run's election.
pub const E: &str = "chaos/e0";

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

/// `T + ms` as the API writes a time (RFC 3339, milliseconds).
pub fn rfc3339(ms: i64) -> String {
    let at = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(T + ms) * 1_000_000)
        .expect("a time");
    at.format(&time::format_description::well_known::Rfc3339)
        .expect("formatted")
}

/// An Election as the API shows it, with client `leader`'s lease of `term` live from
/// `T + elected` to `T + expires` (at `T + expires - 500`, as read).
pub fn election(leader: usize, term: u64, elected: i64, expires: i64) -> Value {
    json!({"name": E, "candidates": 0, "requestor": null, "leader": {
        "candidate": format!("c{leader}"), "value": "", "term": term, "priority": 0,
        "elected_at": rfc3339(elected), "expires_at": rfc3339(expires), "remaining_ms": 500}})
}

/// What the chaos run's `Endpoint` reads from an election's answer.
pub fn answered(status: u16, body: Value) -> Outcome {
    parse_outcome(status, &body.to_string())
}

/// A won campaign of `client` on `E` (instance 0), invoked at `T + invoke` and answered at
/// `T + done`: lease `lease`, term `term`, elected at `done - 1` for 1000 ms.
pub fn elected(client: usize, lease: &str, term: u64, invoke: i64, done: i64) -> Op {
    let mut op = Op::new(client, 0, E, Call::acquire(&format!("c{client}"), 0, 1000))
        .at(T + invoke, T + done);
    op.outcome = answered(
        200,
        json!({"elected": true, "lease_id": lease, "term": term,
            "election": election(client, term, done - 1, done - 1 + 1000)}),
    );
    op
}

/// A strict renewal of `lease` by `client`, invoked at `T + invoke` and answered at
/// `T + done`: acknowledged with the leader's lease now ending at `T + expires`, or
/// refused `409 not_leader` (`expires: None`).
pub fn renewed(
    client: usize,
    lease: &str,
    term: u64,
    invoke: i64,
    done: i64,
    expires: Option<i64>,
) -> Op {
    let call = Call::Renew {
        lease_id: lease.to_owned(),
        lease_ms: None,
        strict: true,
    };
    let mut op = Op::new(client, 0, E, call).at(T + invoke, T + done);
    op.outcome = match expires {
        Some(expires) => answered(200, json!({"election": election(client, term, 0, expires)})),
        None => answered(
            409,
            json!({"error": {"code": "not_leader", "message": "not the leader"},
                "election": {"name": E, "candidates": 0, "requestor": null, "leader": null}}),
        ),
    };
    op
}
