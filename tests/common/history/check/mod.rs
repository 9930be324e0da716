//! The checker: `check(&History, &CheckConfig) -> Report`.
//!
//! **Time conversion.** Op times are on the test clock. A time the service reported
//! (`expires_at`, `acquired_at`) is on the clock of the instance that wrote it, which runs
//! `offsets[i]` ms ahead of the test clock (libfaketime), so `test = service - offset`.
//! A renew's expiry was written by the instance that answered. A grant's may not have
//! been: a release hands the lock to the next waiter in the releasing instance's write, so
//! a waiter's answer carries the releasing instance's times. The grant's `acquired_at` says
//! which: converted with the right offset it falls inside the acquire's
//! `[invoke, complete]`. The answering instance's offset is used when it fits; otherwise
//! the largest other offset that fits (the earliest lease end, so no false alarm); when
//! none fits, the answering instance's (and a note says so).
//!
//! **Leases.** A lease (one `lease_id`) starts at its grant and lasts until its expiry,
//! which each acknowledged (`200`) renew or re-acquire replaces with its own (the one
//! invoked last counts: a renew may also shorten a lease). It ends at the latest at the
//! invoke time of the first release call for it, whatever the answer, and at the latest
//! a new length after the invoke of a renew that asked for it and was not acknowledged (it
//! may have landed and shortened the lease, and its caller asked for no more).
//! A grant whose answer shows no expiry (an election's campaign won on a lease already over
//! on the answering instance's clock, which shows no leader) is taken to end as early as it
//! could have: its length after its invoke, on the clock furthest behind (check 8 takes the
//! latest instead).
//!
//! **Checks.** See [`Check`]. An outcome is unknown for a transport error, a client-side
//! timeout or a 5xx; such a call may have taken effect at any time after its invoke (and
//! up to `unknown_window_ms` after the client gave up), so an unknown-outcome acquire of a
//! higher priority, or a force release that was not refused, excuses a lease that ended
//! early. So does an acquire of a higher priority answered `409 lease_ended`: it was
//! granted, and its grant ended before the answer went out.

use std::collections::{BTreeMap, HashMap};

use super::{short, Call, History, Op};

mod permits;
mod properties;
mod report;

pub use report::{Check, Report, Violation};

/// What the checker needs besides the history.
#[derive(Clone, Debug)]
pub struct CheckConfig {
    /// Per instance, how far its wall clock runs ahead of the test clock (ms); missing = 0.
    pub offsets: Vec<i64>,
    /// Slack for clock readings: an overlap or staleness must exceed it to count.
    pub tolerance_ms: i64,
    /// A refused renew counts as a lost lease only if answered this long before the lease
    /// could first be taken over.
    pub renew_margin_ms: i64,
    /// The services' `--max-clock-skew-ms`: an instance takes a lease over only once it has
    /// been over this long on its own clock.
    pub max_skew_ms: i64,
    /// How long after its client gave up an unknown-outcome call may still take effect.
    pub unknown_window_ms: i64,
    /// How long past its `waiting_ms` (0 without one) an acquire may take to be answered:
    /// the store timeouts of its last rounds. `None` leaves it unchecked.
    pub answer_within_ms: Option<i64>,
}

impl Default for CheckConfig {
    fn default() -> CheckConfig {
        CheckConfig {
            offsets: Vec::new(),
            tolerance_ms: 0,
            renew_margin_ms: 0,
            max_skew_ms: 0,
            unknown_window_ms: 10_000,
            answer_within_ms: None,
        }
    }
}

impl CheckConfig {
    pub fn with_offsets(offsets: Vec<i64>) -> CheckConfig {
        CheckConfig {
            offsets,
            ..CheckConfig::default()
        }
    }

    pub fn offset(&self, instance: usize) -> i64 {
        self.offsets.get(instance).copied().unwrap_or(0)
    }
}

/// One lease, as the history shows it.
struct Lease<'h> {
    grant: &'h Op,
    lease_id: &'h str,
    token: u64,
    priority: u32,
    /// The grant, then each acknowledged renew or re-acquire, by invoke time, with the
    /// expiry it set.
    updates: Vec<Update<'h>>,
    /// The first release call for this lease (any outcome).
    release: Option<&'h Op>,
    /// Renews with a new length that were not acknowledged (unknown, refused), each with its
    /// invoke time plus that length: each may have shortened the lease, and its caller cannot
    /// count on more.
    shortening: Vec<Update<'h>>,
}

/// An op that set a lease's expiry.
#[derive(Clone, Copy)]
struct Update<'h> {
    op: &'h Op,
    /// The expiry it set (test clock).
    expiry: i64,
    /// The offset of the clock that expiry was written on (see [`CheckConfig::offsets`]).
    clock: i64,
}

impl<'h> Lease<'h> {
    /// The last acknowledged update completed before `before` (test clock), or the bound a
    /// renew with a new length invoked after it and before `before` sets (see
    /// [`Lease::shortening`]), whichever ends first.
    fn known_expiry(&self, before: i64) -> Update<'h> {
        let mut known = self.updates[0];
        for &update in &self.updates[1..] {
            if update.op.complete_ms <= before {
                known = update;
            }
        }
        // The one another instance may take over first: the expiry on the clock it was
        // written on (see `lost_leases`).
        self.shortened(known, before, |u| u.expiry + u.clock)
    }

    /// `known`, or the bound of a renew with a new length that was not acknowledged, invoked
    /// after `known`'s op and before `before`, whichever is earliest by `key`: the renew may
    /// have landed, and its caller asked for no more than that length from its invoke.
    fn shortened(
        &self,
        known: Update<'h>,
        before: i64,
        key: impl Fn(&Update<'h>) -> i64,
    ) -> Update<'h> {
        self.shortening
            .iter()
            .filter(|s| s.op.invoke_ms > known.op.invoke_ms && s.op.invoke_ms <= before)
            .fold(known, |end, &s| if key(&s) < key(&end) { s } else { end })
    }

    /// When the lease ended at the latest, and the op that says so.
    fn end(&self) -> (i64, &'h Op) {
        let last = self.shortened(*self.updates.last().unwrap(), i64::MAX, |u| u.expiry);
        match self.release {
            Some(release) if release.invoke_ms < last.expiry => (release.invoke_ms, release),
            _ => (last.expiry, last.op),
        }
    }
}

struct Checker<'h> {
    history: &'h History,
    config: &'h CheckConfig,
    base: i64,
    violations: Vec<Violation>,
    notes: Vec<String>,
    /// Per lock, its leases in grant (token) order.
    leases: BTreeMap<&'h str, Vec<Lease<'h>>>,
    /// The semaphores (locks acquired with a `limit`), and their limits.
    limits: HashMap<&'h str, u32>,
}

pub fn check(history: &History, config: &CheckConfig) -> Report {
    let mut checker = Checker {
        history,
        config,
        base: history.start_ms(),
        violations: Vec::new(),
        notes: Vec::new(),
        leases: BTreeMap::new(),
        limits: history
            .ops
            .iter()
            .filter_map(|op| match &op.call {
                Call::Acquire {
                    limit: Some(limit), ..
                } => Some((op.lock.as_str(), *limit)),
                _ => None,
            })
            .collect(),
    };
    checker.collect_leases();
    checker.overlaps();
    checker.over_limits();
    checker.token_order();
    checker.stale_validates();
    checker.lost_leases();
    checker.unanswered();
    checker.garbage();
    checker.lapsed_leaders();
    let mut outcomes = BTreeMap::new();
    for op in &history.ops {
        let key = format!("{} {}", op.call.kind(), op.outcome.label());
        *outcomes.entry(key).or_insert(0) += 1;
    }
    Report {
        ops: history.ops.len(),
        outcomes,
        grants: checker.leases.values().map(Vec::len).sum(),
        violations: checker.violations,
        fenced_writes: history.fenced_writes,
        fenced_rejections: history.fenced_rejections,
        fenced_rejected: history
            .fenced_rejected
            .iter()
            .map(|r| {
                format!(
                    "c{} wrote token {} to {} at t+{}, after token {}",
                    r.client,
                    r.token,
                    r.lock,
                    r.at_ms - checker.base,
                    r.highest
                )
            })
            .collect(),
        notes: checker.notes,
    }
}

impl<'h> Checker<'h> {
    fn op(&self, op: &Op) -> String {
        let mut text = String::new();
        let _ = op.describe(&mut text, self.base);
        text
    }

    fn t(&self, ms: i64) -> i64 {
        ms - self.base
    }

    fn violation(&mut self, check: Check, ops: &[&Op], message: String) {
        self.violations.push(Violation {
            check,
            ops: ops.iter().map(|op| op.id).collect(),
            message,
        });
    }

    /// The offset of the clock furthest behind (of every instance configured or called).
    fn furthest_behind(&self) -> i64 {
        (self.history.ops.iter())
            .map(|op| self.config.offset(op.instance))
            .chain(self.config.offsets.iter().copied())
            .min()
            .unwrap_or(0)
    }

    /// The offset of the instance that wrote a grant's times (see the module docs).
    fn grant_offset(&mut self, op: &Op) -> i64 {
        let own = self.config.offset(op.instance);
        let Some(at) = op.outcome.acquired_at else {
            return own;
        };
        let slack = self.config.tolerance_ms + 1;
        let fits = |o: i64| (op.invoke_ms - slack..=op.complete_ms + slack).contains(&(at - o));
        if fits(own) {
            return own;
        }
        match self
            .config
            .offsets
            .iter()
            .copied()
            .filter(|&o| fits(o))
            .max()
        {
            Some(o) => o,
            None => {
                let note = format!(
                    "acquired_at of {} fits no instance's clock (t+{} with offset {own})",
                    self.op(op),
                    self.t(at - own)
                );
                self.notes.push(note);
                own
            }
        }
    }

    /// Builds the leases: each `200` acquire that returned a lease id not seen before
    /// starts one; the same id again is a re-acquire or a retry (or a violation).
    fn collect_leases(&mut self) {
        let history = self.history;
        let mut by_id: HashMap<&'h str, (&'h str, usize)> = HashMap::new();
        let mut leases: Vec<Lease<'h>> = Vec::new();
        for op in &history.ops {
            let Call::Acquire {
                priority,
                lease_ms,
                request_id,
                lease_id: asked,
                ..
            } = &op.call
            else {
                continue;
            };
            let o = &op.outcome;
            let (true, Some(lease_id), Some(token)) = (o.is_ok(), &o.lease_id, o.fencing_token)
            else {
                continue;
            };
            if let Some(&(_, index)) = by_id.get(lease_id.as_str()) {
                let first = leases[index].grant;
                let same_request = matches!(
                    (&first.call, request_id),
                    (Call::Acquire { request_id: Some(a), .. }, Some(b)) if a == b
                );
                let reacquire = asked.as_deref() == Some(lease_id.as_str());
                if !same_request && !reacquire {
                    let message = format!(
                        "lease {} returned to two different requests: {} and {}",
                        short(lease_id),
                        self.op(first),
                        self.op(op)
                    );
                    self.violation(Check::RegrantedLease, &[first, op], message);
                } else if let Some(expires) = o.expires_at {
                    let clock = self.config.offset(op.instance);
                    leases[index].updates.push(Update {
                        op,
                        expiry: expires - clock,
                        clock,
                    });
                }
                continue;
            }
            let (expiry, clock) = match o.expires_at {
                Some(expires) => {
                    let clock = self.grant_offset(op);
                    (expires - clock, clock)
                }
                // An election's campaign won on a lease already over on the answering
                // instance's clock shows no leader: its earliest possible end, its length
                // from the invoke, written on the clock furthest behind.
                None => {
                    let note = format!("no expires_at in {}", self.op(op));
                    self.notes.push(note);
                    (op.invoke_ms + *lease_ms as i64, self.furthest_behind())
                }
            };
            by_id.insert(lease_id, (&op.lock, leases.len()));
            leases.push(Lease {
                grant: op,
                lease_id,
                token,
                priority: *priority,
                updates: vec![Update { op, expiry, clock }],
                release: None,
                shortening: Vec::new(),
            });
        }
        for op in &history.ops {
            let Some(lease_id) = op.call.lease_id() else {
                continue;
            };
            let Some(&(lock, index)) = by_id.get(lease_id) else {
                continue;
            };
            let lease = &mut leases[index];
            if lock != op.lock || op.invoke_ms < lease.grant.invoke_ms {
                continue;
            }
            match &op.call {
                Call::Renew { .. } if op.outcome.is_ok() => match op.outcome.expires_at {
                    Some(expires) => {
                        let clock = self.config.offset(op.instance);
                        lease.updates.push(Update {
                            op,
                            expiry: expires - clock,
                            clock,
                        });
                    }
                    None => self
                        .notes
                        .push(format!("no expires_at in renew #{}", op.id)),
                },
                Call::Renew {
                    lease_ms: Some(ms), ..
                } => lease.shortening.push(Update {
                    op,
                    expiry: op.invoke_ms + *ms as i64,
                    clock: self.config.offset(op.instance),
                }),
                Call::Release { .. } if lease.release.is_none() => lease.release = Some(op),
                _ => {}
            }
        }
        for mut lease in leases {
            lease.updates[1..].sort_by_key(|u| (u.op.invoke_ms, u.op.id));
            self.leases
                .entry(&lease.grant.lock)
                .or_default()
                .push(lease);
        }
        for leases in self.leases.values_mut() {
            leases.sort_by_key(|l| (l.token, l.grant.complete_ms, l.grant.id));
        }
    }

    /// An op that may have ended `holder`'s lease early and legitimately, before
    /// `until_ms`: a grant of a higher priority (known, with a token below `below_token`,
    /// or of unknown outcome), or a force release that was not refused.
    fn excuse(&self, holder: &Lease, until_ms: i64, below_token: Option<u64>) -> Option<&'h Op> {
        let window = self.config.unknown_window_ms;
        let from = holder.grant.invoke_ms;
        self.history.ops.iter().find(|op| {
            // Invoked in the same millisecond as `until_ms` may still have come first: the
            // recorded times round outwards.
            if op.lock != holder.grant.lock || op.invoke_ms > until_ms || op.id == holder.grant.id {
                return false;
            }
            let o = &op.outcome;
            match &op.call {
                Call::Acquire {
                    priority, lease_id, ..
                } if *priority > holder.priority && lease_id.is_none() => {
                    // An unknown outcome may have been a grant, and `lease_ended` was one: the
                    // call took the lock, and its grant ended before its answer went out.
                    if o.is_unknown() || o.error.as_deref() == Some("lease_ended") {
                        op.complete_ms + window >= from
                    } else {
                        o.is_ok()
                            && o.fencing_token.is_some_and(|t| {
                                t > holder.token && below_token.is_none_or(|below| t < below)
                            })
                    }
                }
                Call::ForceRelease => {
                    (o.is_ok() || o.is_unknown()) && op.complete_ms + window >= from
                }
                _ => false,
            }
        })
    }
}
