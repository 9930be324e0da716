//! Check 9: a semaphore never has more than `limit` live grants.

use super::super::short;
use super::{Check, Checker, Lease};

impl<'h> Checker<'h> {
    /// Check 9. Check 1 for a semaphore of `limit` permits: when a grant completes, the
    /// grants before it (by token) still live then, and not explained by a preemption or
    /// force release (`excuse`), are fewer than `limit`. A grant of a higher priority than
    /// the lowest of them may have preempted that one.
    pub(super) fn over_limits(&mut self) {
        let tolerance = self.config.tolerance_ms;
        let mut found = Vec::new();
        for (lock, leases) in &self.leases {
            let Some(&limit) = self.limits.get(lock) else {
                continue;
            };
            for (i, b) in leases.iter().enumerate() {
                let granted = b.grant.complete_ms;
                let live: Vec<&Lease> = leases[..i]
                    .iter()
                    .filter(|a| a.end().0 > granted + tolerance)
                    .filter(|a| self.excuse(a, granted, Some(b.token)).is_none())
                    .collect();
                let preempted = live.iter().any(|a| b.priority > a.priority);
                if live.len() - usize::from(preempted) < limit as usize {
                    continue;
                }
                let holders: Vec<String> = live
                    .iter()
                    .map(|a| format!("{} of {}", short(a.lease_id), self.op(a.grant)))
                    .collect();
                let message = format!(
                    "semaphore {lock} (limit {limit}): {} was granted (completed t+{}) while \
                     {} leases were live: {}",
                    self.op(b.grant),
                    self.t(granted),
                    live.len(),
                    holders.join("; ")
                );
                let mut ops: Vec<_> = live.iter().map(|a| a.grant).collect();
                ops.push(b.grant);
                found.push((ops, message));
            }
        }
        for (ops, message) in found {
            self.violation(Check::OverLimit, &ops, message);
        }
    }
}
