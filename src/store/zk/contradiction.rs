//! Notices a ZooKeeper server whose copy of a record contradicts the leader's, so that its
//! session can be given up for one on another server.
//!
//! **What a consistent server shows.** A server answers reads from its own copy of the
//! tree, while the leader judges every write. A copy may lag, but never past a session's
//! own writes: the answer to a write reaches the client through the session's server only
//! once that server has applied every write the leader committed before it (a refused write
//! is committed as an error and answered the same way), and the session's next read comes
//! after that answer. So when the leader refuses a conditional write because the record is
//! no longer in the state it was planned on (`BadVersion`, `NoNode`), the next read on that
//! session shows a different state. (This rests on ZooKeeper committing a refused write as
//! an error transaction, as 3.8 does; ZOOKEEPER-3594 proposes to stop that.)
//!
//! **What this module notices.** A read on the same session that shows the *same* state
//! again (the same `mzxid`, the id of the write that made it, which only ever grows) is a
//! contradiction: that server holds a copy of the record the leader does not. Every
//! decision this instance makes on the record is then made on a state that is not the
//! leader's, every write planned on it is refused, and the instance can neither take nor
//! free the lock until another client writes the record through another server; its
//! callers hear 503 meanwhile (RELIABILITY.md). ZooKeeper has open bugs that can leave a
//! server with such a copy after a leader change (ZOOKEEPER-2846, -4643, -4646). An absent
//! record is not tracked: absence is no single state (a record can be created and deleted
//! again), so a refused create proves nothing.
//!
//! **What is done.** Two contradictions in a row on one record and session (one is already
//! impossible on a consistent server; the second costs two rounds and guards against a
//! mistake in the argument above) make the store ask the supervisor to give the session up
//! and build a new one (`ZkSession::report_contradiction`), as for a server that answers no
//! write. The new session may reach the same server (the client picks one at random); the
//! next two contradictions then move it again. Unlike a stalled server's, this server
//! answers the old session's close, so its waiter nodes go with it and this instance's
//! waiting calls answer 503, as after a session expiry: a cost paid only on a server that
//! has shown itself wrong twice.
//!
//! **Safety needs nothing from this.** Writes stay conditional and the leader judges them,
//! so a contradicting copy can only make writes fail, never land on a state they were not
//! planned on. Only fresh reads count (a state this instance remembers from its own write
//! has no `mzxid` here), and a write refused because of another write sharing its `multi`
//! is never reported as refused (`batch.rs`).
//!
//! Keeps I8 (DESIGN.md, "Invariants"): a server that contradicts the leader is given up.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use tracing::warn;

use super::ZkStore;
use crate::model::LockName;
use crate::store::Stored;

/// Contradictions in a row, on one record and session, before its session is given up.
const STRIKES: u32 = 2;

/// Records tracked at once; more (writes refused and never read again) start afresh.
const TRACKED: usize = 1024;

/// The state a write was planned on, or a read found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Basis {
    Absent,
    /// The `mzxid` of the record as read; 0 when unknown (not from a read).
    At(i64),
}

struct Refusal {
    session: i64,
    basis: Basis,
    strikes: u32,
    /// Whether a write was refused since the last read counted.
    unread: bool,
    /// When the last refusal came (`Contradictions::now`).
    at: u64,
}

#[derive(Default)]
pub(super) struct Contradictions {
    refused: Mutex<HashMap<String, Refusal>>,
    /// How many records are tracked, so that a read finds out without the lock that none is.
    tracked: AtomicUsize,
    /// Refusals so far: the clock by which a read tells whether it was sent after one.
    refusals: AtomicU64,
}

impl Contradictions {
    /// The leader refused a write to `path` planned on `basis`, sent on `session`.
    pub(super) fn refused(&self, path: &str, session: i64, basis: Basis) {
        if matches!(basis, Basis::At(0) | Basis::Absent) {
            return;
        }
        let mut refused = self.refused.lock().unwrap_or_else(|e| e.into_inner());
        let at = self.refusals.fetch_add(1, Ordering::SeqCst) + 1;
        if refused.len() >= TRACKED && !refused.contains_key(path) {
            refused.clear();
        }
        match refused.get_mut(path) {
            Some(seen) if seen.session == session && seen.basis == basis => {
                seen.unread = true;
                seen.at = at;
            }
            _ => {
                let fresh = Refusal {
                    session,
                    basis,
                    strikes: 0,
                    unread: true,
                    at,
                };
                refused.insert(path.to_owned(), fresh);
            }
        }
        self.tracked.store(refused.len(), Ordering::Relaxed);
    }

    /// Whether any record is tracked (so that a read need not look).
    pub(super) fn any(&self) -> bool {
        self.tracked.load(Ordering::Relaxed) > 0
    }

    /// Taken just before a read is sent: the read was sent after every refusal recorded
    /// by then. (One sent before a refusal may be answered before the refused write yet
    /// looked at after it, and shows what the write was planned on without contradicting
    /// anything.)
    pub(super) fn now(&self) -> u64 {
        self.refusals.load(Ordering::SeqCst)
    }

    /// A read of `path` on `session`, sent at `sent` (`now`), found `basis`. True when that
    /// makes the contradictions in a row reach `STRIKES`: the session's server should be
    /// given up.
    pub(super) fn read(&self, path: &str, session: i64, basis: Basis, sent: u64) -> bool {
        let mut refused = self.refused.lock().unwrap_or_else(|e| e.into_inner());
        let Some(seen) = refused.get_mut(path) else {
            return false;
        };
        let give_up = if sent < seen.at {
            false
        } else if seen.session != session || seen.basis != basis {
            // Changed (a race lost, as usual), or read on another session: start afresh.
            refused.remove(path);
            false
        } else if seen.unread {
            seen.unread = false;
            seen.strikes += 1;
            let reached = seen.strikes >= STRIKES;
            if reached {
                refused.remove(path);
            }
            reached
        } else {
            false
        };
        self.tracked.store(refused.len(), Ordering::Relaxed);
        give_up
    }
}

impl Basis {
    /// The state a read found.
    pub(super) fn of(found: Option<&Stored>) -> Basis {
        found.map_or(Basis::Absent, |stored| Basis::At(stored.version.mzxid))
    }
}

impl ZkStore {
    /// The leader refused a write to `name`'s record planned on `basis`, sent on `session`.
    pub(super) fn write_refused(&self, name: &LockName, session: i64, basis: Basis) {
        self.contradictions
            .refused(&self.path(name), session, basis);
    }

    /// A fresh read of `name`'s record on `session` found `basis`: the second contradiction
    /// in a row gives the session up.
    pub(super) fn record_read(&self, name: &LockName, session: i64, basis: Basis, sent: u64) {
        if !self.contradictions.any() {
            return;
        }
        if self
            .contradictions
            .read(&self.path(name), session, basis, sent)
        {
            warn!(lock = %name, session = %format!("{session:#x}"),
                "the ZooKeeper server's copy of this record contradicts the leader's twice running; asking for a new session");
            self.session.report_contradiction(session);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATH: &str = "/locks/a";

    #[test]
    fn the_same_state_read_back_twice_after_refusals_gives_the_session_up() {
        let c = Contradictions::default();
        c.refused(PATH, 7, Basis::At(100));
        assert!(!c.read(PATH, 7, Basis::At(100), c.now()));
        c.refused(PATH, 7, Basis::At(100));
        assert!(c.read(PATH, 7, Basis::At(100), c.now()));
        // Counted afresh afterwards.
        c.refused(PATH, 7, Basis::At(100));
        assert!(!c.read(PATH, 7, Basis::At(100), c.now()));
    }

    #[test]
    fn an_absent_record_is_not_tracked() {
        let c = Contradictions::default();
        for _ in 0..3 {
            c.refused(PATH, 7, Basis::Absent);
            assert!(!c.read(PATH, 7, Basis::Absent, c.now()));
        }
        assert!(!c.any());
    }

    #[test]
    fn a_changed_state_another_session_or_an_unknown_basis_count_nothing() {
        let c = Contradictions::default();
        c.refused(PATH, 7, Basis::At(100));
        assert!(
            !c.read(PATH, 7, Basis::At(101), c.now()),
            "it changed: a race lost"
        );
        c.refused(PATH, 7, Basis::At(101));
        assert!(!c.read(PATH, 7, Basis::At(101), c.now()));
        c.refused(PATH, 7, Basis::At(101));
        assert!(
            !c.read(PATH, 8, Basis::At(101), c.now()),
            "another session's read"
        );
        c.refused(PATH, 7, Basis::At(0));
        assert!(!c.read(PATH, 7, Basis::At(0), c.now()));
        c.refused(PATH, 7, Basis::At(102));
        assert!(!c.read(PATH, 7, Basis::At(102), c.now()));
        c.refused(PATH, 7, Basis::At(103));
        assert!(
            !c.read(PATH, 7, Basis::At(103), c.now()),
            "a new basis starts a new count"
        );
    }

    #[test]
    fn reads_without_a_refusal_between_count_once() {
        let c = Contradictions::default();
        c.refused(PATH, 7, Basis::At(100));
        assert!(!c.read(PATH, 7, Basis::At(100), c.now()));
        assert!(!c.read(PATH, 7, Basis::At(100), c.now()));
        assert!(!c.read(PATH, 7, Basis::At(100), c.now()));
        c.refused(PATH, 7, Basis::At(100));
        assert!(c.read(PATH, 7, Basis::At(100), c.now()));
        assert!(!c.read("/locks/other", 7, Basis::At(100), c.now()));
    }

    #[test]
    fn a_read_sent_before_the_refusal_came_counts_nothing() {
        let c = Contradictions::default();
        c.refused(PATH, 7, Basis::At(100));
        assert!(!c.read(PATH, 7, Basis::At(100), c.now()));
        let sent_before = c.now();
        c.refused(PATH, 7, Basis::At(100));
        assert!(
            !c.read(PATH, 7, Basis::At(100), sent_before),
            "sent before the refusal"
        );
        assert!(
            c.read(PATH, 7, Basis::At(100), c.now()),
            "the refusal still counts"
        );
    }
}
