//! Lease ends: when a lease a stream follows runs out, `expired` is told once (see the
//! parent module and DESIGN.md, "The event hub", rules 1 and 3). Each end the hub reads is
//! armed once; a timer entry names the end it was armed for, so one left over from a lease
//! since renewed or released is dropped without a read.
//!
//! Keeps I14's "each lease end once" (DESIGN.md, "Invariants").

use std::collections::BTreeSet;
use std::time::Duration;

use tracing::debug;

use super::{Armed, Known, LeaseEnd, State};
use crate::model::{FencingToken, LockName, UnixMillis};
use crate::record::{Expiry, LockRecord};

/// How soon a lease end whose read failed is looked at again.
const RETRY_MS: i64 = 200;

impl State {
    /// On tokio's clock, which a test may pause and move, as it moves the hub's wall clock.
    pub(super) fn next_expiry(&self) -> tokio::time::Instant {
        let wait = match self.expiries.first() {
            Some((at, _, _)) => u64::try_from(at - self.clock.now().0).unwrap_or(0),
            None => 3_600_000,
        };
        tokio::time::Instant::now() + Duration::from_millis(wait)
    }

    /// Looks at the first armed lease end, if it has come: one read, then back to the loop.
    pub(super) async fn expire_next(&mut self) {
        let now = self.clock.now();
        match self.expiries.first() {
            Some((at, _, _)) if *at <= now.0 => {}
            _ => return,
        }
        let Some((_, name, end)) = self.expiries.pop_first() else {
            return;
        };
        let untold = |k: &Known| k.leases.iter().any(|l| l.at == end && !l.told);
        if !self.known.get(&name).is_some_and(untold) {
            return;
        }
        // Read before saying so: a renewal this hub has not heard of yet (its watch was
        // reconnecting, say) must not be reported as an expiry.
        if let Err(error) = self.refresh(&name, true).await {
            debug!(lock = %name, %error, "cannot check an expiry; trying again shortly");
            self.expiries.insert((now.0 + RETRY_MS, name, end));
        }
    }
}

/// Follows the lease ends `ends` just read for `known` (one per holder: a semaphore's
/// record has several): arms each new end that is still to come, once, and disarms the ends
/// no holder has any more. Says which leases (by their permit's token) its streams are to be
/// told ran out now (they have, and were not told yet); `shown` says a snapshot shows them,
/// which tells them.
pub(super) fn follow_leases(
    expiries: &mut BTreeSet<Armed>,
    name: &LockName,
    known: &mut Known,
    ends: Vec<Ended>,
    now: UnixMillis,
    shown: bool,
) -> Vec<Option<FencingToken>> {
    let mut next = Vec::with_capacity(ends.len());
    for (token, at) in ends {
        match known.leases.iter().find(|l| l.token == token && l.at == at) {
            Some(lease) => next.push(*lease),
            None => {
                if at > now.0 {
                    expiries.insert((at, name.clone(), at));
                }
                next.push(LeaseEnd {
                    token,
                    at,
                    told: false,
                });
            }
        }
    }
    for old in &known.leases {
        if !next.iter().any(|l| l.at == old.at) {
            expiries.remove(&(old.at, name.clone(), old.at));
        }
    }
    known.leases = next;
    let mut told = Vec::new();
    for lease in known.leases.iter_mut().filter(|l| !l.told && l.at <= now.0) {
        lease.told = true;
        if !shown {
            told.push(lease.token);
        }
    }
    told
}

/// A holder's lease end: its permit's token, and when (unix ms).
pub(super) type Ended = (Option<FencingToken>, i64);

/// The ends of the holders' leases (unix ms), for those that end.
pub(super) fn lease_ends(record: &LockRecord) -> Vec<Ended> {
    record
        .holders
        .iter()
        .filter_map(|h| match h.expires {
            Expiry::At(at) => Some((h.fencing_token, at.0)),
            _ => None,
        })
        .collect()
}
