//! The coalescer's pure decisions: which queued writes share a `multi`, and what a failed
//! shared `multi` means for each of them.

use super::{judge, pick, Candidate, Verdict, MAX_BYTES, MAX_OPS};

use std::sync::atomic::{AtomicU64, Ordering};

/// A write of `ops` operations on a node of its own.
fn write(session: i64, ops: usize) -> Candidate {
    static NODES: AtomicU64 = AtomicU64::new(0);
    Candidate {
        session,
        ops,
        bytes: 500,
        alone: false,
        nodes: vec![NODES.fetch_add(1, Ordering::Relaxed)],
    }
}

fn on(node: u64, candidate: Candidate) -> Candidate {
    Candidate {
        nodes: vec![node, u64::MAX],
        ..candidate
    }
}

#[test]
fn nothing_queued_picks_nothing() {
    assert!(pick::<Candidate>(&[]).is_empty());
}

#[test]
fn the_first_write_and_every_later_one_of_its_session_share_in_order() {
    let queue = [
        write(1, 2),
        write(2, 2),
        write(1, 1),
        write(1, 3),
        write(2, 1),
    ];
    assert_eq!(pick(&queue), vec![0, 2, 3]);
}

#[test]
fn a_write_that_must_go_alone_goes_alone_and_is_skipped_by_others() {
    let mut lone = write(1, 2);
    lone.alone = true;
    assert_eq!(pick(&[lone.clone(), write(1, 2)]), vec![0]);
    assert_eq!(pick(&[write(1, 2), lone, write(1, 2)]), vec![0, 2]);
}

#[test]
fn a_multi_stays_within_its_caps() {
    let queue: Vec<Candidate> = (0..200).map(|_| write(1, 2)).collect();
    let picked = pick(&queue);
    assert_eq!(picked.len(), MAX_OPS / 2);
    assert_eq!(picked, (0..MAX_OPS / 2).collect::<Vec<_>>());

    let heavy = || Candidate {
        bytes: MAX_BYTES / 3 + 1,
        ..write(1, 1)
    };
    assert_eq!(pick(&[heavy(), heavy(), heavy(), heavy()]), vec![0, 1]);
    // Stops at the first write that does not fit, so later writes never pass it by.
    assert_eq!(pick(&[heavy(), heavy(), heavy(), write(1, 1)]), vec![0, 1]);
}

#[test]
fn writes_of_one_node_never_share_a_multi() {
    let queue = [
        on(7, write(1, 2)),
        write(1, 2),
        on(7, write(1, 2)),
        on(8, write(1, 1)),
        on(8, write(1, 1)),
    ];
    // Every write here also touches node u64::MAX, so only the first of them goes.
    assert_eq!(pick(&queue), vec![0, 1]);
    let queue = [
        Candidate {
            nodes: vec![7],
            ..write(1, 2)
        },
        Candidate {
            nodes: vec![8, 7],
            ..write(1, 2)
        },
        Candidate {
            nodes: vec![8],
            ..write(1, 2)
        },
    ];
    assert_eq!(pick(&queue), vec![0, 2]);
}

#[test]
fn a_write_bigger_than_the_caps_still_goes_out_alone() {
    let huge = Candidate {
        ops: MAX_OPS + 1,
        ..write(1, 1)
    };
    assert_eq!(pick(&[huge, write(1, 1)]), vec![0]);
}

#[test]
fn only_the_first_write_is_judged_on_the_real_state() {
    // Writes of 2, 3 and 1 operations: 0..2, 2..5, 5..6.
    let sizes = [2, 3, 1];
    assert_eq!(
        judge(&sizes, 0),
        Some(Verdict::Answer { write: 0, index: 0 })
    );
    assert_eq!(
        judge(&sizes, 1),
        Some(Verdict::Answer { write: 0, index: 1 })
    );
    assert_eq!(judge(&sizes, 2), Some(Verdict::Alone { write: 1 }));
    assert_eq!(judge(&sizes, 4), Some(Verdict::Alone { write: 1 }));
    assert_eq!(judge(&sizes, 5), Some(Verdict::Alone { write: 2 }));
    assert_eq!(judge(&sizes, 6), None);
    assert_eq!(judge(&[], 0), None);
}

#[test]
fn a_write_alone_is_always_answered() {
    assert_eq!(judge(&[4], 3), Some(Verdict::Answer { write: 0, index: 3 }));
}
