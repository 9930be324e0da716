//! Reading a lock's record: alone, or with its queue in one request, a read-only `multi`
//! (ZooKeeper 3.6 and later); either after a `sync`, sent with it, when the caller must not
//! see a lagging follower's copy (`read_after`). A waiter decides each round on both, and
//! in a standalone server every request passes one ordered pipeline, so one request instead
//! of two is one place less in that line for the hand-off `multi` behind it. The two reads
//! also show one state of the store, which two separate reads do not promise.
//!
//! **A read whose connection fails under it** (lost or reset, its session gone) is sent
//! once more while its deadline allows (`read_again_if_cut`, used here, in `queue.rs` and
//! by the listing's walk): a read changes nothing, and the second try goes out on whichever
//! session serves by then (the stand-in, the primary resumed, a new one), so a cut
//! connection does not cost the caller a `503` while another session can answer.
//!
//! A lock's znode is read as a record whose bearer secrets are sealed and whose token is
//! filled in from the znode's `mzxid` (`stored`).
//!
//! Keeps I3 (`read_after`) and I8 (`read_again_if_cut`); see DESIGN.md, "Invariants".

use std::future::Future;
use tokio::time::Instant;

use tracing::warn;
use zookeeper_client as zk;

use super::contradiction::Basis;
use super::queue::queue_of;
use super::{NoAnswer, ZkStore};
use crate::metrics::zookeeper::ZkOp;
use crate::model::LockName;
use crate::record::LockRecord;
use crate::seal::Sealer;
use crate::store::{StoreError, Stored, Version};
use crate::waiter::Waiter;

/// A failed read, and whether its connection failed under it.
pub(super) struct ReadFailure {
    error: StoreError,
    cut: bool,
}

/// Whether a request failed because its connection did, so that another session may serve
/// it at once. zookeeper-client reports a reset connection as `Custom` (an I/O error).
fn cut_under(failure: &Result<zk::Error, NoAnswer>) -> bool {
    matches!(
        failure,
        Ok(zk::Error::ConnectionLoss
            | zk::Error::Custom(_)
            | zk::Error::ClientClosed
            | zk::Error::SessionExpired
            | zk::Error::SessionMoved)
    )
}

impl ZkStore {
    pub(super) fn read_failure(&self, failure: Result<zk::Error, NoAnswer>) -> ReadFailure {
        ReadFailure {
            cut: cut_under(&failure),
            error: self.read_failed(failure),
        }
    }

    /// Runs `read`, and once more if its connection failed under it (see the module doc).
    pub(super) async fn read_again_if_cut<T, Fut>(
        &self,
        deadline: Instant,
        read: impl Fn() -> Fut,
    ) -> Result<T, StoreError>
    where
        Fut: Future<Output = Result<T, ReadFailure>>,
    {
        match read().await {
            Err(failure) if failure.cut && Instant::now() < deadline => {
                read().await.map_err(|f| f.error)
            }
            other => other.map_err(|f| f.error),
        }
    }

    /// Runs a read; `None` when the node does not exist.
    pub(super) async fn read_node<T>(
        &self,
        op: ZkOp,
        deadline: Instant,
        call: impl Future<Output = Result<T, zk::Error>>,
    ) -> Result<Option<T>, StoreError> {
        self.read_node_once(op, deadline, call)
            .await
            .map_err(|f| f.error)
    }

    pub(super) async fn read_node_once<T>(
        &self,
        op: ZkOp,
        deadline: Instant,
        call: impl Future<Output = Result<T, zk::Error>>,
    ) -> Result<Option<T>, ReadFailure> {
        match self.within(op, deadline, call).await {
            Ok(Ok(found)) => Ok(Some(found)),
            Ok(Err(zk::Error::NoNode)) => Ok(None),
            Ok(Err(e)) => Err(self.read_failure(Ok(e))),
            Err(e) => Err(self.read_failure(Err(e))),
        }
    }

    /// Runs a read that was sent right after `synced` (if any). A session's requests are
    /// processed in order, and a follower holds a session's read behind its pending `sync`
    /// until the leader has answered that sync: the read is answered only after the sync, as
    /// if it had been sent once the sync was answered, one round trip sooner. A failed sync
    /// fails the read at once (the read is not awaited: it may still be queued in the
    /// client, to go out on the next connection), so that the caller can try again on
    /// another session (`read_again_if_cut`).
    async fn read_after<T>(
        &self,
        synced: Option<impl Future<Output = Result<(), zk::Error>>>,
        op: ZkOp,
        deadline: Instant,
        read: impl Future<Output = Result<T, zk::Error>>,
    ) -> Result<Option<T>, ReadFailure> {
        if let Some(synced) = synced {
            match self.within(ZkOp::Sync, deadline, synced).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(self.read_failure(Ok(e))),
                Err(e) => return Err(self.read_failure(Err(e))),
            }
        }
        self.read_node_once(op, deadline, read).await
    }

    /// The record alone; with `sync`, only after the server has applied every write
    /// committed before the call.
    pub(super) async fn read_record(
        &self,
        name: &LockName,
        deadline: Instant,
        sync: bool,
    ) -> Result<Option<Stored>, StoreError> {
        let read = || self.read_record_once(name, deadline, sync);
        self.read_again_if_cut(deadline, read).await
    }

    async fn read_record_once(
        &self,
        name: &LockName,
        deadline: Instant,
        sync: bool,
    ) -> Result<Option<Stored>, ReadFailure> {
        let client = self
            .client(deadline)
            .await
            .map_err(|e| self.read_failure(Err(e)))?;
        let sent = self.contradictions.now();
        // Sent in this order: the sync, then the read (see `read_after`).
        let synced = sync.then(|| client.sync("/"));
        let read = client.get_data(&self.path(name));
        let found = self
            .read_after(synced, ZkOp::GetData, deadline, read)
            .await?;
        let session = client.session_id().0;
        let found = found.map(|(data, stat)| stored(&self.sealer, name, &data, &stat, session));
        self.record_read(name, session, Basis::of(found.as_ref()), sent);
        Ok(found)
    }

    /// The record and the queue as one state; with `sync`, after a `sync` on the same
    /// session.
    pub(super) async fn read_record_and_queue(
        &self,
        name: &LockName,
        deadline: Instant,
        sync: bool,
    ) -> Result<(Option<Stored>, Vec<Waiter>), StoreError> {
        let read = || self.read_record_and_queue_once(name, deadline, sync);
        self.read_again_if_cut(deadline, read).await
    }

    async fn read_record_and_queue_once(
        &self,
        name: &LockName,
        deadline: Instant,
        sync: bool,
    ) -> Result<(Option<Stored>, Vec<Waiter>), ReadFailure> {
        let client = self
            .client(deadline)
            .await
            .map_err(|e| self.read_failure(Err(e)))?;
        let sent = self.contradictions.now();
        let mut reader = client.new_multi_reader();
        reader
            .add_get_data(&self.path(name))
            .and_then(|()| reader.add_get_children(&self.queue_dir(name)))
            .map_err(|e| self.read_failure(Ok(e)))?;
        // Sent in this order: the sync, then the read (see `read_after`).
        let synced = sync.then(|| client.sync("/"));
        let read = reader.commit();
        // Each read's absence is in its own result, so the request as a whole never
        // answers `NoNode`; were it to, the empty answer is out of shape below.
        let results = self
            .read_after(synced, ZkOp::MultiRead, deadline, read)
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
    fn unexpected_answer(&self, answer: Option<zk::MultiReadResult>) -> ReadFailure {
        let error = match answer {
            Some(zk::MultiReadResult::Error { err }) => err,
            _ => zk::Error::UnexpectedError("a read-only multi answered out of shape".into()),
        };
        self.read_failure(Ok(error))
    }
}

pub(super) fn stored(
    sealer: &Sealer,
    name: &LockName,
    data: &[u8],
    stat: &zk::Stat,
    session: i64,
) -> Stored {
    let mut record = LockRecord::decode_sealing(data, sealer).unwrap_or_else(|error| {
        warn!(lock = %name, %error, "lock znode does not hold a ZNRecord; reading it as free");
        LockRecord::default()
    });
    record.resolve_token(stat.mzxid);
    Stored {
        record,
        version: Version {
            number: stat.version,
            empty: data.is_empty(),
            has_children: stat.num_children > 0,
            session,
            mzxid: stat.mzxid,
        },
    }
}
