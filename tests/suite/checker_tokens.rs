//! The history checker's token checks, each fed a hand-built history with a planted
//! violation: one token for two leases, tokens that go backwards, a renew or a validate that
//! shows the wrong token; and the fenced resource the workload writes through.

use crate::common;

use common::history::hand_built::{grant, only, run, L, T};
use common::history::{Call, Check, FencedResource, Op};

#[test]
fn one_token_for_two_leases_is_found() {
    let ops = vec![
        grant(1, 0, "lease-a", 10, 0, 10),
        Op::new(1, 0, L, Call::release("lease-a"))
            .at(T + 100, T + 110)
            .ok(),
        grant(2, 0, "lease-b", 10, 200, 210),
    ];
    let report = run(ops);
    assert_eq!(report.count(Check::TokenOrder), 1, "{report}");
    assert!(report.violations[0]
        .message
        .contains("token 10 granted twice"));
}

#[test]
fn a_later_grant_with_a_lower_token_is_found() {
    let ops = vec![
        grant(1, 0, "lease-a", 50, 0, 10),
        Op::new(1, 0, L, Call::release("lease-a"))
            .at(T + 100, T + 110)
            .ok(),
        grant(2, 0, "lease-b", 40, 200, 210),
    ];
    let report = run(ops);
    assert_eq!(report.count(Check::TokenOrder), 1, "{report}");
    // Concurrent grants may come in either token order.
    let ops = vec![
        grant(1, 0, "lease-a", 50, 0, 300),
        Op::new(1, 0, L, Call::release("lease-a"))
            .at(T + 400, T + 410)
            .ok(),
        grant(2, 0, "lease-b", 40, 200, 210),
    ];
    assert_eq!(run(ops).count(Check::TokenOrder), 0);
}

#[test]
fn a_renew_that_shows_another_token_is_found() {
    let mut renew = Op::new(1, 0, L, Call::renew("lease-a"))
        .at(T + 100, T + 110)
        .renewed(T + 1105);
    renew.outcome.fencing_token = Some(10);
    assert!(run(vec![grant(1, 0, "lease-a", 10, 0, 10), renew.clone()]).is_clean());
    renew.outcome.fencing_token = Some(11);
    let report = run(vec![grant(1, 0, "lease-a", 10, 0, 10), renew]);
    only(&report, Check::TokenOrder, 1);
    assert!(report.violations[0].message.contains("answered token 11"));
}

#[test]
fn a_stale_validate_is_found() {
    let validate = |at: i64, current: bool| {
        Op::new(3, 0, L, Call::validate(10))
            .at(T + at, T + at + 5)
            .current(current)
    };
    // lease-a lapses at 1009; lease-b (token 20) completes at 1100.
    let base = vec![
        grant(1, 0, "lease-a", 10, 0, 10),
        grant(2, 0, "lease-b", 20, 1050, 1100),
    ];
    let with = |op: Op| {
        let mut ops = base.clone();
        ops.push(op);
        ops
    };
    only(&run(with(validate(1200, true))), Check::StaleValidate, 1);
    assert!(run(with(validate(1200, false))).is_clean());
    // Invoked before the newer grant completed: it may have been answered first.
    assert!(run(with(validate(1080, true))).is_clean());
    // After its own release was acknowledged.
    let ops = vec![
        grant(1, 0, "lease-a", 10, 0, 10),
        Op::new(1, 0, L, Call::release("lease-a"))
            .at(T + 300, T + 310)
            .ok(),
        validate(400, true),
    ];
    let report = run(ops);
    only(&report, Check::StaleValidate, 1);
    assert!(report.violations[0].message.contains("after its release"));
}

#[test]
fn the_fenced_resource_refuses_lower_tokens() {
    let fenced = FencedResource::new();
    assert!(fenced.write(L, 5));
    assert!(fenced.write(L, 7));
    assert!(fenced.write(L, 7));
    assert!(!fenced.write(L, 6));
    assert!(fenced.write("wl/l1", 1));
    assert_eq!((fenced.writes(), fenced.rejections()), (5, 1));
}

/// `grant`, as a permit of a semaphore of `limit`.
fn permit(client: usize, priority: u32, lease: &str, token: u64, at: (i64, i64), limit: u32) -> Op {
    let mut op = grant(client, priority, lease, token, at.0, at.1);
    if let Call::Acquire { limit: l, .. } = &mut op.call {
        *l = Some(limit);
    }
    op
}

#[test]
fn a_semaphores_grants_beyond_its_limit_are_over_limit() {
    // Two permits live until 1009 and 1109; a third granted at 500 is one too many for 2.
    let ops = |limit| {
        vec![
            permit(1, 0, "lease-a", 10, (0, 10), limit),
            permit(2, 0, "lease-b", 20, (100, 110), limit),
            permit(3, 0, "lease-c", 30, (400, 500), limit),
        ]
    };
    only(&run(ops(2)), Check::OverLimit, 1);
    assert!(run(ops(3)).is_clean(), "three permits of three");
    // Two live permits of a semaphore are no overlap of a lock.
    let two = ops(2).into_iter().take(2).collect();
    assert!(run(two).is_clean());
    // A higher priority may have preempted the lowest of them.
    let mut preempting = ops(2);
    preempting[2] = permit(3, 5, "lease-c", 30, (400, 500), 2);
    assert!(run(preempting).is_clean());
}

#[test]
fn a_retried_permits_grant_was_made_by_its_first_attempt() {
    // The first attempt's answer was lost; another permit was granted after its grant; the
    // retry is answered with the first grant's lower token.
    let mut first = Op::new(1, 0, L, Call::acquire("c1", 0, 1000)).at(T, T + 300);
    let mut retry = grant(1, 0, "lease-a", 10, 310, 320);
    for op in [&mut first, &mut retry] {
        if let Call::Acquire {
            request_id, limit, ..
        } = &mut op.call
        {
            *request_id = Some("r1".into());
            *limit = Some(2);
        }
    }
    let ops = vec![
        first.unknown(),
        permit(2, 0, "lease-b", 20, (100, 110), 2),
        retry,
    ];
    assert!(run(ops).is_clean());
}
