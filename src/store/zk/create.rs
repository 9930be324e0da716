//! Creating lock records in ZooKeeper: the parents of nested names (containers), the
//! create transaction that never leaves a record at version 0, and replacing an empty node.

use std::time::Instant;

use zookeeper_client as zk;

use super::{NoAnswer, ZkStore};
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
        let mut writer = client.new_multi_writer();
        let data = record.encode();
        let staged = writer
            .add_delete(&path, Some(version.number))
            .and_then(|_| stage_create(&mut writer, &path, &data, self.access.acls()));
        if let Err(e) = staged {
            return Err(StoreError::Unavailable(e.to_string()));
        }
        match self.within(ZkOp::Multi, deadline, writer.commit()).await {
            Err(_) => Err(self.write_failed(Err(NoAnswer::TimedOut))),
            Ok(Err(zk::MultiWriteError::OperationFailed { source, .. })) => match source {
                zk::Error::BadVersion | zk::Error::NoNode | zk::Error::NodeExists => {
                    Ok(WriteOutcome::Conflict)
                }
                zk::Error::NotEmpty => Ok(WriteOutcome::NestedLocks),
                other => Err(self.write_failed(Ok(other))),
            },
            Ok(Err(zk::MultiWriteError::RequestFailed { source })) => {
                Err(self.write_failed(Ok(source)))
            }
            Ok(Ok(results)) => written(&results, client.session_id().0),
        }
    }
}

/// Stages the creation of a record. The record is created empty and written in the same
/// transaction, so a record never sits at version 0: version 0 only ever names an empty
/// (container) node, and a write conditioned on it can never land on a record created in its
/// place. The write also yields a valid Stat, which a create inside a multi does not on
/// ZooKeeper 3.8.0 (ZOOKEEPER-4026).
pub(crate) fn stage_create(
    writer: &mut zk::MultiWriter<'_>,
    path: &str,
    data: &[u8],
    acls: zk::Acls<'_>,
) -> Result<(), zk::Error> {
    let options = zk::CreateMode::Persistent.with_acls(acls);
    writer.add_create(path, b"", &options)?;
    stage_set(writer, path, data, 0)
}

/// Stages a record write at version `number` that leaves the record at an **even** version:
/// one setData from an odd version, two (the first writes nothing) from an even one, all in
/// one transaction. Live records therefore never sit at an odd version; odd versions belong
/// to fenced free records (see `service::gc`), so a write planned on a fenced record can
/// only ever land on a fenced record, never on a live one created in its place.
pub(crate) fn stage_set(
    writer: &mut zk::MultiWriter<'_>,
    path: &str,
    data: &[u8],
    number: i32,
) -> Result<(), zk::Error> {
    if number.rem_euclid(2) == 0 {
        writer.add_set_data(path, b"", Some(number))?;
        writer.add_set_data(path, data, Some(number + 1))
    } else {
        writer.add_set_data(path, data, Some(number))
    }
}

/// The zxid and version a committed record write left, from its last setData result.
pub(crate) fn written(
    results: &[zk::MultiWriteResult],
    session: i64,
) -> Result<WriteOutcome, StoreError> {
    results
        .iter()
        .rev()
        .find_map(|r| match r {
            zk::MultiWriteResult::SetData { stat } => Some(WriteOutcome::Written {
                zxid: stat.mzxid,
                version: stat.version,
                session,
            }),
            _ => None,
        })
        .ok_or_else(|| StoreError::OutcomeUnknown("a record write returned no stat".into()))
}
