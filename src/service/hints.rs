//! The switches of the performance hints (DESIGN.md, "Hints"). A hint may suggest and
//! never decides: with any of them off, every answer and invariant is the same, and only the
//! reads, writes and latency change. `serve --hints-off` names the ones to turn off; the
//! bench measures each against its switch (`scripts/bench` with `HINTS=1`).

use clap::ValueEnum;

/// One hint, as `serve --hints-off` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Hint {
    /// Start a call on the record this instance wrote last, unread (`cache`).
    RecordCache,
    /// Hand the next hand-off to the head of the queue remembered from the last (`cache`).
    RememberedQueue,
    /// Tell a waiter here of a hand-off in process, and let a waiter behind one here wait
    /// for its call rather than watch its node (`local`).
    InProcess,
    /// Callers joining a queue ride on the next hand-off's write (`--join-window-ms`).
    GroupCommit,
    /// The head waits for a release here before it watches (`--head-grace-ms`).
    HeadGrace,
    /// Concurrent record writes share a ZooKeeper `multi` (`--zk-writes-in-flight`).
    SharedMultis,
    /// A semaphore's releases on this instance write one at a time (`turns`).
    OneWriter,
    /// Every hint above.
    All,
}

impl Hint {
    /// Whether this hint is on, given the ones turned off.
    pub fn on(self, off: &[Hint]) -> bool {
        !off.iter().any(|h| *h == self || *h == Hint::All)
    }
}

/// The switches of the hints that are not a duration or a count.
#[derive(Clone, Copy, Debug)]
pub struct Hints {
    pub record_cache: bool,
    pub remembered_queue: bool,
    pub in_process: bool,
    pub one_writer: bool,
}

impl Hints {
    pub const ALL_ON: Hints = Hints {
        record_cache: true,
        remembered_queue: true,
        in_process: true,
        one_writer: true,
    };
    pub const ALL_OFF: Hints = Hints {
        record_cache: false,
        remembered_queue: false,
        in_process: false,
        one_writer: false,
    };

    /// The switches with the hints `off` turned off.
    pub fn without(off: &[Hint]) -> Hints {
        Hints {
            record_cache: Hint::RecordCache.on(off),
            remembered_queue: Hint::RememberedQueue.on(off),
            in_process: Hint::InProcess.on(off),
            one_writer: Hint::OneWriter.on(off),
        }
    }
}
