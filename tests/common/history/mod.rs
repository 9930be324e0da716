//! Jepsen-style histories of lock operations, and a checker for them.
//!
//! * this file (`history`): what is recorded. An [`Op`] is one HTTP call (who made it, to
//!   which instance, on which lock, what it asked, when it was invoked and completed on the
//!   test process's wall clock, and what came back); a [`History`] is every op of a run.
//!   [`Endpoint::perform`] makes a call and records it. [`FencedResource`] is the resource
//!   the lock protects, which accepts a write only with the highest token seen so far.
//! * [`check`]: the checker. `check(&History, &CheckConfig) -> Report` converts the times
//!   the service reported into the test clock and looks for violations of the lock's
//!   safety properties.
//! * [`workload`]: the clients that produce a history against running instances, and the
//!   liveness probe to run once faults have healed.
//!
//! Times: every `*_ms` time in an [`Op`] is unix milliseconds on the test process's clock
//! (`invoke_ms` rounded down, `complete_ms` rounded up, so the recorded interval contains
//! the real one). Times in an [`Outcome`] are what the service said, on the clock of the
//! instance that produced them; the checker converts them (see [`check`]).

pub mod check;
mod endpoint;
mod fenced;
pub mod hand_built;
pub mod workload;

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

// Every test binary compiles the harness; most use none of this.
#[allow(unused_imports)]
pub use check::{check, Check, CheckConfig, Report};
#[allow(unused_imports)]
pub use endpoint::{parse_outcome, Endpoint, Kinds};
#[allow(unused_imports)]
pub use fenced::{FencedRejection, FencedResource};
#[allow(unused_imports)]
pub use workload::{liveness_probe, Workload, WorkloadConfig};

/// What an op asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    Acquire {
        owner: String,
        priority: u32,
        lease_ms: u64,
        /// `None` sends no `waiting_ms` (null).
        waiting_ms: Option<u64>,
        forceful: bool,
        cleanup_ms: u64,
        /// An idempotency key: two acquires with the same one are the same request.
        request_id: Option<String>,
        /// A re-acquire by the holder of this lease.
        lease_id: Option<String>,
        /// A semaphore's number of permits; `None` for a lock (one).
        limit: Option<u32>,
    },
    Renew {
        lease_id: String,
        lease_ms: Option<u64>,
        /// An election's renewal (I17): refused once the lease has ended, even while
        /// nobody has taken it over. Every renewal of an election is strict, and only
        /// an election's (the simulation's first lock, the workload's elections).
        strict: bool,
    },
    Release {
        lease_id: String,
    },
    Validate {
        fencing_token: u64,
    },
    /// An admin's `DELETE /v1/locks/{name}` (or a semaphore's; elections have none).
    ForceRelease,
}

impl Call {
    /// A plain acquire: no wait, not forceful, no cleanup window, no ids.
    pub fn acquire(owner: &str, priority: u32, lease_ms: u64) -> Call {
        Call::Acquire {
            owner: owner.to_owned(),
            priority,
            lease_ms,
            waiting_ms: None,
            forceful: false,
            cleanup_ms: 0,
            request_id: None,
            lease_id: None,
            limit: None,
        }
    }

    pub fn renew(lease_id: &str) -> Call {
        Call::Renew {
            lease_id: lease_id.to_owned(),
            lease_ms: None,
            strict: false,
        }
    }

    pub fn release(lease_id: &str) -> Call {
        Call::Release {
            lease_id: lease_id.to_owned(),
        }
    }

    pub fn validate(fencing_token: u64) -> Call {
        Call::Validate { fencing_token }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Call::Acquire { .. } => "acquire",
            Call::Renew { .. } => "renew",
            Call::Release { .. } => "release",
            Call::Validate { .. } => "validate",
            Call::ForceRelease => "force_release",
        }
    }

    /// The lease this call concerns (renew, release, re-acquire).
    pub fn lease_id(&self) -> Option<&str> {
        match self {
            Call::Renew { lease_id, .. } | Call::Release { lease_id } => Some(lease_id),
            Call::Acquire { lease_id, .. } => lease_id.as_deref(),
            _ => None,
        }
    }
}

/// What came back. `status: None` is a transport error or a client-side timeout.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub status: Option<u16>,
    /// The `error.code` of an error answer, or the transport error's text.
    pub error: Option<String>,
    pub acquired: Option<bool>,
    pub lease_id: Option<String>,
    /// Acquire: the granted token; renew: the lock's token after the renewal.
    pub fencing_token: Option<u64>,
    /// `lock.expires_at`, unix ms on the clock of the instance that wrote it.
    pub expires_at: Option<i64>,
    /// `lock.acquired_at`, unix ms on the clock of the instance that wrote it.
    pub acquired_at: Option<i64>,
    /// `lock.priority` in the answer.
    pub priority: Option<u32>,
    /// Validate: `current`.
    pub current: Option<bool>,
}

impl Outcome {
    /// The service answered, and the answer says what happened (anything but a 5xx).
    pub fn is_definite(&self) -> bool {
        self.status.is_some_and(|s| s < 500)
    }

    /// Transport error, timeout, or a 5xx (`503 store_unavailable` explicitly means the
    /// service could not tell): the call may or may not have taken effect.
    pub fn is_unknown(&self) -> bool {
        !self.is_definite()
    }

    pub fn is_ok(&self) -> bool {
        self.status == Some(200)
    }

    /// A short label: `200`, `409 lock_held`, `unknown`.
    pub fn label(&self) -> String {
        match (self.status, &self.error) {
            (None, _) => "unknown".to_owned(),
            (Some(s), Some(code)) if s != 200 => format!("{s} {code}"),
            (Some(s), _) => s.to_string(),
        }
    }
}

/// One recorded call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Op {
    /// Its index in the history (ops are sorted by invoke time); set by `History::new`.
    pub id: usize,
    pub client: usize,
    /// Which instance (index into the list of URLs / offsets) the call went to.
    pub instance: usize,
    pub lock: String,
    pub call: Call,
    pub invoke_ms: i64,
    pub complete_ms: i64,
    pub outcome: Outcome,
}

/// Builders, mostly for hand-written histories in tests.
impl Op {
    pub fn new(client: usize, instance: usize, lock: &str, call: Call) -> Op {
        Op {
            id: 0,
            client,
            instance,
            lock: lock.to_owned(),
            call,
            invoke_ms: 0,
            complete_ms: 0,
            outcome: Outcome::default(),
        }
    }

    pub fn at(mut self, invoke_ms: i64, complete_ms: i64) -> Op {
        self.invoke_ms = invoke_ms;
        self.complete_ms = complete_ms;
        self
    }

    /// A `200` acquire: `acquired_at` and `expires_at` on the answering instance's clock.
    pub fn granted(mut self, lease_id: &str, token: u64, acquired_at: i64, expires_at: i64) -> Op {
        let priority = match &self.call {
            Call::Acquire { priority, .. } => Some(*priority),
            _ => None,
        };
        self.outcome = Outcome {
            status: Some(200),
            acquired: Some(true),
            lease_id: Some(lease_id.to_owned()),
            fencing_token: Some(token),
            expires_at: Some(expires_at),
            acquired_at: Some(acquired_at),
            priority,
            ..Outcome::default()
        };
        self
    }

    /// A `200` renew with the new expiry (answering instance's clock).
    pub fn renewed(mut self, expires_at: i64) -> Op {
        self.outcome = Outcome {
            status: Some(200),
            expires_at: Some(expires_at),
            ..Outcome::default()
        };
        self
    }

    /// A `200` with no fields that matter (release, force release).
    pub fn ok(mut self) -> Op {
        self.outcome = Outcome {
            status: Some(200),
            ..Outcome::default()
        };
        self
    }

    /// A `200` validate.
    pub fn current(mut self, current: bool) -> Op {
        self.outcome = Outcome {
            status: Some(200),
            current: Some(current),
            ..Outcome::default()
        };
        self
    }

    /// An error answer with its code.
    pub fn refused(mut self, status: u16, code: &str) -> Op {
        self.outcome = Outcome {
            status: Some(status),
            error: Some(code.to_owned()),
            ..Outcome::default()
        };
        self
    }

    /// No answer (transport error or timeout).
    pub fn unknown(mut self) -> Op {
        self.outcome = Outcome {
            error: Some("timeout".to_owned()),
            ..Outcome::default()
        };
        self
    }
}

impl fmt::Display for Op {
    /// `#12 c3@i0 acquire(p2 lease 800 wait 0 forceful) lw/l1 [1000..1012] → 200 token 55`.
    /// Times are as recorded; the checker prints them relative to the history's start.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.describe(f, 0)
    }
}

impl Op {
    pub(crate) fn describe(&self, f: &mut impl fmt::Write, base_ms: i64) -> fmt::Result {
        write!(f, "#{} c{}@i{} ", self.id, self.client, self.instance)?;
        match &self.call {
            Call::Acquire {
                priority,
                lease_ms,
                waiting_ms,
                forceful,
                limit,
                ..
            } => {
                write!(f, "acquire(p{priority} lease {lease_ms}")?;
                if let Some(limit) = limit {
                    write!(f, " of {limit}")?;
                }
                if let Some(w) = waiting_ms {
                    write!(f, " wait {w}")?;
                }
                if *forceful {
                    write!(f, " forceful")?;
                }
                write!(f, ")")?;
            }
            Call::Renew {
                lease_id,
                lease_ms,
                strict,
            } => {
                write!(f, "renew({}", short(lease_id))?;
                if let Some(ms) = lease_ms {
                    write!(f, " lease {ms}")?;
                }
                if *strict {
                    write!(f, " strict")?;
                }
                write!(f, ")")?;
            }
            Call::Release { lease_id } => write!(f, "release({})", short(lease_id))?,
            Call::Validate { fencing_token } => write!(f, "validate({fencing_token})")?,
            Call::ForceRelease => write!(f, "force_release")?,
        }
        write!(
            f,
            " {} [{}..{}] → {}",
            self.lock,
            self.invoke_ms - base_ms,
            self.complete_ms - base_ms,
            self.outcome.label()
        )?;
        let o = &self.outcome;
        if let (Some(token), Call::Acquire { .. }) = (o.fencing_token, &self.call) {
            write!(f, " token {token}")?;
        }
        if let (Some(lease), Call::Acquire { .. }) = (&o.lease_id, &self.call) {
            write!(f, " lease {}", short(lease))?;
        }
        if let Some(current) = o.current {
            write!(f, " current={current}")?;
        }
        Ok(())
    }
}

/// The first 8 characters of a lease id.
pub fn short(lease_id: &str) -> &str {
    lease_id.get(..8).unwrap_or(lease_id)
}

/// Every op of a run, sorted by invoke time, plus what the fenced resource saw.
#[derive(Clone, Debug, Default)]
pub struct History {
    pub ops: Vec<Op>,
    /// Writes the fenced resource refused (a token below the highest it had seen).
    pub fenced_rejections: u64,
    pub fenced_writes: u64,
    /// The first few of those.
    pub fenced_rejected: Vec<FencedRejection>,
    /// What the store held once every call had ended and the collector's delays had passed
    /// that it should not have (a simulation looks; a run on real servers leaves it empty).
    pub leftovers: Vec<String>,
}

impl History {
    /// Sorts `ops` by invoke time (then completion) and numbers them.
    pub fn new(mut ops: Vec<Op>) -> History {
        ops.sort_by_key(|op| (op.invoke_ms, op.complete_ms, op.client));
        for (id, op) in ops.iter_mut().enumerate() {
            op.id = id;
        }
        History {
            ops,
            fenced_rejections: 0,
            fenced_writes: 0,
            fenced_rejected: Vec::new(),
            leftovers: Vec::new(),
        }
    }

    /// The earliest invoke time (0 for an empty history).
    pub fn start_ms(&self) -> i64 {
        self.ops.iter().map(|op| op.invoke_ms).min().unwrap_or(0)
    }
}

/// The test process's wall clock, in unix ms: rounded down (for invoke times).
pub fn now_floor_ms() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    since.as_millis() as i64
}

/// The test process's wall clock, in unix ms: rounded up (for completion times).
pub fn now_ceil_ms() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    since.as_nanos().div_ceil(1_000_000) as i64
}

/// An RFC 3339 time (as the API writes `expires_at`) in unix ms.
pub fn parse_time_ms(raw: &str) -> Option<i64> {
    let when =
        time::OffsetDateTime::parse(raw, &time::format_description::well_known::Rfc3339).ok()?;
    i64::try_from(when.unix_timestamp_nanos().div_euclid(1_000_000)).ok()
}
