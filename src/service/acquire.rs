//! Acquiring without waiting: a free or expired lock is granted at once, and a lock this
//! instance wrote last is written straight away on its cached version. A call that must wait
//! (to queue, or to preempt) goes on to `waiting`.

use super::events::{audit_override, Metrics};
use super::{
    refused, snapshot, token_of, Granted, Immediate, LockService, Put, Read, Refusal, ServiceError,
    MAX_ROUNDS,
};
use crate::engine::{self, AcquireDecision, AcquireRefusal, AcquireRequest};
use crate::model::{LeaseId, LockName, Priority, UnixMillis};
use crate::record::LockRecord;
use crate::store::Stored;

impl LockService {
    /// Acquires without waiting, or says that the call must wait in the queue.
    pub(super) async fn acquire_now(
        &self,
        name: &LockName,
        request: &AcquireRequest,
        new_lease: LeaseId,
    ) -> Immediate {
        match self.try_acquire_now(name, request, new_lease).await {
            Ok(immediate) => immediate,
            Err(error) => Immediate::Done(Err(error)),
        }
    }

    async fn try_acquire_now(
        &self,
        name: &LockName,
        request: &AcquireRequest,
        new_lease: LeaseId,
    ) -> Result<Immediate, ServiceError> {
        let deadline = self.deadline();
        let overriding = request.priority == Priority::OVERRIDE;
        // Most acquires find no record, or the free record this instance left: write at once,
        // and read only if that fails. A decision not to write is only made on a fresh read.
        let mut first = (request.lease_id.is_none()).then(|| self.cache.get(name));
        for _ in 0..MAX_ROUNDS {
            let now = UnixMillis::now();
            let Read {
                stored,
                record,
                queue,
                cached,
            } = match first.take() {
                Some(None) => Read {
                    stored: None,
                    record: LockRecord::default(),
                    queue: Vec::new(),
                    cached: true,
                },
                Some(Some((record, version)))
                    if record.holder.is_none() && record.requestor.is_none() && !record.queued =>
                {
                    let stored = Some(Stored {
                        record: record.clone(),
                        version,
                    });
                    Read {
                        stored,
                        record,
                        queue: Vec::new(),
                        cached: true,
                    }
                }
                _ => self.read(name, deadline, now, false).await?,
            };
            let done = |outcome| Ok(Immediate::Done(outcome));
            let (next, lease_id, fresh) =
                match engine::decide_acquire(&record, &queue, request, now, new_lease) {
                    // A decision not to write is only made on a fresh read.
                    AcquireDecision::AlreadyGranted { .. }
                    | AcquireDecision::Refuse(_)
                    | AcquireDecision::Wait
                        if cached =>
                    {
                        continue
                    }
                    AcquireDecision::AlreadyGranted { lease_id } => {
                        let lock = snapshot(name, &record, &queue, now);
                        return done(Ok(Granted {
                            lease_id,
                            fencing_token: token_of(&record),
                            lock,
                            fresh: false,
                        }));
                    }
                    AcquireDecision::Refuse(AcquireRefusal::LockHeld) => {
                        return done(Err(refused(Refusal::LockHeld, name, &record, &queue, now)))
                    }
                    AcquireDecision::Refuse(AcquireRefusal::RequestIdReused) => {
                        return done(Err(ServiceError::RequestIdReused))
                    }
                    AcquireDecision::Wait => return Ok(Immediate::MustWait),
                    AcquireDecision::Grant { record, lease_id } => (record, lease_id, true),
                    AcquireDecision::Reacquire { record, lease_id } => (record, lease_id, false),
                };
            match self.put(name, stored.as_ref(), next, deadline).await? {
                Put::Landed(written, version) => {
                    if overriding {
                        let previous = record.holder.as_ref().map(|h| h.owner.as_str());
                        audit_override(
                            name,
                            request.owner.as_str(),
                            previous,
                            &request.message,
                            "granted",
                        );
                    }
                    Metrics::bump(&self.metrics.grants);
                    self.cache.remember(name, &written, version);
                    let lock = snapshot(name, &written, &queue, now);
                    return done(Ok(Granted {
                        lease_id,
                        fencing_token: token_of(&written),
                        lock,
                        fresh,
                    }));
                }
                Put::Raced => continue,
                Put::NestedLocks => {
                    return done(Err(refused(
                        Refusal::NameConflict,
                        name,
                        &record,
                        &queue,
                        now,
                    )))
                }
            }
        }
        Err(ServiceError::StoreUnavailable(
            "the lock changed too often to decide".into(),
        ))
    }
}
