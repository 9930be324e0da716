//! The embedded in-memory store: the default when no ZooKeeper is configured.
//!
//! It mimics a znode's version and a global, strictly increasing write id (zxid), so the
//! service runs the same conditional-write logic on it as on ZooKeeper. State is lost when
//! the process exits.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Mutex;
use std::time::Instant;

use async_trait::async_trait;

use super::{listed, ListPage, ListQuery, LockStore, StoreError, Stored, Version, WriteOutcome};
use crate::model::LockName;
use crate::record::LockRecord;

#[derive(Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    locks: BTreeMap<LockName, Entry>,
    last_zxid: i64,
}

struct Entry {
    record: LockRecord,
    version: i32,
    mzxid: i64,
}

impl Inner {
    fn next_zxid(&mut self) -> i64 {
        self.last_zxid += 1;
        self.last_zxid
    }

    /// True when a lock nested under `name` exists; as on ZooKeeper, `name` cannot then
    /// hold a record itself. Nested names sort right after their parent.
    fn has_nested(&self, name: &LockName) -> bool {
        let parent: Vec<&str> = name.parts().collect();
        self.locks
            .range((Bound::Excluded(name.clone()), Bound::Unbounded))
            .next()
            .is_some_and(|(next, _)| {
                next.parts().take(parent.len()).eq(parent.iter().copied())
                    && next.parts().count() > parent.len()
            })
    }
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave a half-written entry (every change is
        // a single insert or remove), so a poisoned lock is still consistent.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl LockStore for MemoryStore {
    async fn read(&self, name: &LockName, _: Instant) -> Result<Option<Stored>, StoreError> {
        let inner = self.lock();
        Ok(inner.locks.get(name).map(|entry| {
            let mut record = entry.record.clone();
            record.resolve_token(entry.mzxid);
            Stored {
                record,
                version: Version::plain(entry.version),
            }
        }))
    }

    async fn create(
        &self,
        name: &LockName,
        record: &LockRecord,
        _: Instant,
    ) -> Result<WriteOutcome, StoreError> {
        let mut inner = self.lock();
        if inner.locks.contains_key(name) {
            return Ok(WriteOutcome::Conflict);
        }
        if inner.has_nested(name) {
            return Ok(WriteOutcome::NestedLocks);
        }
        let zxid = inner.next_zxid();
        let entry = Entry {
            record: record.clone(),
            version: 0,
            mzxid: zxid,
        };
        inner.locks.insert(name.clone(), entry);
        Ok(WriteOutcome::Written { zxid })
    }

    async fn update(
        &self,
        name: &LockName,
        record: &LockRecord,
        version: Version,
        _: Instant,
    ) -> Result<WriteOutcome, StoreError> {
        let mut inner = self.lock();
        let zxid = inner.last_zxid + 1;
        match inner.locks.get_mut(name) {
            Some(entry) if entry.version == version.number => {
                entry.record = record.clone();
                entry.version += 1;
                entry.mzxid = zxid;
            }
            _ => return Ok(WriteOutcome::Conflict),
        }
        inner.last_zxid = zxid;
        Ok(WriteOutcome::Written { zxid })
    }

    async fn delete(
        &self,
        name: &LockName,
        version: Version,
        _: Instant,
    ) -> Result<WriteOutcome, StoreError> {
        let mut inner = self.lock();
        match inner.locks.get(name) {
            Some(entry) if entry.version == version.number => {
                inner.locks.remove(name);
                let zxid = inner.next_zxid();
                Ok(WriteOutcome::Written { zxid })
            }
            _ => Ok(WriteOutcome::Conflict),
        }
    }

    async fn list(&self, query: &ListQuery, _: Instant) -> Result<ListPage, StoreError> {
        let inner = self.lock();
        let mut page = ListPage::default();
        let start = query
            .after
            .clone()
            .map_or(Bound::Unbounded, Bound::Excluded);
        for (name, entry) in inner.locks.range((start, Bound::Unbounded)) {
            if !listed(query, name, &entry.record) {
                continue;
            }
            if page.locks.len() == query.limit {
                page.more = true;
                break;
            }
            let mut record = entry.record.clone();
            record.resolve_token(entry.mzxid);
            page.locks.push((name.clone(), record));
        }
        Ok(page)
    }

    async fn ready(&self, _: Instant) -> Result<(), StoreError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Expiry, Holder};

    fn name(s: &str) -> LockName {
        LockName::parse(s).unwrap()
    }

    fn held() -> LockRecord {
        LockRecord::held_by(Holder {
            owner: "o".into(),
            message: String::new(),
            expires: Expiry::Never,
            priority: 0,
            waiting_ms: None,
            cleanup_ms: 0,
            forceful: false,
            lease_id: None,
            lease_ms: None,
            acquired_at: None,
            fencing_token: None,
            notify_url: None,
            request_id: None,
            request_digest: None,
        })
    }

    #[tokio::test]
    async fn a_parent_name_cannot_be_created_while_nested_locks_exist() {
        let store = MemoryStore::new();
        let deadline = Instant::now() + std::time::Duration::from_secs(1);
        assert!(matches!(
            store.create(&name("a/b"), &held(), deadline).await,
            Ok(WriteOutcome::Written { .. })
        ));
        assert_eq!(
            store.create(&name("a"), &held(), deadline).await.unwrap(),
            WriteOutcome::NestedLocks
        );
        assert!(matches!(
            store.create(&name("a-b"), &held(), deadline).await,
            Ok(WriteOutcome::Written { .. })
        ));
        assert!(matches!(
            store.create(&name("a/b/c"), &held(), deadline).await,
            Ok(WriteOutcome::Written { .. })
        ));
    }
}
