//! Creating lock records in ZooKeeper: the parents of nested names (containers), the
//! create transaction that never leaves a record at version 0, and replacing an empty node.

use tokio::time::Instant;

use zookeeper_client as zk;

use super::contradiction::Basis;
use super::ops::{written, Ops};
use super::ZkStore;
use crate::metrics::zookeeper::ZkOp;
use crate::model::LockName;
use crate::record::LockRecord;
use crate::store::{StoreError, Version, WriteOutcome};

impl ZkStore {
    /// Creates the lock root (persistent) and the intermediate nodes of `name` (containers).
    pub(super) async fn create_parents(
        &self,
        name: &LockName,
        deadline: Instant,
    ) -> Result<(), StoreError> {
        let client = self
            .client(deadline)
            .await
            .map_err(|e| self.read_failed(Err(e)))?;
        let mut path = String::new();
        let root_parts = self.lock_root.split('/').filter(|p| !p.is_empty()).count();
        let parts: Vec<&str> = self
            .lock_root
            .split('/')
            .filter(|p| !p.is_empty())
            .chain(name.parts())
            .collect();
        for (depth, part) in parts[..parts.len() - 1].iter().enumerate() {
            path.push('/');
            path.push_str(part);
            let mode = if depth < root_parts {
                zk::CreateMode::Persistent
            } else {
                zk::CreateMode::Container
            };
            let options = mode.with_acls(self.access.acls());
            let create = client.create(&path, b"", &options);
            match self.within(ZkOp::Create, deadline, create).await {
                Ok(Ok(_)) | Ok(Err(zk::Error::NodeExists)) => {}
                Ok(Err(e)) => return Err(self.write_failed(Ok(e))),
                Err(e) => return Err(self.write_failed(Err(e))),
            }
        }
        Ok(())
    }

    /// Creates a record that is absent; `Conflict` when it exists.
    pub(super) async fn create_record(
        &self,
        name: &LockName,
        record: &LockRecord,
        deadline: Instant,
    ) -> Result<WriteOutcome, StoreError> {
        let path = self.path(name);
        let data = record.encode();
        // The parents may vanish between creating them and the create (an emptied container
        // is reaped), so a few rounds are allowed.
        for _ in 0..4 {
            let client = self
                .client(deadline)
                .await
                .map_err(|e| self.write_failed(Err(e)))?;
            let mut ops = Ops::default();
            ops.create_record(path.clone(), data.clone());
            let Some(answer) = self.commit_ops(&client, ops, deadline).await? else {
                // Planned on no particular version: it may go again on the serving session.
                continue;
            };
            match answer {
                Ok(results) => return written(&results, client.session_id().0),
                Err(zk::MultiWriteError::OperationFailed {
                    source: zk::Error::NodeExists,
                    ..
                }) => return Ok(WriteOutcome::Conflict),
                Err(zk::MultiWriteError::OperationFailed {
                    source: zk::Error::NoNode,
                    ..
                }) => self.create_parents(name, deadline).await?,
                Err(zk::MultiWriteError::OperationFailed { source, .. })
                | Err(zk::MultiWriteError::RequestFailed { source }) => {
                    return Err(self.write_failed(Ok(source)))
                }
            }
        }
        Ok(WriteOutcome::Conflict)
    }

    /// A record is never written into an empty znode: it may be a container, which the server
    /// would reap, and ZooKeeper does not tell a client which nodes are containers. A childless
    /// empty node is swapped for a persistent one in one transaction instead.
    pub(super) async fn replace_empty_node(
        &self,
        name: &LockName,
        record: &LockRecord,
        version: Version,
        deadline: Instant,
    ) -> Result<WriteOutcome, StoreError> {
        let path = self.path(name);
        let Some(client) = self.client_for(version, deadline).await? else {
            return Ok(WriteOutcome::Conflict);
        };
        let mut ops = Ops::default();
        ops.delete(path.clone(), Some(version.number));
        ops.create_record(path, record.encode());
        let Some(answer) = self.commit_ops(&client, ops, deadline).await? else {
            return Ok(WriteOutcome::Conflict);
        };
        match answer {
            Err(zk::MultiWriteError::OperationFailed { source, .. }) => match source {
                zk::Error::BadVersion | zk::Error::NoNode | zk::Error::NodeExists => {
                    let basis = Basis::At(version.mzxid);
                    self.write_refused(name, client.session_id().0, basis);
                    Ok(WriteOutcome::Conflict)
                }
                zk::Error::NotEmpty => Ok(WriteOutcome::NestedLocks),
                other => Err(self.write_failed(Ok(other))),
            },
            Err(zk::MultiWriteError::RequestFailed { source }) => {
                Err(self.write_failed(Ok(source)))
            }
            Ok(results) => written(&results, client.session_id().0),
        }
    }
}
