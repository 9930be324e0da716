//! Writing a planned record, and learning the outcome of a write whose answer was lost: by
//! re-reading after a `sync` and recognising the write by what only it could have done
//! (`engine::landed`; never by guessing), so a caller is neither told that its own grant is
//! someone else's lock nor left holding a lease it was never told of. When the write ran out of the call's
//! store timeout, that read has a store timeout of its own (`LockService::settle_by`).
//!
//! **A "not landed" is not final.** ZooKeeper orders a session's requests, so on the write's
//! own session the read sees the write if it ever lands. But while the primary session is
//! disconnected the read goes out on the stand-in, or after a given-up session on a new one,
//! and a write the old connection's server had already taken in may land after that read.
//! Nothing unsafe follows, since the next round's write is conditional on what it reads and
//! only one of the two lands; what keeps the caller's answer true is that every later round
//! recognises the write once it has landed, by what only it could have done: an acquire
//! finds its own new lease holding the lock (`AcquireDecision::OwnGrantLanded`), a waiter its
//! own lease (`WaitDecision::Granted`), and a release or force release finds the grant it
//! set out to end gone (`let_go`).
//!
//! Keeps I10, and I1's "no lost answer is taken as a grant" (`put`); see DESIGN.md, "Invariants".

use tracing::warn;

use tokio::time::Instant;

use super::{LockService, Put, ServiceError};
use crate::engine;
use crate::model::LockName;
use crate::record::LockRecord;
use crate::store::Reads;
use crate::store::{Fresh, RecordWrite, StoreError, Stored, Version, WriteOutcome};

impl LockService {
    /// Writes `next` over what was read, and settles a lost answer (`settle`).
    pub(super) async fn put(
        &self,
        name: &LockName,
        current: Option<&Stored>,
        next: LockRecord,
        deadline: Instant,
    ) -> Result<Put, ServiceError> {
        let blind;
        let current = match current {
            Some(stored) if self.planted.blind_grant && grants(stored, &next) => {
                blind = self.store.read(name, Fresh::Latest, deadline).await?;
                blind.as_ref()
            }
            current => current,
        };
        let written = match current {
            None => {
                self.store
                    .write(name, RecordWrite::Create(&next), deadline)
                    .await
            }
            Some(stored) => {
                self.store
                    .write(name, RecordWrite::Update(&next, stored.version), deadline)
                    .await
            }
        };
        let before = current.map(|s| &s.record);
        Ok(
            match self.settle(name, before, next, written, deadline).await? {
                Settled::Landed(landed, version) => Put::Landed(landed, version),
                Settled::NestedLocks => Put::NestedLocks,
                Settled::Conflict | Settled::NotLanded | Settled::Collected => Put::Raced,
            },
        )
    }

    /// What a conditional write of `next` over `before` (`None`: no record) came to, given
    /// its store answer `written`: the one place a lost answer is settled. It is read back
    /// after a `sync` and recognised by what only the write could have done
    /// (`engine::landed`): requests on one session are answered in order, so that read sees
    /// the write if it landed (on another session it may not yet; see the module doc).
    pub(super) async fn settle(
        &self,
        name: &LockName,
        before: Option<&LockRecord>,
        next: LockRecord,
        written: Result<WriteOutcome, StoreError>,
        deadline: Instant,
    ) -> Result<Settled, ServiceError> {
        match written {
            Ok(WriteOutcome::Written { zxid, version }) => {
                let mut landed = next;
                landed.resolve_token(zxid);
                Ok(Settled::Landed(Box::new(landed), version))
            }
            Ok(WriteOutcome::Conflict) => {
                self.cache.forget(name);
                Ok(Settled::Conflict)
            }
            Ok(WriteOutcome::NestedLocks) => Ok(Settled::NestedLocks),
            Err(StoreError::OutcomeUnknown(why)) => {
                warn!(lock = %name, %why, "a write's answer was lost; reading back its outcome");
                self.cache.forget(name);
                if self.planted.guess_landed {
                    return Ok(Settled::Landed(Box::new(next), Version::plain(0)));
                }
                match self
                    .store
                    .read(name, Fresh::Latest, self.settle_by(deadline))
                    .await?
                {
                    Some(stored) if engine::landed(before, &next, &stored.record) => {
                        Ok(Settled::Landed(Box::new(stored.record), stored.version))
                    }
                    // A free record is deleted only by the collector, once it has been free
                    // for a delay: the write that freed it landed, or one that ended the same
                    // hold did.
                    None if next.is_free() && next.queued.is_none() => Ok(Settled::Collected),
                    _ => Ok(Settled::NotLanded),
                }
            }
            Err(error) => Err(error.into()),
        }
    }
}

/// What a conditional write came to ([`LockService::settle`]).
pub(super) enum Settled {
    /// It landed: the record as written (its token resolved) or as read back, and its
    /// version.
    Landed(Box<LockRecord>, Version),
    /// It wrote a free record, its answer was lost, and the record is gone: collected.
    Collected,
    /// Its answer was lost and the read back does not show it. On another session than the
    /// write's, it may still land (see the module doc).
    NotLanded,
    /// Refused by its condition: it never lands.
    Conflict,
    /// The name is the parent of nested locks.
    NestedLocks,
}

/// A write that gives the lock to another lease than holds it (for `Planted::blind_grant`).
fn grants(current: &Stored, next: &LockRecord) -> bool {
    next.holders
        .iter()
        .filter_map(|h| h.lease_id)
        .any(|lease| crate::engine::holder_with_lease(&current.record, &lease).is_none())
}
