//! Reading a lock for a decision: the record, and its queue when the decision can depend
//! on it, read from the store or taken from what this instance remembers (`cache`), with
//! its `engine::Basis`; what a decision may be acted on is the engine's rule (its `trust`).
//!
//! **An answer that leaves a lease as it was is given on the latest copy.** A ZooKeeper
//! follower answers reads from its own copy, which can lag the leader's (by milliseconds
//! when healthy, by seconds when it is slow), and the session a read goes out on may be
//! another instance's than the one that granted or renewed a lease. So a release read there
//! can find the lock free while the caller's lease holds it, and a renew can find another
//! holder. Answering on that read would tell the caller "released" while its lease goes on
//! holding the lock, or "not the owner" of a lease it holds. Every refusal (renew, release,
//! acquire, and a waiting caller's `too_many_waiters` and `superseded` in `round`), every
//! release that finds nothing to do, and a `GET` asking whether an owner holds the lock are
//! therefore decided on a read made after a `sync` (`read_latest`, `Basis::Latest`), which
//! shows every write acknowledged to anyone before it: the caller's own grant and renewals
//! included. That read takes the record and the queue as one state, since a decision made on
//! it may write after all (a release whose caller does hold the lock hands it on to the next
//! waiter). Writes need no such read: they are conditional on the version read, and one
//! planned on an old copy does not land. A refusal that is a matter of time alone (a wait
//! that ran out) needs none either.
//!
//! **What it costs.** The store sends the `sync` and the read together (`store::zk::read`):
//! a session's requests are processed in order, so the read is answered after the sync, and
//! the pair costs about one round trip to the leader more than a plain read. An acquire that
//! will not wait, on a lock this instance last wrote as held by a live lease (however long
//! ago) and with no callers waiting for it here, reads the latest copy at once
//! (`engine::AcquireRequest::first_basis`): it is most likely refused, and an optimistic
//! write or a plain read first would only be followed by that read.
//!
//! Keeps I4 (the rule above) and I7 (a remembered queue only while it holds); see DESIGN.md,
//! "Invariants".

use tokio::time::Instant;

use super::{LockService, ServiceError};
use crate::engine::{self, Basis};
use crate::model::{LockName, UnixMillis};
use crate::record::LockRecord;
use crate::store::{Fresh, Reads, Stored, Version};
use crate::waiter::Waiter;

/// A record, and the queue when it was worth reading, with what they are
/// (`engine::Basis`): each decision's `trust` says what it may be acted on.
pub(super) struct Read {
    pub stored: Option<Stored>,
    pub record: LockRecord,
    pub queue: Vec<Waiter>,
    pub basis: Basis,
}

impl Read {
    /// What a read of the store found.
    fn fresh(stored: Option<Stored>, queue: Vec<Waiter>, basis: Basis) -> Read {
        let record = stored
            .as_ref()
            .map(|s| s.record.clone())
            .unwrap_or_default();
        Read {
            stored,
            record,
            queue,
            basis,
        }
    }

    /// The record this instance wrote last (`None`: none, as it remembers), not read, and the
    /// queue: `Basis::Remembered` if it is the one left behind the record, else `Cached`.
    pub(super) fn cached(
        stored: Option<(LockRecord, Version)>,
        queue: Vec<Waiter>,
        basis: Basis,
    ) -> Self {
        let (record, stored) = match stored {
            Some((record, version)) => (record.clone(), Some(Stored { record, version })),
            None => (LockRecord::default(), None),
        };
        Read {
            stored,
            record,
            queue,
            basis,
        }
    }

    /// The record this instance wrote last and the queue it left behind it, not read.
    pub(super) fn remembered(record: LockRecord, version: Version, rest: Vec<Waiter>) -> Self {
        Read::cached(Some((record, version)), rest, Basis::Remembered)
    }
}

impl LockService {
    /// Reads the record, and the queue too when it can matter: when the record exists and is
    /// not simply held (a free or expired lock goes to waiters first), or names a requestor.
    /// With `always_queue`, both in one store request (`Take::Both`).
    pub(super) async fn read(
        &self,
        name: &LockName,
        deadline: Instant,
        now: UnixMillis,
        always_queue: bool,
    ) -> Result<Read, ServiceError> {
        if always_queue {
            let (stored, queue) = self
                .store
                .read_with_queue(name, Fresh::Any, deadline)
                .await?;
            return Ok(Read::fresh(stored, queue, Basis::Read));
        }
        let stored = self.store.read(name, Fresh::Any, deadline).await?;
        let worth_it = stored
            .as_ref()
            .is_some_and(|s| engine::queue_matters(&s.record, now));
        let queue = if worth_it {
            self.store.queue(name, deadline).await?
        } else {
            Vec::new()
        };
        Ok(Read::fresh(stored, queue, Basis::Read))
    }

    /// The record and the queue as one state, after a `sync` (see the module doc). The
    /// queue is always read: a decision made on this read may write (a release whose
    /// caller turns out to hold the lock hands it to the next waiter).
    pub(super) async fn read_latest(
        &self,
        name: &LockName,
        deadline: Instant,
    ) -> Result<Read, ServiceError> {
        let (stored, queue) = self
            .store
            .read_with_queue(name, Fresh::Latest, deadline)
            .await?;
        Ok(Read::fresh(stored, queue, Basis::Latest))
    }

    /// The record this instance wrote last, if it has it and `basis` is `Cached`, else a read
    /// on `basis` (`Read` or `Latest`). The queue is read only when the record says callers
    /// may wait, and not even then when the queue this instance remembers behind the record
    /// still holds (`engine::remembered_queue_holds`): then the basis is `Remembered`.
    pub(super) async fn read_cached(
        &self,
        name: &LockName,
        deadline: Instant,
        now: UnixMillis,
        basis: Basis,
    ) -> Result<Read, ServiceError> {
        let cached = self.cache.get(name).filter(|_| basis == Basis::Cached);
        let Some((record, version, rest)) = cached else {
            return match basis {
                Basis::Latest => self.read_latest(name, deadline).await,
                _ => self.read(name, deadline, now, true).await,
            };
        };
        let (queue, basis) = if engine::remembered_queue_holds(&record, &rest) {
            self.metrics.queue_reads_saved.inc();
            (rest, Basis::Remembered)
        } else if engine::may_have_waiters(&record) {
            (self.store.queue(name, deadline).await?, Basis::Cached)
        } else {
            (Vec::new(), Basis::Cached)
        };
        Ok(Read::cached(Some((record, version)), queue, basis))
    }

    /// What an acquire decides on without reading, when `basis` says so and this instance
    /// has it: the remembered record and queue (`Remembered`), or the record it wrote last,
    /// or none if it remembers none, when a grant may be planned on that
    /// (`Cached`, `engine::grant_on_memory`).
    pub(super) fn remembered_for(&self, name: &LockName, basis: Basis) -> Option<Read> {
        match (basis, self.cache.get(name)) {
            (Basis::Remembered, Some((record, version, rest))) => {
                Some(Read::remembered(record, version, rest))
            }
            (Basis::Cached, None) => Some(Read::cached(None, Vec::new(), Basis::Cached)),
            (Basis::Cached, Some((record, version, _))) if engine::grant_on_memory(&record) => {
                Some(Read::cached(
                    Some((record, version)),
                    Vec::new(),
                    Basis::Cached,
                ))
            }
            _ => None,
        }
    }
}
