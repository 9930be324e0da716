//! The reconciler: repair work that must outlive the call that needed it, in one queue with
//! one backoff. A call that ends before it knows what its writes did (its caller left, the
//! store failed, an answer was lost) leaves a job here:
//!
//! - [`Repair::UndoGrant`]: an inline grant whose caller will never learn of it. It is
//!   released once a read after a `sync` shows its lease holding the lock. A lost write may
//!   land *after* such a read (a server can apply a request it took in before its connection
//!   broke, and a read on another session is not ordered after it), so the job looks until no
//!   write of the call can land any more (the landing window), or until the lease has run
//!   out. It releases only a lease it has seen holding the lock (I11).
//! - [`Repair::Sweep`]: a waiting call's queue entries, which may linger when the store was
//!   away as the call ended, or a lost create may still make. Every entry of the call is
//!   removed while removing one fails, and until the landing window has passed; for a call
//!   without a `request_id`, the lock is freed if the call's lease holds it. A call with a
//!   `request_id` shares its key with its retries: an entry a retry waits on here is kept,
//!   and its grant is left to its lease. A retry on another instance that adopted the call's
//!   entry (see `store::zk::queue`) finds it gone and answers `503` (I11, I12).
//! - [`Repair::TellHanded`]: a hand-off to a waiter here whose write's answer was lost. Such
//!   a waiter may be parked on a watch of the session the write was lost on, which may not
//!   come back. It is told once a read after a `sync` shows its lease holding the lock, the
//!   test a landed write's answer passes too, until it has ended its call or the landing
//!   window has passed (I10).
//!
//! Every job is tried at once, then again after a pause that doubles from 50 ms to 1 s. The
//! landing window is the collector's delay (`gc::Collector::landing_window`), which
//! `ServeArgs::check` makes longer than a write can take to land. Attempts run side by side
//! on the reconciler's one task, so a slow store delays no other job.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use tokio::sync::mpsc;

use super::gc::Collector;
use super::local::LocalWaiters;
use super::LockService;
use crate::model::{LeaseId, LockName};
use crate::store::LockStore;
use crate::waiter::{Ticket, Waiter};

mod guards;
mod repair;

pub(super) use guards::{UndoGrant, UnsettledHandOff};
use repair::attempt;
pub(super) use repair::tell_handed;

/// The first pause between two attempts of a job, and the longest.
const FIRST_PAUSE: Duration = Duration::from_millis(50);
const LONGEST_PAUSE: Duration = Duration::from_secs(1);

/// A piece of repair work (see the module doc).
pub(super) enum Repair {
    UndoGrant {
        /// The service that releases the grant (its release hands the lock on).
        service: Arc<LockService>,
        lease: LeaseId,
        /// When the lease has run out, the takeover margin included.
        lease_ends: Instant,
        /// Whether the last look failed to settle it (no answer, or a release that failed).
        unsettled: bool,
    },
    Sweep {
        /// The call's key, which every entry it made carries.
        key: String,
        /// The call's entry, when known.
        me: Option<Waiter>,
        /// The call's lease, for a call without a `request_id`.
        claimable: Option<LeaseId>,
        failed: u32,
    },
    TellHanded {
        /// The waiters the release's hand-offs went to.
        tried: Vec<Waiter>,
    },
}

struct Job {
    name: LockName,
    repair: Repair,
    /// After this, a look that finds nothing to do is the last.
    settled: Instant,
    pause: Duration,
}

/// What an attempt left to do.
enum Next {
    Done,
    Again,
}

/// What the attempts need besides the job.
struct Context {
    store: Arc<dyn LockStore>,
    local: Arc<LocalWaiters>,
    collector: Collector,
    store_timeout: Duration,
}

/// The queue of repair jobs. Dropping it ends the reconciler's task once the jobs queued
/// have ended.
pub(super) struct Reconciler {
    jobs: mpsc::UnboundedSender<Job>,
    landing_window: Duration,
    /// A planted bug (`Planted::skip_repair`): every job is dropped.
    skip: bool,
}

impl Reconciler {
    /// Starts the reconciler's task. Must run inside a tokio runtime.
    pub(super) fn start(
        store: Arc<dyn LockStore>,
        local: Arc<LocalWaiters>,
        collector: Collector,
        store_timeout: Duration,
        skip: bool,
    ) -> Reconciler {
        let landing_window = collector.landing_window();
        let (jobs, incoming) = mpsc::unbounded_channel();
        let context = Arc::new(Context {
            store,
            local,
            collector,
            store_timeout,
        });
        tokio::spawn(run(context, incoming));
        Reconciler {
            jobs,
            landing_window,
            skip,
        }
    }

    /// Releases a grant of `lease` on `name` that nobody will learn of (see the module doc),
    /// looking for it until the landing window has passed, or `lease_ms` plus the takeover
    /// margin `skew_ms`.
    pub(super) fn undo_grant(
        &self,
        service: Arc<LockService>,
        name: &LockName,
        lease: LeaseId,
        lease_ms: u64,
        skew_ms: u64,
    ) {
        let lease_ends = Instant::now() + Duration::from_millis(lease_ms.saturating_add(skew_ms));
        let repair = Repair::UndoGrant {
            service,
            lease,
            lease_ends,
            unsettled: false,
        };
        self.push(name, repair, self.landing_window);
    }

    /// Removes the queue entries of the call `ticket` (and `me`, when known) that may linger,
    /// and frees a lock its lease holds when the call has no `request_id`.
    pub(super) fn sweep(&self, name: &LockName, me: Option<&Waiter>, ticket: &Ticket) {
        let repair = Repair::Sweep {
            key: ticket.key.clone(),
            me: me.cloned(),
            claimable: ticket.request_id.is_none().then_some(ticket.lease_id),
            failed: 0,
        };
        self.push(name, repair, self.landing_window);
    }

    /// Tells the waiter here among `tried` that a hand-off whose answer was lost reached it,
    /// once it shows.
    pub(super) fn tell_handed(&self, name: &LockName, tried: Vec<Waiter>) {
        self.push(name, Repair::TellHanded { tried }, self.landing_window);
    }

    fn push(&self, name: &LockName, repair: Repair, window: Duration) {
        if self.skip {
            return;
        }
        let job = Job {
            name: name.clone(),
            repair,
            settled: Instant::now() + window,
            pause: FIRST_PAUSE,
        };
        // Sent to a task that ends only once this sender is gone.
        let _ = self.jobs.send(job);
    }
}

/// The reconciler's task: jobs wait in one queue, ordered by when they fall due, and each
/// attempt runs beside the others. It ends once the queue's sender is gone and no job is
/// left.
async fn run(context: Arc<Context>, mut incoming: mpsc::UnboundedReceiver<Job>) {
    let mut waiting: BTreeMap<(Instant, u64), Job> = BTreeMap::new();
    let mut trying: FuturesUnordered<_> = FuturesUnordered::new();
    let mut open = true;
    let mut seq = 0u64;
    loop {
        let next_due = waiting.first_key_value().map(|(&(due, _), _)| due);
        // Biased, so that a simulation replays exactly (no random choice between branches).
        tokio::select! {
            biased;
            job = incoming.recv(), if open => match job {
                Some(job) => {
                    seq += 1;
                    waiting.insert((Instant::now(), seq), job);
                }
                None => open = false,
            },
            Some(tried) = trying.next(), if !trying.is_empty() => {
                // (A job whose attempt panicked is gone.)
                let tried: Option<(Job, Next)> = tried; // (the type named for inference)
                if let Some((job, Next::Again)) = tried {
                    seq += 1;
                    waiting.insert((Instant::now() + job.pause, seq), job.backed_off());
                }
            }
            _ = tokio::time::sleep_until(next_due.unwrap_or_else(Instant::now)), if next_due.is_some() => {
                while let Some(entry) = waiting.first_entry() {
                    if entry.key().0 > Instant::now() {
                        break;
                    }
                    let job = entry.remove();
                    trying.push(guarded(context.clone(), job));
                }
            }
            else => return,
        }
    }
}

/// An attempt whose panic ends its job (logged), not the reconciler's task and every job
/// queued on it.
async fn guarded(context: Arc<Context>, job: Job) -> Option<(Job, Next)> {
    let name = job.name.clone();
    let attempt = std::panic::AssertUnwindSafe(attempt(context, job));
    let done = attempt.catch_unwind().await;
    if done.is_err() {
        tracing::error!(lock = %name, "a repair panicked; it is dropped");
    }
    done.ok()
}

impl Job {
    fn backed_off(mut self) -> Job {
        self.pause = (self.pause * 2).min(LONGEST_PAUSE);
        self
    }
}
