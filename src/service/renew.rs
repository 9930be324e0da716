//! Renew: a conditional write of the holder's new expiry, first on the record this instance
//! wrote last (no read), then on a read, and a refusal only on the latest copy.
//!
//! Keeps (DESIGN.md, "Invariants") I4 (`not_owner` on the latest copy) and I10 (a lost
//! answer settled, through `outcome::put`).

use tokio::time::Instant;

use super::release::too_busy;
use super::{
    refused, snapshot, LockService, LockSnapshot, Put, Read, Refusal, ServiceError, MAX_ROUNDS,
};
use crate::engine::{self, Basis, RenewDecision, Renewal, Trust};
use crate::model::{LeaseId, LockName};

impl LockService {
    pub async fn renew(
        &self,
        name: &LockName,
        lease_id: &LeaseId,
        renewal: &Renewal,
    ) -> Result<LockSnapshot, ServiceError> {
        let began = Instant::now();
        let lazy;
        let renewal = if self.planted.lazy_leader {
            lazy = Renewal {
                strict: false,
                ..renewal.clone()
            };
            &lazy
        } else {
            renewal
        };
        let mut basis = Basis::Cached;
        for _ in 0..MAX_ROUNDS {
            // Each round (a read and a conditional write) has a store timeout of its own,
            // within a bound for the whole call (`round_deadline`).
            let deadline = self.round_deadline(began);
            let now = self.wall.now();
            let asked = std::mem::replace(&mut basis, Basis::Read);
            let Read {
                stored,
                record,
                queue,
                basis: on,
            } = self.read_cached(name, deadline, now, asked).await?;
            let decision = engine::decide_renew(&record, lease_id, renewal, now);
            if let Trust::ReadAgain(again) = decision.trust(on) {
                basis = again;
                continue;
            }
            let next = match decision {
                RenewDecision::NotOwner => {
                    return Err(refused(
                        Refusal::NotOwner,
                        name,
                        &record,
                        &queue,
                        self.clock(now),
                    ))
                }
                RenewDecision::Write(next) => *next,
            };
            match self.put(name, stored.as_ref(), next, deadline).await? {
                Put::Landed(written, version) => {
                    // A renewal leaves the queue as it was: what was known of it still holds.
                    // The holder renews here, so it most likely releases here too.
                    let after = snapshot(name, &written, &queue, self.clock(now));
                    self.cache
                        .remember_with_rest(name, &written, version, queue, true);
                    return Ok(after);
                }
                Put::Raced | Put::NestedLocks => continue,
            }
        }
        Err(too_busy())
    }
}
