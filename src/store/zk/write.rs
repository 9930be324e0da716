//! Conditional writes of lock records: each goes out on the session of the read it was
//! planned on (`client_for`), never with the "any version" -1, and leaves a live record at
//! an even version (see `Ops::set_record`); the collector's fence leaves an odd one.
//!
//! Keeps I1 (`client_for`) and I13 (even versions for live records); see DESIGN.md, "Invariants".

use tokio::time::Instant;

use zookeeper_client as zk;

use super::batch::Committed;
use super::contradiction::Basis;
use super::ops::{written, Ops};
use super::ZkStore;
use crate::metrics::zookeeper::ZkOp;
use crate::model::LockName;
use crate::record::LockRecord;
use crate::store::{StoreError, Version, WriteOutcome};

impl ZkStore {
    /// The client a write planned on `version` must go out on: the session the record was
    /// read on. `None` when that session has ended (the write is then a conflict, and the
    /// caller reads again on the new session). Part of I1: a write dies with its read's session.
    pub(super) async fn client_for(
        &self,
        version: Version,
        deadline: Instant,
    ) -> Result<Option<zk::Client>, StoreError> {
        let client = self
            .client(deadline)
            .await
            .map_err(|e| self.write_failed(Err(e)))?;
        let same = version.session == 0 || client.session_id().0 == version.session;
        // ZooKeeper reads an expected version of -1 as "any version": never send one.
        Ok((same && version.number != -1).then_some(client))
    }

    /// Sends a record write's operations, perhaps in a `multi` shared with other writes
    /// (`batch.rs`), and waits for its own answer until `deadline`. `None`: nothing was sent,
    /// because the session the write was planned on no longer serves (a conflict, like
    /// `client_for` finding another session).
    pub(super) async fn commit_ops(
        &self,
        client: &zk::Client,
        ops: Ops,
        deadline: Instant,
    ) -> Result<Option<Committed>, StoreError> {
        match self
            .within(ZkOp::Multi, deadline, self.batch.commit(client, ops))
            .await
        {
            Err(no_answer) => Err(self.write_failed(Err(no_answer))),
            Ok(Err(unstaged)) => Err(StoreError::Unavailable(unstaged.to_string())),
            Ok(Ok(answer)) => Ok(answer),
        }
    }

    /// Commits a write of `name`'s record planned on `version`, and maps its answer.
    pub(super) async fn commit_record_write(
        &self,
        client: &zk::Client,
        ops: Ops,
        (name, version): (&LockName, Version),
        deadline: Instant,
    ) -> Result<WriteOutcome, StoreError> {
        let Some(answer) = self.commit_ops(client, ops, deadline).await? else {
            return Ok(WriteOutcome::Conflict);
        };
        match answer {
            Ok(results) => written(&results, client.session_id().0),
            Err(zk::MultiWriteError::OperationFailed {
                source: zk::Error::BadVersion | zk::Error::NoNode,
                ..
            }) => {
                let basis = Basis::At(version.mzxid);
                self.write_refused(name, client.session_id().0, basis);
                Ok(WriteOutcome::Conflict)
            }
            Err(zk::MultiWriteError::OperationFailed { source, .. })
            | Err(zk::MultiWriteError::RequestFailed { source }) => {
                Err(self.write_failed(Ok(source)))
            }
        }
    }

    pub(super) async fn write_record(
        &self,
        name: &LockName,
        record: &LockRecord,
        version: Version,
        deadline: Instant,
    ) -> Result<WriteOutcome, StoreError> {
        if version.empty {
            if version.has_children {
                return Ok(WriteOutcome::NestedLocks);
            }
            return self
                .replace_empty_node(name, record, version, deadline)
                .await;
        }
        let Some(client) = self.client_for(version, deadline).await? else {
            return Ok(WriteOutcome::Conflict);
        };
        let mut ops = Ops::default();
        ops.set_record(self.path(name), record.encode(), version.number);
        self.commit_record_write(&client, ops, (name, version), deadline)
            .await
    }

    pub(super) async fn fence_record(
        &self,
        name: &LockName,
        version: Version,
        deadline: Instant,
    ) -> Result<WriteOutcome, StoreError> {
        if version.empty {
            return Ok(WriteOutcome::Conflict);
        }
        let Some(client) = self.client_for(version, deadline).await? else {
            return Ok(WriteOutcome::Conflict);
        };
        let session = client.session_id().0;
        if version.number.rem_euclid(2) == 1 {
            // Already at an odd version: fenced (or written by a non-lockwarden client).
            return Ok(WriteOutcome::Written {
                zxid: version.mzxid,
                version: Version::written(version.number, session),
            });
        }
        let free = LockRecord::default().encode();
        let call = client.set_data(&self.path(name), &free, Some(version.number));
        match self.within(ZkOp::SetData, deadline, call).await {
            Ok(Ok(stat)) => Ok(WriteOutcome::Written {
                zxid: stat.mzxid,
                version: Version::written(stat.version, session),
            }),
            Ok(Err(zk::Error::BadVersion | zk::Error::NoNode)) => {
                self.write_refused(name, session, Basis::At(version.mzxid));
                Ok(WriteOutcome::Conflict)
            }
            Ok(Err(e)) => Err(self.write_failed(Ok(e))),
            Err(e) => Err(self.write_failed(Err(e))),
        }
    }

    pub(super) async fn delete_record(
        &self,
        name: &LockName,
        version: Version,
        deadline: Instant,
    ) -> Result<WriteOutcome, StoreError> {
        let path = self.path(name);
        let Some(client) = self.client_for(version, deadline).await? else {
            return Ok(WriteOutcome::Conflict);
        };
        let session = client.session_id().0;
        let delete = client.delete(&path, Some(version.number));
        match self.within(ZkOp::Delete, deadline, delete).await {
            Ok(Ok(())) => Ok(WriteOutcome::Written {
                zxid: 0,
                version: Version::written(-1, session),
            }),
            Ok(Err(zk::Error::BadVersion | zk::Error::NoNode)) => {
                self.write_refused(name, session, Basis::At(version.mzxid));
                Ok(WriteOutcome::Conflict)
            }
            // Locks are nested under this one: it stays as their parent for now.
            Ok(Err(zk::Error::NotEmpty)) => Ok(WriteOutcome::NestedLocks),
            Ok(Err(e)) => Err(self.write_failed(Ok(e))),
            Err(e) => Err(self.write_failed(Err(e))),
        }
    }
}
