//! What a read of a lock takes and finds ([`LockStore::fetch`]), and the shapes callers use
//! ([`Reads`]).

use async_trait::async_trait;
use tokio::time::Instant;

use super::{LockStore, StoreError, Stored};
use crate::model::LockName;
use crate::waiter::Waiter;

/// How fresh a read must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fresh {
    /// What the server asked has applied (on ZooKeeper, a follower may lag behind writes
    /// already acknowledged to others).
    Any,
    /// After every write acknowledged to anyone before the call (ZooKeeper: `sync` first, so
    /// a lagging follower catches up).
    Latest,
}

/// What a read takes of a lock ([`LockStore::fetch`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Take {
    Record,
    Queue,
    /// The record and the queue, as one state.
    Both,
}

/// What a read found, of what it took: the record (`None`: none, a free lock) and the
/// queue in service order (priority descending, then arrival).
#[derive(Clone, Debug, Default)]
pub struct Found {
    pub stored: Option<Stored>,
    pub queue: Vec<Waiter>,
}

/// The reads callers make, each one [`LockStore::fetch`].
#[async_trait]
pub trait Reads {
    /// The lock's record; `None` when no record exists (a free lock).
    async fn read(
        &self,
        name: &LockName,
        fresh: Fresh,
        deadline: Instant,
    ) -> Result<Option<Stored>, StoreError>;
    /// The lock's queue, in service order, as the server the session is on has it.
    async fn queue(&self, name: &LockName, deadline: Instant) -> Result<Vec<Waiter>, StoreError>;
    /// The record and the queue together, as one state of the store.
    async fn read_with_queue(
        &self,
        name: &LockName,
        fresh: Fresh,
        deadline: Instant,
    ) -> Result<(Option<Stored>, Vec<Waiter>), StoreError>;
}

#[async_trait]
impl<S: LockStore + ?Sized> Reads for S {
    async fn read(
        &self,
        name: &LockName,
        fresh: Fresh,
        deadline: Instant,
    ) -> Result<Option<Stored>, StoreError> {
        Ok(self
            .fetch(name, Take::Record, fresh, deadline)
            .await?
            .stored)
    }

    async fn queue(&self, name: &LockName, deadline: Instant) -> Result<Vec<Waiter>, StoreError> {
        Ok(self
            .fetch(name, Take::Queue, Fresh::Any, deadline)
            .await?
            .queue)
    }

    async fn read_with_queue(
        &self,
        name: &LockName,
        fresh: Fresh,
        deadline: Instant,
    ) -> Result<(Option<Stored>, Vec<Waiter>), StoreError> {
        let found = self.fetch(name, Take::Both, fresh, deadline).await?;
        Ok((found.stored, found.queue))
    }
}
