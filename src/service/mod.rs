//! The lock service: reads a record, asks the engine what to do, performs the one conditional
//! write it names, and retries from the read when the record changed underneath.
//!
//! It also owns the two I/O-shaped safety rules: a write whose answer was lost is judged by
//! re-reading (never by guessing), and a grant made for a caller who went away is undone.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use tracing::{info, warn};

use crate::engine::{
    self, AcquireDecision, AcquireRefusal, AcquireRequest, ReleaseDecision, RenewDecision,
};
use crate::model::{FencingToken, LeaseId, LockName, UnixMillis};
use crate::record::LockRecord;
use crate::store::{ListQuery, LockStore, StoreError, Stored, WriteOutcome};

mod replies;

/// How many times one call re-reads after losing a race before giving up.
const MAX_ROUNDS: usize = 64;

/// A lock as read at one instant; the API renders it as LockInfo.
#[derive(Clone, Debug)]
pub struct LockSnapshot {
    pub name: LockName,
    pub record: LockRecord,
    pub read_at: UnixMillis,
}

#[derive(Clone, Debug)]
pub struct Granted {
    pub lease_id: LeaseId,
    pub fencing_token: FencingToken,
    pub lock: LockSnapshot,
    /// This call created the grant (rather than renewing or repeating one).
    pub fresh: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    LockHeld,
    NotOwner,
    /// The name is the parent of existing nested locks.
    NameConflict,
}

#[derive(Clone, Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("refused: {refusal:?}")]
    Refused {
        refusal: Refusal,
        lock: Box<LockSnapshot>,
    },
    #[error("request_id was used before with a different request")]
    RequestIdReused,
    #[error("store unavailable: {0}")]
    StoreUnavailable(String),
}

impl From<StoreError> for ServiceError {
    fn from(error: StoreError) -> Self {
        ServiceError::StoreUnavailable(error.to_string())
    }
}

pub type AcquireOutcome = Result<Granted, ServiceError>;

pub struct LockService {
    store: Arc<dyn LockStore>,
    store_timeout: Duration,
    replies: replies::ReplyCache,
}

/// The result of trying one write.
enum Put {
    Landed(Box<LockRecord>),
    Raced,
    NestedLocks,
}

fn snapshot(name: &LockName, record: &LockRecord, read_at: UnixMillis) -> LockSnapshot {
    LockSnapshot {
        name: name.clone(),
        record: record.clone(),
        read_at,
    }
}

fn refused(
    refusal: Refusal,
    name: &LockName,
    record: &LockRecord,
    now: UnixMillis,
) -> ServiceError {
    ServiceError::Refused {
        refusal,
        lock: Box::new(snapshot(name, record, now)),
    }
}

fn record_of(stored: &Option<Stored>) -> LockRecord {
    stored
        .as_ref()
        .map(|s| s.record.clone())
        .unwrap_or_default()
}

fn token_of(record: &LockRecord) -> FencingToken {
    record
        .holder
        .as_ref()
        .and_then(|h| h.fencing_token)
        .unwrap_or(FencingToken(0))
}

/// Equal apart from the fencing token, which a grant leaves for the store to fill in.
fn same_write(stored: &LockRecord, written: &LockRecord) -> bool {
    let strip = |record: &LockRecord| {
        let mut record = record.clone();
        if let Some(holder) = &mut record.holder {
            holder.fencing_token = None;
        }
        record
    };
    strip(stored) == strip(written)
}

impl LockService {
    pub fn new(store: Arc<dyn LockStore>, store_timeout: Duration) -> Self {
        LockService {
            store,
            store_timeout,
            replies: replies::ReplyCache::default(),
        }
    }

    fn deadline(&self) -> Instant {
        Instant::now() + self.store_timeout
    }

    /// Acquires on a task of its own, so that a caller who disconnects mid-call never leaves
    /// a grant behind: if nobody is left to receive a fresh grant, it is released again.
    pub async fn acquire(
        self: &Arc<Self>,
        name: LockName,
        request: AcquireRequest,
    ) -> AcquireOutcome {
        if let Some(id) = &request.request_id {
            if let Some(outcome) = self.replies.get(&name, id, &request.request_digest) {
                return outcome;
            }
        }
        let (reply, answer) = oneshot::channel();
        let service = self.clone();
        tokio::spawn(async move {
            let outcome = service.acquire_now(&name, &request).await;
            if let Some(id) = &request.request_id {
                if !matches!(outcome, Err(ServiceError::StoreUnavailable(_))) {
                    service
                        .replies
                        .put(&name, id, &request.request_digest, &outcome);
                }
            }
            if let Err(Ok(granted)) = reply.send(outcome) {
                if granted.fresh {
                    info!(lock = %name, "caller went away before its grant was delivered; releasing it");
                    if let Some(id) = &request.request_id {
                        service.replies.forget(&name, id);
                    }
                    if let Err(error) = service.release(&name, &granted.lease_id).await {
                        warn!(lock = %name, %error, "could not undo an undelivered grant; its lease will run out");
                    }
                }
            }
        });
        answer
            .await
            .unwrap_or_else(|_| Err(ServiceError::StoreUnavailable("acquire task failed".into())))
    }

    async fn acquire_now(&self, name: &LockName, request: &AcquireRequest) -> AcquireOutcome {
        let deadline = self.deadline();
        let new_lease = LeaseId::random();
        for _ in 0..MAX_ROUNDS {
            let current = self.store.read(name, deadline).await?;
            let record = record_of(&current);
            let now = UnixMillis::now();
            let (next, lease_id, fresh) =
                match engine::decide_acquire(&record, request, now, new_lease) {
                    AcquireDecision::AlreadyGranted { lease_id } => {
                        return Ok(Granted {
                            lease_id,
                            fencing_token: token_of(&record),
                            lock: snapshot(name, &record, now),
                            fresh: false,
                        });
                    }
                    AcquireDecision::Refuse(AcquireRefusal::LockHeld) => {
                        return Err(refused(Refusal::LockHeld, name, &record, now));
                    }
                    AcquireDecision::Refuse(AcquireRefusal::RequestIdReused) => {
                        return Err(ServiceError::RequestIdReused);
                    }
                    AcquireDecision::Grant { record, lease_id } => (record, lease_id, true),
                    AcquireDecision::Reacquire { record, lease_id } => (record, lease_id, false),
                };
            match self.put(name, current.as_ref(), next, deadline).await? {
                Put::Landed(written) => {
                    return Ok(Granted {
                        lease_id,
                        fencing_token: token_of(&written),
                        lock: snapshot(name, &written, now),
                        fresh,
                    });
                }
                Put::Raced => continue,
                Put::NestedLocks => return Err(refused(Refusal::NameConflict, name, &record, now)),
            }
        }
        Err(ServiceError::StoreUnavailable(
            "the lock changed too often to decide".into(),
        ))
    }

    /// Writes `next` over what was read. A lost answer is settled by reading again: requests
    /// on one session are answered in order, so that read sees the write if it landed.
    async fn put(
        &self,
        name: &LockName,
        current: Option<&Stored>,
        next: LockRecord,
        deadline: Instant,
    ) -> Result<Put, ServiceError> {
        let written = match current {
            None => self.store.create(name, &next, deadline).await,
            Some(stored) => {
                self.store
                    .update(name, &next, stored.version, deadline)
                    .await
            }
        };
        match written {
            Ok(WriteOutcome::Written { zxid }) => {
                let mut landed = next;
                landed.resolve_token(zxid);
                Ok(Put::Landed(Box::new(landed)))
            }
            Ok(WriteOutcome::Conflict) => Ok(Put::Raced),
            Ok(WriteOutcome::NestedLocks) => Ok(Put::NestedLocks),
            Err(StoreError::OutcomeUnknown(why)) => {
                warn!(lock = %name, %why, "a write's answer was lost; reading back its outcome");
                match self.store.read(name, deadline).await? {
                    Some(stored) if same_write(&stored.record, &next) => {
                        Ok(Put::Landed(Box::new(stored.record)))
                    }
                    _ => Ok(Put::Raced),
                }
            }
            Err(error) => Err(error.into()),
        }
    }

    pub async fn renew(
        &self,
        name: &LockName,
        lease_id: &LeaseId,
        lease_ms: Option<u64>,
    ) -> Result<LockSnapshot, ServiceError> {
        let deadline = self.deadline();
        for _ in 0..MAX_ROUNDS {
            let current = self.store.read(name, deadline).await?;
            let record = record_of(&current);
            let now = UnixMillis::now();
            let next = match engine::decide_renew(&record, lease_id, lease_ms, now) {
                RenewDecision::NotOwner => {
                    return Err(refused(Refusal::NotOwner, name, &record, now))
                }
                RenewDecision::Write(next) => *next,
            };
            match self.put(name, current.as_ref(), next, deadline).await? {
                Put::Landed(written) => return Ok(snapshot(name, &written, now)),
                Put::Raced | Put::NestedLocks => continue,
            }
        }
        Err(ServiceError::StoreUnavailable(
            "the lock changed too often to decide".into(),
        ))
    }

    pub async fn release(
        &self,
        name: &LockName,
        lease_id: &LeaseId,
    ) -> Result<LockSnapshot, ServiceError> {
        self.remove(name, |record, now| {
            engine::decide_release(record, lease_id, now)
        })
        .await
        .map(|(after, _)| after)
    }

    /// An admin's force release. Also returns the record it removed, if any.
    pub async fn force_release(
        &self,
        name: &LockName,
    ) -> Result<(LockSnapshot, Option<LockRecord>), ServiceError> {
        self.remove(name, |record, _| engine::decide_force_release(record))
            .await
    }

    async fn remove(
        &self,
        name: &LockName,
        decide: impl Fn(&LockRecord, UnixMillis) -> ReleaseDecision,
    ) -> Result<(LockSnapshot, Option<LockRecord>), ServiceError> {
        let deadline = self.deadline();
        for _ in 0..MAX_ROUNDS {
            let current = self.store.read(name, deadline).await?;
            let record = record_of(&current);
            let now = UnixMillis::now();
            let stored = match (decide(&record, now), &current) {
                (ReleaseDecision::NotOwner, _) => {
                    return Err(refused(Refusal::NotOwner, name, &record, now))
                }
                (ReleaseDecision::AlreadyFree, _) | (ReleaseDecision::Delete, None) => {
                    return Ok((snapshot(name, &record, now), None));
                }
                (ReleaseDecision::Delete, Some(stored)) => stored,
            };
            match self.store.delete(name, stored.version, deadline).await {
                Ok(WriteOutcome::Written { .. }) => {
                    return Ok((snapshot(name, &LockRecord::default(), now), Some(record)));
                }
                // Deciding again on a fresh read settles both a lost race and a lost answer.
                Ok(_) | Err(StoreError::OutcomeUnknown(_)) => continue,
                Err(error) => return Err(error.into()),
            }
        }
        Err(ServiceError::StoreUnavailable(
            "the lock changed too often to decide".into(),
        ))
    }

    pub async fn get(&self, name: &LockName) -> Result<LockSnapshot, ServiceError> {
        let current = self.store.read(name, self.deadline()).await?;
        Ok(snapshot(name, &record_of(&current), UnixMillis::now()))
    }

    pub async fn validate(
        &self,
        name: &LockName,
        token: FencingToken,
    ) -> Result<bool, ServiceError> {
        let current = self.store.read(name, self.deadline()).await?;
        Ok(engine::is_current(
            &record_of(&current),
            token,
            UnixMillis::now(),
        ))
    }

    /// Held or expired locks, in name order; the bool says whether more may follow.
    pub async fn list(&self, query: &ListQuery) -> Result<(Vec<LockSnapshot>, bool), ServiceError> {
        let page = self.store.list(query, self.deadline()).await?;
        let now = UnixMillis::now();
        let locks = page
            .locks
            .iter()
            .map(|(name, record)| snapshot(name, record, now))
            .collect();
        Ok((locks, page.more))
    }

    pub async fn ready(&self) -> Result<(), ServiceError> {
        Ok(self.store.ready(self.deadline()).await?)
    }
}
