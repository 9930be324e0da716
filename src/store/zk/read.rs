//! Reading a lock's record: alone (after a `sync` when the caller must not see a lagging
//! follower's copy), or with its queue in one request, a read-only `multi` (ZooKeeper 3.6
//! and later). A waiter decides each round on both, and in a standalone server every
//! request passes one ordered pipeline, so one request instead of two is one place less
//! in that line for the hand-off `multi` behind it. The two reads also show one state of
//! the store, which two separate reads do not promise.

use std::time::Instant;

use zookeeper_client as zk;

use super::contradiction::Basis;
use super::queue::queue_of;
use super::{stored, ZkStore};
use crate::metrics::zookeeper::ZkOp;
use crate::model::LockName;
use crate::store::{StoreError, Stored};
use crate::waiter::Waiter;

impl ZkStore {
    /// The record alone; with `sync`, only after the server has applied every write
    /// committed before the call.
    pub(super) async fn read_record(
        &self,
        name: &LockName,
        deadline: Instant,
        sync: bool,
    ) -> Result<Option<Stored>, StoreError> {
        let client = self
            .client(deadline)
            .await
            .map_err(|e| self.read_failed(Err(e)))?;
        let sent = self.contradictions.now();
        if sync {
            // A follower answers reads from its own copy, which may lag the leader; `sync`
            // makes it catch up with everything the leader had committed when the sync
            // reached it.
            match self.within(ZkOp::Sync, deadline, client.sync("/")).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(self.read_failed(Ok(e))),
                Err(e) => return Err(self.read_failed(Err(e))),
            }
        }
        let found = self
            .read_node(ZkOp::GetData, deadline, client.get_data(&self.path(name)))
            .await?;
        let session = client.session_id().0;
        let found = found.map(|(data, stat)| stored(&self.sealer, name, &data, &stat, session));
        self.record_read(name, session, Basis::of(found.as_ref()), sent);
        Ok(found)
    }

    pub(super) async fn read_record_and_queue(
        &self,
        name: &LockName,
        deadline: Instant,
    ) -> Result<(Option<Stored>, Vec<Waiter>), StoreError> {
        let client = self
            .client(deadline)
            .await
            .map_err(|e| self.read_failed(Err(e)))?;
        let sent = self.contradictions.now();
        let mut reader = client.new_multi_reader();
        reader
            .add_get_data(&self.path(name))
            .and_then(|()| reader.add_get_children(&self.queue_dir(name)))
            .map_err(|e| self.read_failed(Ok(e)))?;
        // Each read's absence is in its own result, so the request as a whole never
        // answers `NoNode`; were it to, the empty answer is out of shape below.
        let results = self
            .read_node(ZkOp::MultiRead, deadline, reader.commit())
            .await?
            .unwrap_or_default();
        let session = client.session_id().0;
        let mut results = results.into_iter();
        let record = match results.next() {
            Some(zk::MultiReadResult::Data { data, stat }) => {
                Some(stored(&self.sealer, name, &data, &stat, session))
            }
            Some(zk::MultiReadResult::Error {
                err: zk::Error::NoNode,
            }) => None,
            other => return Err(self.unexpected_answer(other)),
        };
        let children = match results.next() {
            Some(zk::MultiReadResult::Children { children }) => children,
            Some(zk::MultiReadResult::Error {
                err: zk::Error::NoNode,
            }) => Vec::new(),
            other => return Err(self.unexpected_answer(other)),
        };
        self.record_read(name, session, Basis::of(record.as_ref()), sent);
        Ok((record, queue_of(&children)))
    }

    /// An answer to a read-only `multi` that is neither what was asked nor `NoNode`: the
    /// server's error for that read, or a malformed answer.
    fn unexpected_answer(&self, answer: Option<zk::MultiReadResult>) -> StoreError {
        let error = match answer {
            Some(zk::MultiReadResult::Error { err }) => err,
            _ => zk::Error::UnexpectedError("a read-only multi answered out of shape".into()),
        };
        self.read_failed(Ok(error))
    }
}
