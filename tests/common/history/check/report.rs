//! What the checker reports: the properties it checks ([`Check`]), each violation found,
//! and the [`Report`] of a run, printed for a failing test.

use std::collections::BTreeMap;
use std::fmt;

/// The properties checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Check {
    /// 1. Two grants of one lock live at once (consecutive by token; the later one
    ///    completed before the earlier lease ended, and was no preemption). An election
    ///    is judged as a lock: two live leaders.
    Overlap,
    /// 2. Fencing tokens: one token for two leases, a grant that completed before
    ///    another was invoked has a token that is not lower, or an acknowledged renew
    ///    shows another token than its lease's (renewing keeps the token).
    TokenOrder,
    /// 3. A validate answered `current: true` for a token (an election's term) after a
    ///    grant with a higher token had completed, or after the token's own release was
    ///    acknowledged.
    StaleValidate,
    /// 4. A renew was refused (`409`) and answered before its lease could first be taken
    ///    over, with no preemption or force release that could explain it.
    LostLease,
    /// 5. One `lease_id` returned to two acquires that are not the same request.
    RegrantedLease,
    /// 6. An acquire answered (or given up by its client) later than its `waiting_ms`
    ///    plus [`CheckConfig::answer_within_ms`](super::CheckConfig).
    Unanswered,
    /// 7. Something left in the store after every call ended and the collector's delays
    ///    passed: a free record, or a queue entry ([`History::leftovers`](super::super::History)).
    Garbage,
    /// 8. A strict renewal (an election's, I17) acknowledged although every expiry its
    ///    lease could have had was past on the answering instance's clock when it was
    ///    invoked: a leader renewed after `no_leader`.
    LapsedLeader,
    /// 9. A semaphore's grant completed while `limit` other grants of it were live (by the
    ///    rules of check 1, less one that a higher-priority grant may have preempted).
    OverLimit,
}

impl Check {
    pub const ALL: [Check; 9] = [
        Check::Overlap,
        Check::TokenOrder,
        Check::StaleValidate,
        Check::LostLease,
        Check::RegrantedLease,
        Check::Unanswered,
        Check::Garbage,
        Check::LapsedLeader,
        Check::OverLimit,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Check::Overlap => "overlap",
            Check::TokenOrder => "token_order",
            Check::StaleValidate => "stale_validate",
            Check::LostLease => "lost_lease",
            Check::RegrantedLease => "regranted_lease",
            Check::Unanswered => "unanswered",
            Check::Garbage => "garbage",
            Check::LapsedLeader => "lapsed_leader",
            Check::OverLimit => "over_limit",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Violation {
    pub check: Check,
    /// The ids of the ops involved.
    pub ops: Vec<usize>,
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.check.name(), self.message)
    }
}

#[derive(Clone, Debug, Default)]
pub struct Report {
    pub ops: usize,
    /// `"acquire 200"`, `"acquire 409 lock_held"`, `"renew unknown"`, … → count.
    pub outcomes: BTreeMap<String, usize>,
    /// Distinct leases granted.
    pub grants: usize,
    pub violations: Vec<Violation>,
    pub fenced_writes: u64,
    pub fenced_rejections: u64,
    /// The first few rejected writes, described (times relative to the history's start).
    pub fenced_rejected: Vec<String>,
    /// Things the checker could not judge exactly (missing fields, unattributable times).
    pub notes: Vec<String>,
}

impl Report {
    pub fn count(&self, check: Check) -> usize {
        self.violations.iter().filter(|v| v.check == check).count()
    }

    pub fn by_check(&self) -> BTreeMap<Check, usize> {
        Check::ALL.iter().map(|&c| (c, self.count(c))).collect()
    }

    pub fn is_clean(&self) -> bool {
        self.violations.is_empty()
    }

    /// How many ops of `kind` ended with `label` (see `Outcome::label`).
    pub fn outcome(&self, kind: &str, label: &str) -> usize {
        let key = format!("{kind} {label}");
        self.outcomes.get(&key).copied().unwrap_or(0)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "history: {} ops, {} grants, {} violations, fenced writes {} (rejected {})",
            self.ops,
            self.grants,
            self.violations.len(),
            self.fenced_writes,
            self.fenced_rejections
        )?;
        let outcomes: Vec<String> = self
            .outcomes
            .iter()
            .map(|(k, n)| format!("{k}: {n}"))
            .collect();
        writeln!(f, "  ops: {}", outcomes.join(", "))?;
        let checks: Vec<String> = self
            .by_check()
            .iter()
            .map(|(c, n)| format!("{} {n}", c.name()))
            .collect();
        writeln!(f, "  by check: {}", checks.join(", "))?;
        const SHOWN: usize = 20;
        for v in self.violations.iter().take(SHOWN) {
            writeln!(f, "  {v}")?;
        }
        if self.violations.len() > SHOWN {
            writeln!(f, "  … and {} more", self.violations.len() - SHOWN)?;
        }
        for rejected in &self.fenced_rejected {
            writeln!(f, "  fenced: {rejected}")?;
        }
        for note in self.notes.iter().take(SHOWN) {
            writeln!(f, "  note: {note}")?;
        }
        Ok(())
    }
}
