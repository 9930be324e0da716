//! Idempotent retries, keyed by (lock, request_id): the outcome of a finished call is
//! remembered (bounded in size and age), and a retry that arrives while the first call is
//! still waiting joins that call and gets the same outcome. The lock record and the queue
//! entry also carry the request id, which covers retries that reach another instance.
//!
//! A finished call's grant is answered to its retry only while it holds (`still_granted`).
//!
//! Keeps I9 (DESIGN.md, "Invariants") on one instance.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

use tokio::sync::watch;

use super::{
    refused, snapshot, token_of, AcquireOutcome, Granted, LockService, Refusal, ServiceError,
};
use crate::engine;
use crate::model::{LockName, RequestId};

const CAPACITY: usize = 10_000;
const MAX_AGE: Duration = Duration::from_secs(600);

type Key = (LockName, RequestId);
pub type OutcomeSender = Arc<watch::Sender<Option<AcquireOutcome>>>;
pub type OutcomeReceiver = watch::Receiver<Option<AcquireOutcome>>;

#[derive(Default)]
pub struct ReplyCache {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    done: HashMap<Key, Done>,
    order: VecDeque<(Key, Instant)>,
    running: HashMap<Key, (String, OutcomeSender)>,
}

struct Done {
    digest: String,
    outcome: AcquireOutcome,
    stored_at: Instant,
}

/// How a call with a request id proceeds.
pub enum Flight {
    /// The id finished before: this is its outcome.
    Finished(Box<AcquireOutcome>),
    /// A call with this id is running: wait for its outcome.
    Joined(OutcomeReceiver),
    /// This call runs it; whoever joins listens on the sender.
    Lead(OutcomeSender, OutcomeReceiver),
}

impl ReplyCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn begin(
        &self,
        name: &LockName,
        id: &RequestId,
        digest: &str,
    ) -> Result<Flight, ServiceError> {
        let key = (name.clone(), id.clone());
        let mut inner = self.lock();
        if let Some(done) = inner
            .done
            .get(&key)
            .filter(|d| d.stored_at.elapsed() <= MAX_AGE)
        {
            if done.digest != digest {
                return Err(ServiceError::RequestIdReused);
            }
            return Ok(Flight::Finished(Box::new(done.outcome.clone())));
        }
        if let Some((running_digest, sender)) = inner.running.get(&key) {
            if running_digest != digest {
                return Err(ServiceError::RequestIdReused);
            }
            return Ok(Flight::Joined(sender.subscribe()));
        }
        let (sender, receiver) = watch::channel(None);
        let sender = Arc::new(sender);
        inner
            .running
            .insert(key, (digest.to_owned(), sender.clone()));
        Ok(Flight::Lead(sender, receiver))
    }

    /// Ends a running call; its outcome is remembered unless it is `None` (undone) or a 503,
    /// which a retry should try again.
    pub fn finish(
        &self,
        name: &LockName,
        id: &RequestId,
        digest: &str,
        outcome: Option<&AcquireOutcome>,
    ) {
        let key = (name.clone(), id.clone());
        let mut inner = self.lock();
        inner.running.remove(&key);
        let Some(outcome) =
            outcome.filter(|o| !matches!(o, Err(ServiceError::StoreUnavailable(_))))
        else {
            return;
        };
        while inner.order.len() >= CAPACITY
            || inner
                .order
                .front()
                .is_some_and(|(_, at)| at.elapsed() > MAX_AGE)
        {
            let Some((old, at)) = inner.order.pop_front() else {
                break;
            };
            if inner.done.get(&old).is_some_and(|d| d.stored_at == at) {
                inner.done.remove(&old);
            }
        }
        let now = Instant::now();
        inner.order.push_back((key.clone(), now));
        inner.done.insert(
            key,
            Done {
                digest: digest.to_owned(),
                outcome: outcome.clone(),
                stored_at: now,
            },
        );
    }
}

impl LockService {
    /// A finished call's outcome for its retry: a grant only while its lease still holds the
    /// lock (read afresh, with `sync`, with the queue in the same request), so a retry never
    /// reports a lease that has ended.
    pub(super) async fn still_granted(
        &self,
        name: &LockName,
        outcome: AcquireOutcome,
    ) -> AcquireOutcome {
        let Ok(granted) = outcome else {
            return outcome;
        };
        let deadline = self.deadline();
        let now = self.wall.now();
        // The record and the queue as one state, after a `sync` (one request).
        let super::Read { record, queue, .. } = self.read_latest(name, deadline).await?;
        let live = engine::holder_with_lease(&record, &granted.lease_id)
            .is_some_and(|h| !h.expires.has_passed(now));
        if !live {
            return Err(refused(
                Refusal::LeaseEnded,
                name,
                &record,
                &queue,
                self.clock(now),
            ));
        }
        Ok(Granted {
            fencing_token: token_of(&record, &granted.lease_id),
            lock: snapshot(name, &record, &queue, self.clock(now)),
            fresh: false,
            ..granted
        })
    }
}
