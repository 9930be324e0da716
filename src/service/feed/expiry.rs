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
use crate::model::{LockName, UnixMillis};
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
        let untold = LeaseEnd {
            at: end,
            told: false,
        };
        if self.known.get(&name).and_then(|k| k.lease) != Some(untold) {
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

/// Follows the lease end `end` just read for `known`: arms a new end that is still to
/// come, once. Says whether its streams are to be told now that it ran out (it has, and
/// they were not told yet); `shown` says a snapshot shows it, which tells them.
pub(super) fn follow_lease(
    expiries: &mut BTreeSet<Armed>,
    name: &LockName,
    known: &mut Known,
    end: Option<i64>,
    now: UnixMillis,
    shown: bool,
) -> bool {
    let lease = match (known.lease, end) {
        (Some(lease), Some(at)) if lease.at == at => lease,
        (_, end) => {
            if let Some(old) = known.lease {
                expiries.remove(&(old.at, name.clone(), old.at));
            }
            known.lease = end.map(|at| LeaseEnd { at, told: false });
            match end {
                Some(at) if at > now.0 => {
                    expiries.insert((at, name.clone(), at));
                    return false;
                }
                Some(at) => LeaseEnd { at, told: false },
                None => return false,
            }
        }
    };
    if lease.told || lease.at > now.0 {
        return false;
    }
    known.lease = Some(LeaseEnd {
        told: true,
        ..lease
    });
    !shown
}

/// The end of the holder's lease (unix ms), if it has one that ends.
pub(super) fn lease_end(record: &LockRecord) -> Option<i64> {
    match record.holder().map(|h| h.expires) {
        Some(Expiry::At(at)) => Some(at.0),
        _ => None,
    }
}
