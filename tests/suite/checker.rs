//! The history checker: each lease check fed a hand-built history with a planted violation,
//! a clean history, the time conversions, the report; and the workload end to end against
//! one instance in memory and one on ZooKeeper. The token checks are in checker_tokens.rs.

use crate::common;

use std::time::Duration;

use common::history::hand_built::{acquire, grant, only, run, run_with, L, T};
use common::history::{
    check, liveness_probe, Call, Check, CheckConfig, History, Op, Workload, WorkloadConfig,
};

#[test]
fn a_clean_history_passes() {
    let ops = vec![
        grant(1, 0, "lease-a", 10, 0, 10), // live until 1009
        Op::new(1, 0, L, Call::renew("lease-a"))
            .at(T + 400, T + 410)
            .renewed(T + 1405),
        Op::new(1, 0, L, Call::validate(10))
            .at(T + 500, T + 505)
            .current(true),
        // client 2 waits; the release hands the lock over in the same write
        grant(2, 0, "lease-b", 20, 300, 620),
        Op::new(1, 0, L, Call::release("lease-a"))
            .at(T + 600, T + 615)
            .ok(),
        Op::new(1, 0, L, Call::validate(10))
            .at(T + 700, T + 705)
            .current(false),
        Op::new(3, 0, L, Call::acquire("c3", 0, 500))
            .at(T + 800, T + 805)
            .refused(409, "lock_held"),
        Op::new(3, 0, L, Call::validate(20))
            .at(T + 900, T + 4000)
            .unknown(),
        // lease-b lapses at 1619; lease-c is granted after it
        grant(3, 0, "lease-c", 30, 1610, 1625),
        Op::new(2, 0, L, Call::renew("lease-b"))
            .at(T + 1700, T + 1705)
            .refused(409, "not_owner"),
    ];
    let report = run(ops);
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.ops, 10);
    assert_eq!(report.grants, 3);
    assert_eq!(report.outcome("acquire", "200"), 3);
    assert_eq!(report.outcome("acquire", "409 lock_held"), 1);
    assert_eq!(report.outcome("validate", "unknown"), 1);
    assert_eq!(report.outcome("renew", "409 not_owner"), 1);
}

#[test]
fn overlapping_grants_are_found() {
    let ops = vec![
        grant(1, 0, "lease-a", 10, 0, 10), // live until 1009
        grant(2, 0, "lease-b", 20, 400, 500),
    ];
    let report = run(ops);
    only(&report, Check::Overlap, 1);
    let v = &report.violations[0];
    assert_eq!(v.ops[..2], [0, 1]);
    assert!(v.message.contains("509 ms of overlap"), "{}", v.message);
}

#[test]
fn an_acknowledged_renew_extends_the_lease() {
    let renew = Op::new(1, 0, L, Call::renew("lease-a"))
        .at(T + 800, T + 810)
        .renewed(T + 1805);
    let later = grant(2, 0, "lease-b", 20, 1200, 1500);
    let report = run(vec![grant(1, 0, "lease-a", 10, 0, 10), later.clone()]);
    assert!(report.is_clean(), "{report}");
    let report = run(vec![grant(1, 0, "lease-a", 10, 0, 10), renew, later]);
    only(&report, Check::Overlap, 1);
}

#[test]
fn an_unacknowledged_renew_does_not_extend_the_lease() {
    let ops = vec![
        grant(1, 0, "lease-a", 10, 0, 10),
        Op::new(1, 0, L, Call::renew("lease-a"))
            .at(T + 800, T + 3800)
            .unknown(),
        grant(2, 0, "lease-b", 20, 1200, 1500),
    ];
    assert!(run(ops).is_clean());
}

#[test]
fn the_last_renew_counts_even_when_it_shortens_the_lease() {
    let ops = vec![
        acquire(1, 0, 2000)
            .at(T, T + 10)
            .granted("lease-a", 10, T + 5, T + 2005),
        Op::new(1, 0, L, Call::renew("lease-a"))
            .at(T + 100, T + 110)
            .renewed(T + 405),
        grant(2, 0, "lease-b", 20, 300, 500),
    ];
    assert!(run(ops).is_clean());
}

/// Its caller cannot tell whether a renew with a shorter length that was not acknowledged
/// landed, so the lease may be counted on only until that length after the renew's invoke.
#[test]
fn an_unknown_renew_may_have_shortened_the_lease() {
    let shorter = |lease_ms| Call::Renew {
        lease_id: "lease-a".to_owned(),
        lease_ms: Some(lease_ms),
        strict: false,
    };
    let history = |lease_ms| {
        vec![
            acquire(1, 0, 2000)
                .at(T, T + 10)
                .granted("lease-a", 10, T + 5, T + 2005),
            Op::new(1, 0, L, shorter(lease_ms))
                .at(T + 100, T + 3100)
                .unknown(),
            grant(2, 0, "lease-b", 20, 600, 700),
        ]
    };
    assert!(run(history(300)).is_clean());
    only(&run(history(1000)), Check::Overlap, 1);
    // A later refusal is no lost lease once that length has passed, nor is the refusal of
    // such a renew itself.
    let refused = |at: i64, done: i64, lease_ms: Option<u64>| {
        let call = Call::Renew {
            lease_id: "lease-a".to_owned(),
            lease_ms,
            strict: false,
        };
        Op::new(1, 0, L, call)
            .at(T + at, T + done)
            .refused(409, "not_owner")
    };
    let granted = || grant(1, 0, "lease-a", 10, 0, 10);
    let shortened = Op::new(1, 0, L, shorter(300))
        .at(T + 100, T + 3100)
        .unknown();
    assert!(run(vec![granted(), shortened.clone(), refused(500, 505, None)]).is_clean());
    assert!(run(vec![granted(), refused(500, 700, Some(100))]).is_clean());
    only(
        &run(vec![granted(), refused(500, 700, Some(1000))]),
        Check::LostLease,
        1,
    );
    only(
        &run(vec![granted(), shortened, refused(50, 55, None)]),
        Check::LostLease,
        1,
    );
}

#[test]
fn a_release_call_ends_the_lease_whatever_its_answer() {
    let ops = vec![
        grant(1, 0, "lease-a", 10, 0, 10),
        Op::new(1, 0, L, Call::release("lease-a"))
            .at(T + 300, T + 3300)
            .unknown(),
        grant(2, 0, "lease-b", 20, 250, 350),
    ];
    assert!(run(ops).is_clean());
}

#[test]
fn preemption_by_a_higher_priority_is_no_overlap_nor_a_lost_lease() {
    let ops = vec![
        grant(1, 0, "lease-a", 10, 0, 10),
        grant(2, 3, "lease-b", 20, 100, 200),
        Op::new(1, 0, L, Call::renew("lease-a"))
            .at(T + 300, T + 310)
            .refused(409, "not_owner"),
    ];
    assert!(run(ops).is_clean());
    // Equal priority never preempts.
    let ops = vec![
        grant(1, 2, "lease-a", 10, 0, 10),
        grant(2, 2, "lease-b", 20, 100, 200),
    ];
    only(&run(ops), Check::Overlap, 1);
}

#[test]
fn an_unknown_higher_priority_acquire_may_have_preempted() {
    let preemptor = Op::new(3, 0, L, Call::acquire("c3", 5, 1000))
        .at(T + 50, T + 3050)
        .unknown();
    let ops = vec![
        grant(1, 0, "lease-a", 10, 0, 10),
        preemptor.clone(),
        grant(2, 0, "lease-b", 20, 100, 200),
    ];
    assert!(run(ops).is_clean());
    // A lower one could not have.
    let mut lower = preemptor;
    lower.call = Call::acquire("c3", 0, 1000);
    let ops = vec![
        grant(1, 0, "lease-a", 10, 0, 10),
        lower,
        grant(2, 0, "lease-b", 20, 100, 200),
    ];
    only(&run(ops), Check::Overlap, 1);
}

/// `409 lease_ended` says the call was granted, and its grant ended before it was answered:
/// it may have preempted the holder.
#[test]
fn a_higher_priority_acquire_answered_lease_ended_may_have_preempted() {
    let preemptor = Op::new(3, 0, L, Call::acquire("c3", 5, 1000))
        .at(T + 50, T + 250)
        .refused(409, "lease_ended");
    let refused_renew = Op::new(1, 0, L, Call::renew("lease-a"))
        .at(T + 300, T + 305)
        .refused(409, "not_owner");
    let granted = || grant(1, 0, "lease-a", 10, 0, 10);
    assert!(run(vec![granted(), preemptor.clone(), refused_renew.clone()]).is_clean());
    // Any other refusal took nothing.
    let mut held = preemptor;
    held.outcome.error = Some("lock_held".to_owned());
    only(
        &run(vec![granted(), held, refused_renew]),
        Check::LostLease,
        1,
    );
}

#[test]
fn tolerance_absorbs_clock_jitter() {
    let ops = vec![
        grant(1, 0, "lease-a", 10, 0, 10), // live until 1009
        grant(2, 0, "lease-b", 20, 990, 1006),
    ];
    only(&run(ops.clone()), Check::Overlap, 1);
    let config = CheckConfig {
        tolerance_ms: 5,
        ..CheckConfig::default()
    };
    assert!(run_with(ops, &config).is_clean());
}

#[test]
fn service_times_are_converted_with_the_instance_offset() {
    // Instance 1 runs 5 s ahead: its expires_at T+6005 is T+1005 on the test clock.
    let mut a = acquire(1, 0, 1000)
        .at(T, T + 10)
        .granted("lease-a", 10, T + 5005, T + 6005);
    a.instance = 1;
    let b = grant(2, 0, "lease-b", 20, 1100, 1200);
    let skewed = CheckConfig::with_offsets(vec![0, 5000]);
    assert!(run_with(vec![a.clone(), b.clone()], &skewed).is_clean());
    let report = run_with(vec![a, b], &CheckConfig::default());
    only(&report, Check::Overlap, 1);
}

#[test]
fn a_hand_off_written_by_another_instance_uses_that_instance_s_clock() {
    // Client 2 waits on instance 0; instance 1 (5 s ahead) releases and writes the hand-off
    // at T+600 (its T+5600): the answer carries instance 1's times.
    let ops = vec![
        grant(1, 0, "lease-a", 10, 0, 10),
        grant(2, 0, "lease-b", 20, 100, 610).granted("lease-b", 20, T + 5600, T + 6600),
        Op::new(1, 1, L, Call::release("lease-a"))
            .at(T + 590, T + 605)
            .ok(),
        grant(3, 0, "lease-c", 30, 1700, 1710),
    ];
    let report = run_with(ops, &CheckConfig::with_offsets(vec![0, 5000]));
    assert!(report.is_clean(), "{report}");
    assert!(report.notes.is_empty(), "{report}");
}

#[test]
fn a_lost_lease_is_found() {
    let renew = |at: i64| {
        Op::new(1, 0, L, Call::renew("lease-a"))
            .at(T + at, T + at + 5)
            .refused(409, "not_owner")
    };
    let report = run(vec![grant(1, 0, "lease-a", 10, 0, 10), renew(300)]);
    only(&report, Check::LostLease, 1);
    assert!(report.violations[0].message.contains("704 ms before"));
    // Invoked well before the end, but answered after it: decided after a takeover, maybe.
    let slow = Op::new(1, 0, L, Call::renew("lease-a"))
        .at(T + 600, T + 1800)
        .refused(409, "not_owner");
    assert!(run(vec![grant(1, 0, "lease-a", 10, 0, 10), slow]).is_clean());
    // Past the known end, or within the margin, a refusal is fine (lazy expiry is no promise).
    assert!(run(vec![grant(1, 0, "lease-a", 10, 0, 10), renew(1100)]).is_clean());
    let margin = CheckConfig {
        renew_margin_ms: 100,
        ..CheckConfig::default()
    };
    assert!(run_with(vec![grant(1, 0, "lease-a", 10, 0, 10), renew(950)], &margin).is_clean());
    // An unacknowledged renew says nothing.
    let unknown = renew(300).unknown();
    assert!(run(vec![grant(1, 0, "lease-a", 10, 0, 10), unknown]).is_clean());
}

/// Every instance waits `max_skew_ms` past a lease's end on its own clock before it takes
/// the lease over; the one whose clock runs furthest ahead of the clock that wrote the expiry
/// comes first. CI's chaos run: instance 1, 5 s behind, wrote a lease that the others could
/// take 500 ms after its end, and a renew slowed by the faults was answered after that.
#[test]
fn a_refusal_is_judged_against_the_first_possible_takeover() {
    let skew = |offsets: Vec<i64>| CheckConfig {
        max_skew_ms: 5500,
        ..CheckConfig::with_offsets(offsets)
    };
    let renew = |done: i64| {
        Op::new(1, 0, L, Call::renew("lease-a"))
            .at(T + 900, T + done)
            .refused(409, "not_owner")
    };
    // Written by instance 0; instance 1 runs 5 s ahead: taken over from t+1509 at the
    // earliest. (Instance 1 takes part in the history, so its clock counts.)
    let on_one = Op::new(3, 1, L, Call::validate(10))
        .at(T + 50, T + 60)
        .current(true);
    let ahead = skew(vec![0, 5000]);
    let history = |done| {
        vec![
            grant(1, 0, "lease-a", 10, 0, 10),
            on_one.clone(),
            renew(done),
        ]
    };
    let report = run_with(history(1300), &ahead);
    only(&report, Check::LostLease, 1);
    assert!(report.violations[0].message.contains("209 ms before"));
    assert!(run_with(history(1600), &ahead).is_clean());
    // An instance with no call in the history takes no part.
    let alone = vec![grant(1, 0, "lease-a", 10, 0, 10), renew(1600)];
    only(&run_with(alone, &ahead), Check::LostLease, 1);
    // A max skew smaller than the clocks' spread never moves the takeover before the end.
    let too_small = CheckConfig {
        max_skew_ms: 0,
        ..CheckConfig::with_offsets(vec![0, 5000])
    };
    let early = vec![
        grant(1, 0, "lease-a", 10, 0, 10),
        on_one.clone(),
        renew(950),
    ];
    only(&run_with(early, &too_small), Check::LostLease, 1);
    // Without a clock ahead of the writer's, the lease is safe for 5.5 s past its end.
    let history = |done| vec![grant(1, 0, "lease-a", 10, 0, 10), renew(done)];
    only(
        &run_with(history(3000), &skew(vec![0])),
        Check::LostLease,
        1,
    );
    // Written by instance 1, 5 s behind (its expires_at T+1009-5000 is T+1009 here): the
    // others take it over from t+1509.
    let mut behind =
        acquire(1, 0, 1000)
            .at(T, T + 10)
            .granted("lease-a", 10, T + 9 - 5000, T + 1009 - 5000);
    behind.instance = 1;
    let history = |done| vec![behind.clone(), renew(done)];
    only(
        &run_with(history(1300), &skew(vec![0, -5000])),
        Check::LostLease,
        1,
    );
    assert!(run_with(history(1600), &skew(vec![0, -5000])).is_clean());
}

#[test]
fn a_force_release_explains_a_lost_lease() {
    let ops = vec![
        grant(1, 0, "lease-a", 10, 0, 10),
        Op::new(9, 0, L, Call::ForceRelease)
            .at(T + 100, T + 110)
            .ok(),
        Op::new(1, 0, L, Call::renew("lease-a"))
            .at(T + 300, T + 305)
            .refused(409, "not_owner"),
    ];
    assert!(run(ops).is_clean());
    // But not one on another lock.
    let ops = vec![
        grant(1, 0, "lease-a", 10, 0, 10),
        Op::new(9, 0, "wl/l1", Call::ForceRelease)
            .at(T + 100, T + 110)
            .ok(),
        Op::new(1, 0, L, Call::renew("lease-a"))
            .at(T + 300, T + 305)
            .refused(409, "not_owner"),
    ];
    only(&run(ops), Check::LostLease, 1);
}

#[test]
fn a_lease_granted_twice_is_found() {
    let first = grant(1, 0, "lease-a", 10, 0, 10);
    let again = grant(2, 0, "lease-a", 10, 100, 110);
    only(&run(vec![first.clone(), again]), Check::RegrantedLease, 1);
    // A re-acquire by the holder returns the same lease.
    let mut call = Call::acquire("c1", 0, 1000);
    if let Call::Acquire { lease_id, .. } = &mut call {
        *lease_id = Some("lease-a".to_owned());
    }
    let reacquire =
        Op::new(1, 0, L, call)
            .at(T + 100, T + 110)
            .granted("lease-a", 10, T + 5, T + 1105);
    assert!(run(vec![first.clone(), reacquire]).is_clean());
    // So does a retry with the same request_id.
    let with_id = |op: Op| {
        let mut op = op;
        if let Call::Acquire { request_id, .. } = &mut op.call {
            *request_id = Some("req-1".to_owned());
        }
        op
    };
    let retry = with_id(grant(1, 0, "lease-a", 10, 100, 110));
    assert!(run(vec![with_id(first), retry]).is_clean());
}

#[test]
fn the_report_prints_counts_and_violations() {
    let ops = vec![
        grant(1, 0, "lease-a", 10, 0, 10),
        grant(2, 0, "lease-b", 20, 400, 500),
    ];
    let mut history = History::new(ops);
    history.fenced_writes = 2;
    history.fenced_rejections = 1;
    let text = check(&history, &CheckConfig::default()).to_string();
    assert!(text.contains("2 ops, 2 grants, 1 violations"), "{text}");
    assert!(text.contains("fenced writes 2 (rejected 1)"), "{text}");
    assert!(text.contains("acquire 200: 2"), "{text}");
    assert!(text.contains("overlap 1, token_order 0"), "{text}");
    assert!(text.contains("[overlap] lock wl/l0: #1 c2@i0"), "{text}");
}

/// Runs 16 clients for 8 s against `url` (on 4 locks, a semaphore and an election) and
/// checks the history and liveness.
async fn workload_against(url: String, seed: u64) {
    let mut config = WorkloadConfig::new(vec![url]);
    config.seed = seed;
    config.semaphores = 1;
    config.elections = 1;
    let history = Workload::run(config.clone()).await;
    let report = check(&history, &CheckConfig::default());
    println!("{report}");
    assert!(report.ops > 200, "{report}");
    assert!(report.grants > 20, "{report}");
    assert!(report.outcome("renew", "200") > 0, "{report}");
    assert!(report.outcome("validate", "200") > 0, "{report}");
    assert!(report.is_clean(), "{report}");
    // The election's answers are read as a lock's: a won campaign has its term and times,
    // and its renewals are strict and acknowledged with the leader's expiry.
    let election = &config.election_names()[0];
    let ops: Vec<&Op> = history
        .ops
        .iter()
        .filter(|op| &op.lock == election)
        .collect();
    let won = ops.iter().filter(|op| {
        let o = &op.outcome;
        matches!(op.call, Call::Acquire { .. })
            && o.is_ok()
            && o.acquired == Some(true)
            && o.fencing_token.is_some()
            && o.expires_at.is_some()
            && o.acquired_at.is_some()
    });
    assert!(won.count() > 0, "{report}");
    let renewed = ops.iter().filter(|op| {
        matches!(op.call, Call::Renew { strict: true, .. })
            && op.outcome.is_ok()
            && op.outcome.expires_at.is_some()
    });
    assert!(renewed.count() > 0, "{report}");
    let locks = config.lock_names();
    let failures = liveness_probe(
        &config.urls,
        &locks,
        &config.kinds(),
        Duration::from_secs(20),
    )
    .await;
    assert!(failures.is_empty(), "{failures:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workload_in_memory_leaves_a_clean_history() {
    let service = common::Service::memory().await;
    workload_against(service.base.clone(), 11).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workload_on_zookeeper_leaves_a_clean_history() {
    let service = common::Service::zk().await;
    workload_against(service.base.clone(), 12).await;
}

/// A strict renewal (an election's) acknowledged after its lease's end is a leader back
/// after `no_leader`; before the end, or after a renewal that may have landed, it is not.
/// Its refusal after the end, before anyone may take over, is no lost lease.
#[test]
fn a_strict_renewal_after_the_lease_ended_is_a_lapsed_leader() {
    let strict = || Call::Renew {
        lease_id: "lease-a".to_owned(),
        lease_ms: None,
        strict: true,
    };
    // lease-a lives until T+1009.
    let late = |at: i64| {
        vec![
            grant(1, 0, "lease-a", 10, 0, 10),
            Op::new(1, 0, L, strict())
                .at(T + at, T + at + 5)
                .renewed(T + at + 1000),
        ]
    };
    assert!(run(late(900)).is_clean());
    only(&run(late(1100)), Check::LapsedLeader, 1);
    let mut excused = late(1100);
    excused.insert(
        1,
        Op::new(1, 0, L, Call::renew("lease-a"))
            .at(T + 500, T + 3500)
            .unknown(),
    );
    assert!(
        run(excused).is_clean(),
        "an unknown renewal may have landed"
    );
    let config = CheckConfig {
        max_skew_ms: 1000,
        ..CheckConfig::default()
    };
    let refused = vec![
        grant(1, 0, "lease-a", 10, 0, 10),
        Op::new(1, 0, L, strict())
            .at(T + 1100, T + 1105)
            .refused(409, "not_leader"),
    ];
    assert!(run_with(refused.clone(), &config).is_clean());
    // Refused before the end, by a call that lasted a whole lease: a round of its own may
    // have landed (its answer lost) and moved the end, decided on a clock of its own.
    let long = |done: i64| {
        let call = Call::Renew {
            lease_id: "lease-a".to_owned(),
            lease_ms: Some(300),
            strict: true,
        };
        vec![
            acquire(1, 0, 2000)
                .at(T, T + 10)
                .granted("lease-a", 10, T + 5, T + 2005),
            Op::new(1, 0, L, call)
                .at(T + 20, T + done)
                .refused(409, "not_leader"),
        ]
    };
    assert!(run_with(long(400), &config).is_clean());
    only(&run_with(long(25), &config), Check::LostLease, 1);
    let mut lazy = refused;
    lazy[1].call = Call::renew("lease-a");
    only(&run_with(lazy, &config), Check::LostLease, 1);
}

/// An election in a chaos run's history: its ops carry what the `Endpoint` reads from the
/// election API's answers (`elected`, `term`, the leader's `elected_at` and `expires_at`),
/// and the checker judges the election as a lock of one holder. A clean history passes;
/// each planted violation is found: two live leaders (`overlap`), a term that goes back
/// (`token_order`), a stale `current: true` (`stale_validate`), a leader renewed after its
/// lease ended (`lapsed_leader`) and `not_leader` while it led (`lost_lease`).
#[test]
fn an_election_is_judged_as_a_lock_of_one_holder() {
    use common::history::hand_built::{answered, elected, election, renewed, E};
    use serde_json::json;
    let validate = |client: usize, term: u64, at: i64, current: bool| {
        let mut op = Op::new(client, 0, E, Call::validate(term)).at(T + at, T + at + 5);
        op.outcome = answered(200, json!({"current": current}));
        op
    };
    // A resignation that hands over: the answer shows the next leader.
    let resign = |client: usize, lease: &str, at: i64, next: Option<(usize, u64)>| {
        let mut op = Op::new(client, 0, E, Call::release(lease)).at(T + at, T + at + 15);
        let shown = match next {
            Some((leader, term)) => election(leader, term, at + 14, at + 1014),
            None => json!({"name": E, "candidates": 0, "requestor": null, "leader": null}),
        };
        op.outcome = answered(200, json!({"resigned": true, "election": shown}));
        op
    };
    let first = elected(1, "lease-a", 10, 0, 10); // leads until 1009
    assert_eq!(first.outcome.acquired, Some(true));
    assert_eq!(first.outcome.fencing_token, Some(10));
    assert_eq!(first.outcome.acquired_at, Some(T + 9));
    assert_eq!(first.outcome.expires_at, Some(T + 1009));
    let clean = vec![
        first.clone(),
        renewed(1, "lease-a", 10, 400, 410, Some(1410)),
        validate(1, 10, 500, true),
        // client 2 waits; the resignation hands over in the same write
        elected(2, "lease-b", 20, 300, 620),
        resign(1, "lease-a", 600, Some((2, 20))),
        validate(1, 10, 700, false),
        validate(2, 20, 710, true),
        renewed(2, "lease-b", 20, 900, 905, Some(1905)),
        resign(2, "lease-b", 1000, None),
    ];
    let report = run(clean.clone());
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.grants, 2);
    assert_eq!(report.outcome("renew", "200"), 2);

    // Two live leaders: the second campaign won while the first lease was live.
    let report = run(vec![first.clone(), elected(2, "lease-b", 20, 400, 500)]);
    only(&report, Check::Overlap, 1);
    assert!(
        report.violations[0].message.contains("chaos/e0"),
        "{report}"
    );

    // A term that goes back: a campaign won after another completed, with a lower term.
    let report = run(vec![
        elected(1, "lease-a", 50, 0, 10),
        resign(1, "lease-a", 100, None),
        elected(2, "lease-b", 40, 200, 210),
    ]);
    assert_eq!(report.count(Check::TokenOrder), 1, "{report}");

    // A stale `current: true`: term 10 after term 20 was elected.
    let mut stale = clean.clone();
    stale.push(validate(3, 10, 800, true));
    let report = run(stale);
    only(&report, Check::StaleValidate, 1);

    // A leader renewed after its lease ended: `no_leader` was told, and then it led again.
    only(
        &run(vec![
            first.clone(),
            renewed(1, "lease-a", 10, 1100, 1105, Some(2105)),
        ]),
        Check::LapsedLeader,
        1,
    );

    // `not_leader` while it led is a lost lease; after the end it is the rule (I17), even
    // before anyone may take over.
    let config = CheckConfig {
        max_skew_ms: 1000,
        ..CheckConfig::default()
    };
    let refused = |at: i64| vec![first.clone(), renewed(1, "lease-a", 10, at, at + 5, None)];
    assert!(run_with(refused(1100), &config).is_clean());
    only(&run_with(refused(500), &config), Check::LostLease, 1);

    // A campaign won on a lease already over on the answering instance's clock (handed over
    // in a write on a clock behind) shows no leader, so no expiry: a strict renewal counts
    // against the latest end the lease could have had, its length after the answer.
    let mut unseen = elected(1, "lease-a", 10, 0, 800);
    unseen.outcome = answered(
        200,
        json!({"elected": true, "lease_id": "lease-a", "term": 10,
            "election": {"name": E, "candidates": 0, "requestor": null, "leader": null}}),
    );
    assert_eq!(unseen.outcome.expires_at, None);
    let late = |at: i64| {
        vec![
            unseen.clone(),
            renewed(1, "lease-a", 10, at, at + 5, Some(at + 1000)),
        ]
    };
    assert!(run(late(1500)).is_clean());
    only(&run(late(1900)), Check::LapsedLeader, 1);
    // Its lease may have been written on a clock 5 s behind, and so have ended long before
    // its length after the invoke: `not_leader` right after the answer is no lost lease.
    let skewed = CheckConfig {
        max_skew_ms: 5500,
        ..CheckConfig::with_offsets(vec![0, -5000])
    };
    let refused = vec![unseen.clone(), renewed(1, "lease-a", 10, 810, 815, None)];
    assert!(run_with(refused, &skewed).is_clean());
}
