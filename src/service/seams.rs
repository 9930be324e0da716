//! What a simulation replaces in the service: the wall clock leases are judged by, and bugs
//! planted on purpose to show that the simulation's checker catches them. Production runs
//! on `Seams::default()`: the system clock, nothing planted.

use std::fmt;
use std::sync::Arc;

use crate::engine::{self, AcquireDecision, AcquireRequest};
use crate::model::{LeaseId, UnixMillis};
use crate::record::LockRecord;

/// What a simulation replaces: the wall clock, and bugs planted on purpose.
#[derive(Clone, Debug, Default)]
pub struct Seams {
    pub wall: WallClock,
    pub planted: Planted,
}

/// Bugs a test plants at run time to show that the simulation's checker catches them. Each
/// breaks one rule; all are off unless a test sets them, and nothing else can.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Planted {
    /// A grant is written whatever version the record is at now (no version check).
    pub blind_grant: bool,
    /// `validate` reads the local copy, which a lagging server may hold stale.
    pub stale_validate: bool,
    /// A lease is judged over without the takeover margin for clock skew.
    pub no_skew_margin: bool,
    /// A write whose answer was lost is taken as landed, without reading it back.
    pub guess_landed: bool,
    /// The reconciler drops every job: no grant nobody learnt of is undone, no stray queue
    /// entry swept, no waiter told of a late hand-off.
    pub skip_repair: bool,
    /// A strict renewal (an election's, I17) is judged as a lock's: lazily.
    pub lazy_leader: bool,
    /// A semaphore's acquire is decided as if it had one permit more (I18).
    pub over_grant: bool,
}

/// Where the service reads the wall clock it judges leases by: the system's, or a
/// simulation's, which may run ahead or behind as a skewed host's does.
#[derive(Clone)]
pub struct WallClock(Arc<dyn Fn() -> UnixMillis + Send + Sync>);

impl WallClock {
    pub fn system() -> WallClock {
        WallClock(Arc::new(UnixMillis::now))
    }

    pub fn new(now: impl Fn() -> UnixMillis + Send + Sync + 'static) -> WallClock {
        WallClock(Arc::new(now))
    }

    pub fn now(&self) -> UnixMillis {
        (self.0)()
    }
}

impl Default for WallClock {
    fn default() -> WallClock {
        WallClock::system()
    }
}

impl fmt::Debug for WallClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WallClock({})", self.now().0)
    }
}

/// Planted `over_grant`: the decision on the semaphore as if it had one permit more, its
/// write under the semaphore's true limit.
pub(super) fn over_grant(
    record: &LockRecord,
    queue: &[crate::waiter::Waiter],
    request: &AcquireRequest,
    clock: engine::Clock,
    new_lease: LeaseId,
) -> AcquireDecision {
    let more = |limit: Option<u32>| limit.map(|l| l + 1);
    let seen = LockRecord {
        limit: more(record.limit),
        ..record.clone()
    };
    let asked = AcquireRequest {
        limit: more(request.limit),
        ..request.clone()
    };
    match engine::decide_acquire(&seen, queue, &asked, clock, new_lease) {
        AcquireDecision::Grant {
            record: mut granted,
            lease_id,
        } => {
            granted.limit = record.limit;
            AcquireDecision::Grant {
                record: granted,
                lease_id,
            }
        }
        other => other,
    }
}
