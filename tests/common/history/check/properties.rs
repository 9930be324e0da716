//! The checks themselves, one method per [`Check`], run by [`check`](super::check) on the
//! leases `collect_leases` gathered.

use std::collections::{BTreeMap, HashMap};

use super::super::{short, Call, Op};
use super::{Check, Checker, Lease, Update};

impl<'h> Checker<'h> {
    /// Check 1.
    pub(super) fn overlaps(&mut self) {
        let tolerance = self.config.tolerance_ms;
        let mut found = Vec::new();
        for (lock, leases) in &self.leases {
            if self.limits.contains_key(lock) {
                continue; // a semaphore's: check 9
            }
            for pair in leases.windows(2) {
                let (a, b) = (&pair[0], &pair[1]);
                let (end, end_op) = a.end();
                let granted = b.grant.complete_ms;
                if granted + tolerance >= end || b.priority > a.priority {
                    continue;
                }
                if self.excuse(a, granted, Some(b.token)).is_some() {
                    continue;
                }
                let ends = if end_op.id == a.grant.id {
                    "its grant's expiry".to_owned()
                } else {
                    format!("#{}", end_op.id)
                };
                let message = format!(
                    "lock {}: {} was granted (completed t+{}) while lease {} of {} was live \
                     until t+{} (set by {ends}): {} ms of overlap",
                    a.grant.lock,
                    self.op(b.grant),
                    self.t(granted),
                    short(a.lease_id),
                    self.op(a.grant),
                    self.t(end),
                    end - granted
                );
                found.push((vec![a.grant, b.grant, end_op], message));
            }
        }
        for (ops, message) in found {
            self.violation(Check::Overlap, &ops, message);
        }
    }

    /// Check 2.
    pub(super) fn token_order(&mut self) {
        let mut found = Vec::new();
        for leases in self.leases.values() {
            let mut by_token: BTreeMap<u64, &Lease> = BTreeMap::new();
            for lease in leases {
                if let Some(other) = by_token.insert(lease.token, lease) {
                    found.push((
                        vec![other.grant, lease.grant],
                        format!(
                            "token {} granted twice: {} and {}",
                            lease.token,
                            self.op(other.grant),
                            self.op(lease.grant)
                        ),
                    ));
                }
            }
            let mut completed: Vec<&Lease> = leases.iter().collect();
            completed.sort_by_key(|l| l.grant.complete_ms);
            let mut invoked: Vec<&Lease> = leases.iter().collect();
            invoked.sort_by_key(|l| self.first_invoke(l));
            let mut highest: Option<&Lease> = None;
            let mut next = 0;
            for b in invoked {
                while next < completed.len()
                    && completed[next].grant.complete_ms < self.first_invoke(b)
                {
                    let a = completed[next];
                    if highest.is_none_or(|h| a.token > h.token) {
                        highest = Some(a);
                    }
                    next += 1;
                }
                if let Some(a) = highest.filter(|a| a.token > b.token) {
                    found.push((
                        vec![a.grant, b.grant],
                        format!(
                            "{} completed before {} was invoked, yet its token is not lower",
                            self.op(a.grant),
                            self.op(b.grant)
                        ),
                    ));
                }
            }
        }
        for lease in self.leases.values().flatten() {
            for &Update { op, .. } in &lease.updates[1..] {
                if let Some(token) = op.outcome.fencing_token.filter(|&t| t != lease.token) {
                    found.push((
                        vec![lease.grant, op],
                        format!(
                            "{} answered token {token}, but its lease has token {} ({})",
                            self.op(op),
                            lease.token,
                            self.op(lease.grant)
                        ),
                    ));
                }
            }
        }
        for (ops, message) in found {
            self.violation(Check::TokenOrder, &ops, message);
        }
    }

    /// When the call that made `lease`'s grant was first invoked: a grant answered to a
    /// retry of a `request_id` may have been made by an earlier attempt whose answer was
    /// lost (with a lock, no other grant can come between; with a semaphore, one can).
    fn first_invoke(&self, lease: &Lease) -> i64 {
        let Call::Acquire {
            request_id: Some(id),
            ..
        } = &lease.grant.call
        else {
            return lease.grant.invoke_ms;
        };
        (self.history.ops.iter())
            .filter(|op| op.lock == lease.grant.lock && op.invoke_ms <= lease.grant.invoke_ms)
            .filter(|op| matches!(&op.call, Call::Acquire { request_id: Some(x), .. } if x == id))
            .map(|op| op.invoke_ms)
            .min()
            .unwrap_or(lease.grant.invoke_ms)
    }

    /// Check 3.
    pub(super) fn stale_validates(&mut self) {
        let tolerance = self.config.tolerance_ms;
        let mut found = Vec::new();
        for op in &self.history.ops {
            let (Call::Validate { fencing_token }, Some(true)) = (&op.call, op.outcome.current)
            else {
                continue;
            };
            let Some(leases) = self.leases.get(op.lock.as_str()) else {
                continue;
            };
            // A semaphore's newer grant does not end an older one: only its release does.
            let lock = !self.limits.contains_key(op.lock.as_str());
            let newer = leases
                .iter()
                .filter(|_| lock)
                .filter(|l| {
                    l.token > *fencing_token && l.grant.complete_ms + tolerance < op.invoke_ms
                })
                .min_by_key(|l| l.grant.complete_ms);
            if let Some(newer) = newer {
                found.push((
                    vec![newer.grant, op],
                    format!(
                        "{} said token {fencing_token} is current, but {} with the higher \
                         token {} had completed before it",
                        self.op(op),
                        self.op(newer.grant),
                        newer.token
                    ),
                ));
                continue;
            }
            let released = leases
                .iter()
                .filter(|l| l.token == *fencing_token)
                .filter_map(|l| l.release)
                .find(|r| r.outcome.is_ok() && r.complete_ms + tolerance < op.invoke_ms);
            if let Some(release) = released {
                found.push((
                    vec![release, op],
                    format!(
                        "{} said token {fencing_token} is current after its release {} was \
                         acknowledged",
                        self.op(op),
                        self.op(release)
                    ),
                ));
            }
        }
        for (ops, message) in found {
            self.violation(Check::StaleValidate, &ops, message);
        }
    }

    /// Check 4. A renew is refused on a read made at some time in its call, so a refusal
    /// shows a lease taken early only if it was answered before the lease could first be
    /// taken over: its known end, plus the time every instance waits on its own clock
    /// (`max_skew_ms`), less how far the clock furthest ahead runs ahead of the one that
    /// wrote the expiry. A renew still in flight then (one slowed by the store) may have
    /// been decided after a waiter took the expired lease, as lazy expiry allows.
    pub(super) fn lost_leases(&mut self) {
        let margin = self.config.renew_margin_ms;
        let furthest_ahead = (self.history.ops.iter())
            .map(|op| self.config.offset(op.instance))
            .max()
            .unwrap_or(0);
        let mut found = Vec::new();
        let by_id = self.leases_by_id();
        for op in &self.history.ops {
            let (
                Call::Renew {
                    lease_id, strict, ..
                },
                Some(409),
            ) = (&op.call, op.outcome.status)
            else {
                continue;
            };
            let Some(lease) = by_id.get(&(op.lock.as_str(), lease_id.as_str())) else {
                continue;
            };
            if op.invoke_ms < lease.grant.invoke_ms
                || lease.release.is_some_and(|r| r.invoke_ms <= op.invoke_ms)
            {
                continue;
            }
            let known = lease.known_expiry(op.invoke_ms);
            let waited = self.config.max_skew_ms + known.clock - furthest_ahead;
            let first_takeover = known.expiry + waited.max(0);
            if op.complete_ms >= first_takeover - margin {
                continue;
            }
            // A strict renewal (I17) is refused from the lease's end on the answering
            // instance's clock, takeover or not. A renewal of unknown outcome may have moved
            // that end earlier, decided on a clock behind the one that wrote it; and so may
            // this very call, in a round whose write landed with its answer lost, when the
            // call lasted as long as a lease of this lease's shortest length.
            let answering = self.config.offset(op.instance);
            if *strict
                && (op.complete_ms >= known.expiry + known.clock - answering - margin
                    || self.unsure(op, lease_id)
                    || op.complete_ms - op.invoke_ms + margin >= self.shortest_length(lease))
            {
                continue;
            }
            if self.excuse(lease, op.complete_ms, None).is_some() {
                continue;
            }
            found.push((
                vec![lease.grant, op],
                format!(
                    "{} was refused, answered {} ms before the lease could first be taken over \
                     at t+{} (its known end t+{}, set by #{} on a clock {} ms off), granted by \
                     {}, with no preemption or force release of {} in between",
                    self.op(op),
                    first_takeover - op.complete_ms,
                    self.t(first_takeover),
                    self.t(known.expiry),
                    known.op.id,
                    known.clock,
                    self.op(lease.grant),
                    op.lock
                ),
            ));
        }
        for (ops, message) in found {
            self.violation(Check::LostLease, &ops, message);
        }
    }

    /// Whether a renewal of unknown outcome, or a re-acquire, of `lease_id` was invoked
    /// before `op` completed: it may have moved the lease's end either way, on a clock of
    /// its own, so a strict renewal's outcome says nothing certain.
    fn unsure(&self, op: &Op, lease_id: &str) -> bool {
        self.history.ops.iter().any(|other| {
            other.id != op.id
                && other.invoke_ms <= op.complete_ms
                && other.call.lease_id() == Some(lease_id)
                && !matches!(other.call, Call::Release { .. })
                && (other.outcome.is_unknown() || matches!(other.call, Call::Acquire { .. }))
        })
    }

    /// The shortest length `lease` was granted or renewed with (ms).
    fn shortest_length(&self, lease: &Lease) -> i64 {
        let lengths = self.history.ops.iter().filter_map(|op| match &op.call {
            Call::Renew {
                lease_id,
                lease_ms: Some(ms),
                ..
            } if lease_id == lease.lease_id => Some(*ms),
            _ => None,
        });
        let granted = match &lease.grant.call {
            Call::Acquire { lease_ms, .. } => *lease_ms,
            _ => u64::MAX,
        };
        lengths.fold(granted, u64::min).min(i64::MAX as u64) as i64
    }

    /// Every lease, by its lock and lease id.
    fn leases_by_id(&self) -> HashMap<(&'h str, &'h str), &Lease<'h>> {
        self.leases
            .values()
            .flatten()
            .map(|l| ((l.grant.lock.as_str(), l.lease_id), l))
            .collect()
    }

    /// Check 8: no strict renewal is acknowledged once every expiry its lease could have
    /// had is past, on the answering instance's clock, when it was invoked. A renewal or
    /// re-acquire of the lease whose outcome is unknown, invoked before it completed, may
    /// have extended the lease: it excuses it. A grant whose answer showed no expiry (an
    /// election's campaign won on a lease already over on the answering instance's clock,
    /// which shows no leader then) counts with the latest it could have had: its length
    /// from the answer, on the clock furthest ahead.
    pub(super) fn lapsed_leaders(&mut self) {
        let tolerance = self.config.tolerance_ms;
        let by_id = self.leases_by_id();
        let furthest_ahead = (self.history.ops.iter())
            .map(|op| self.config.offset(op.instance))
            .chain(self.config.offsets.iter().copied())
            .max()
            .unwrap_or(0);
        // The expiry an update set, on the clock it was written on.
        let written = |lease: &Lease, u: &Update| match (&u.op.call, u.op.outcome.expires_at) {
            (Call::Acquire { lease_ms, .. }, None) if u.op.id == lease.grant.id => {
                u.op.complete_ms + *lease_ms as i64 + furthest_ahead
            }
            _ => u.expiry + u.clock,
        };
        let mut found = Vec::new();
        for op in &self.history.ops {
            let Call::Renew {
                lease_id,
                strict: true,
                ..
            } = &op.call
            else {
                continue;
            };
            if !op.outcome.is_ok() {
                continue;
            }
            let Some(lease) = by_id.get(&(op.lock.as_str(), lease_id.as_str())) else {
                continue;
            };
            if self.unsure(op, lease_id) {
                continue;
            }
            let before = |other: &Op| other.id != op.id && other.invoke_ms <= op.complete_ms;
            let Some((latest, end)) = lease
                .updates
                .iter()
                .filter(|u| before(u.op))
                .map(|u| (u, written(lease, u)))
                .max_by_key(|&(_, end)| end)
            else {
                continue;
            };
            let decided_from = op.invoke_ms + self.config.offset(op.instance);
            if end + tolerance >= decided_from {
                continue;
            }
            found.push((
                vec![lease.grant, latest.op, op],
                format!(
                    "{} was acknowledged, invoked {} ms after its lease's last possible end \
                     (t+{}, set by #{}) on the answering instance's clock",
                    self.op(op),
                    decided_from - end,
                    self.t(end - latest.clock),
                    latest.op.id
                ),
            ));
        }
        for (ops, message) in found {
            self.violation(Check::LapsedLeader, &ops, message);
        }
    }

    /// Check 6: every acquire is answered within its `waiting_ms` plus the allowance.
    pub(super) fn unanswered(&mut self) {
        let Some(within) = self.config.answer_within_ms else {
            return;
        };
        let history = self.history;
        for op in &history.ops {
            let Call::Acquire { waiting_ms, .. } = &op.call else {
                continue;
            };
            let allowed = waiting_ms.unwrap_or(0) as i64 + within;
            let took = op.complete_ms - op.invoke_ms;
            if took > allowed {
                let text = self.op(op);
                self.violation(
                    Check::Unanswered,
                    &[op],
                    format!("answered after {took} ms, more than the {allowed} ms allowed: {text}"),
                );
            }
        }
    }

    /// Check 7: nothing is left in the store once every call has ended.
    pub(super) fn garbage(&mut self) {
        for left in &self.history.leftovers {
            self.violations.push(super::Violation {
                check: Check::Garbage,
                ops: Vec::new(),
                message: left.clone(),
            });
        }
    }
}
