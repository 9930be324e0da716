//! How the end of a waiting call and of a hold is recorded: their label values, and the span
//! from arrival (or grant) to the end, judged on this instance's clock. Holds written by
//! Helix, which records no grant time, are not timed.

use std::time::Duration;

use super::labels::label_values;
use super::Metrics;
use crate::model::UnixMillis;
use crate::record::{Expiry, Holder};

label_values!(
    /// How a call that waited in a queue ended.
    WaitOutcome { Granted = "granted", Refused = "refused", Failed = "failed" }
);

label_values!(
    /// How a hold ended, as this instance saw it end.
    HoldEnd {
        /// Its holder released it and nobody waited.
        Released = "released",
        /// Its holder released it to the next waiter, in the same write.
        HandedOff = "handed_off",
        /// Its lease ran out and a caller took the lock (the hold ended at the lease's end).
        Expired = "expired",
        /// A preemptor took it from its live holder.
        TakenOver = "taken_over",
        /// An admin force-released it.
        Forced = "forced",
    }
);

impl Metrics {
    pub fn acquire_waited(&self, outcome: WaitOutcome, took: Duration) {
        self.acquire_waits.at(outcome).observe(took.as_secs_f64());
    }

    /// Records the end of `holder`'s hold, seen at `now`. An expired hold ended when its
    /// lease did. Clocks of different instances may differ, so a negative span counts as 0.
    pub fn hold_ended(&self, end: HoldEnd, holder: &Holder, now: UnixMillis) {
        let Some(granted) = holder.acquired_at else {
            return; // written by Helix, which does not record when
        };
        let ended = match (end, holder.expires) {
            (HoldEnd::Expired, Expiry::At(at)) => at.min(now),
            _ => now,
        };
        let millis = (ended.0 - granted.0).max(0);
        self.holds.at(end).observe(millis as f64 / 1000.0);
    }

    /// A caller took the lock from `holder` at `now`: from a live holder (`live`, a
    /// preemptor's takeover), or from one whose lease had run out (a lazy expiry).
    pub fn taken_from(&self, holder: &Holder, live: bool, now: UnixMillis) {
        let end = if live {
            self.takeovers.inc();
            HoldEnd::TakenOver
        } else {
            self.expirations.inc();
            HoldEnd::Expired
        };
        self.hold_ended(end, holder, now);
    }
}
