//! Remembered acquire outcomes, keyed by (lock, request_id), so a retried call gets the
//! answer the first call got. Bounded in size and age; the lock record itself also carries
//! the request id of its grant, which covers retries that reach another instance.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{AcquireOutcome, ServiceError};
use crate::model::{LockName, RequestId};

const CAPACITY: usize = 10_000;
const MAX_AGE: Duration = Duration::from_secs(600);

type Key = (LockName, RequestId);

#[derive(Default)]
pub struct ReplyCache {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<Key, Entry>,
    order: VecDeque<(Key, Instant)>,
}

struct Entry {
    digest: String,
    outcome: AcquireOutcome,
    stored_at: Instant,
}

impl ReplyCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The remembered outcome of this request id; an error if it came with another body.
    pub fn get(&self, name: &LockName, id: &RequestId, digest: &str) -> Option<AcquireOutcome> {
        let inner = self.lock();
        let entry = inner.entries.get(&(name.clone(), id.clone()))?;
        if entry.stored_at.elapsed() > MAX_AGE {
            return None;
        }
        if entry.digest != digest {
            return Some(Err(ServiceError::RequestIdReused));
        }
        Some(entry.outcome.clone())
    }

    pub fn put(&self, name: &LockName, id: &RequestId, digest: &str, outcome: &AcquireOutcome) {
        let mut inner = self.lock();
        let now = Instant::now();
        while inner.order.len() >= CAPACITY
            || inner
                .order
                .front()
                .is_some_and(|(_, at)| at.elapsed() > MAX_AGE)
        {
            let Some((old, at)) = inner.order.pop_front() else {
                break;
            };
            if inner.entries.get(&old).is_some_and(|e| e.stored_at == at) {
                inner.entries.remove(&old);
            }
        }
        let key = (name.clone(), id.clone());
        inner.order.push_back((key.clone(), now));
        let entry = Entry {
            digest: digest.to_owned(),
            outcome: outcome.clone(),
            stored_at: now,
        };
        inner.entries.insert(key, entry);
    }

    pub fn forget(&self, name: &LockName, id: &RequestId) {
        self.lock().entries.remove(&(name.clone(), id.clone()));
    }
}
