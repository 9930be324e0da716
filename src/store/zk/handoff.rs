//! A hand-off in ZooKeeper: one `multi` that writes the record at the version read and
//! deletes the handed waiter's node, so the lock never goes to a waiter that has left. When
//! it goes out on the primary session it also carries the queue entries of callers joining
//! with it (the group commit, DESIGN.md, "Group commit"), whose creates come first.
//!
//! Keeps (DESIGN.md, "Invariants") I1 (the record written at the version read, on its read's
//! session), I7 (the waiter the engine chose, removed in the same write) and I11 (no hand-off
//! to a waiter whose node has gone).

use tokio::time::Instant;

use zookeeper_client as zk;

use super::contradiction::Basis;
use super::ops::{written, Ops};
use super::ZkStore;
use crate::model::LockName;
use crate::record::LockRecord;
use crate::store::{HandOff, Joined, StoreError, Version, WriteOutcome};
use crate::waiter::{Ticket, Waiter};

impl ZkStore {
    pub(super) async fn hand_off_to(
        &self,
        name: &LockName,
        record: &LockRecord,
        version: Option<Version>,
        waiter: &Waiter,
        joining: &[Ticket],
        deadline: Instant,
    ) -> Result<HandOff, StoreError> {
        if version.is_some_and(|v| v.empty && v.has_children) {
            return Ok(HandOff::alone(WriteOutcome::NestedLocks));
        }
        let path = self.path(name);
        let data = record.encode();
        let dir = self.queue_dir(name);
        for _ in 0..4 {
            let client = match version {
                Some(v) => match self.client_for(v, deadline).await? {
                    Some(client) => client,
                    None => return Ok(HandOff::alone(WriteOutcome::Conflict)),
                },
                None => self
                    .client(deadline)
                    .await
                    .map_err(|e| self.write_failed(Err(e)))?,
            };
            // A waiter's node lives and dies with the primary session (see `session.rs`):
            // joining callers ride along only when this write goes out on it.
            let carried = if self.session.is_primary(&client) {
                joining
            } else {
                &[]
            };
            let mut ops = Ops::default();
            // The joining callers' creates come first, so that a failing operation's index
            // says whether it was theirs.
            for ticket in carried {
                let prefix = Waiter::id_prefix(ticket.priority, &ticket.key);
                let mode = zk::CreateMode::EphemeralSequential;
                ops.create(format!("{dir}/{prefix}"), ticket.encode(), mode);
            }
            match version {
                Some(v) if !v.empty => ops.set_record(path.clone(), data.clone(), v.number),
                Some(v) => {
                    ops.delete(path.clone(), Some(v.number));
                    ops.create_record(path.clone(), data.clone());
                }
                None => ops.create_record(path.clone(), data.clone()),
            }
            // The record's operations end before the handed waiter's delete.
            let record_ops = carried.len()..ops.len();
            ops.delete(self.waiter_path(name, waiter), None);
            let Some(answer) = self.commit_ops(&client, ops, deadline).await? else {
                return Ok(HandOff::alone(WriteOutcome::Conflict));
            };
            let failure = match answer {
                Ok(results) => {
                    let outcome = written(&results, client.session_id().0)?;
                    return Ok(HandOff {
                        outcome,
                        joined: joined(&results, carried.len()),
                    });
                }
                Err(zk::MultiWriteError::OperationFailed { index, source }) => (index, source),
                Err(zk::MultiWriteError::RequestFailed { source }) => {
                    return Err(self.write_failed(Ok(source)))
                }
            };
            match failure {
                // A joining caller's create failed (its queue container is gone, so the
                // handed waiter is too): decided again, and they join on their own.
                (index, _) if index < carried.len() => {
                    return Ok(HandOff::alone(WriteOutcome::Conflict))
                }
                // Creating the record failed because its parents are missing.
                (index, zk::Error::NoNode) if index == carried.len() && version.is_none() => {
                    self.create_parents(name, deadline).await?
                }
                (_, zk::Error::NotEmpty) => return Ok(HandOff::alone(WriteOutcome::NestedLocks)),
                (index, zk::Error::BadVersion | zk::Error::NoNode | zk::Error::NodeExists) => {
                    if let Some(v) = version.filter(|_| record_ops.contains(&index)) {
                        self.write_refused(name, client.session_id().0, Basis::At(v.mzxid));
                    }
                    return Ok(HandOff::alone(WriteOutcome::Conflict));
                }
                (_, other) => return Err(self.write_failed(Ok(other))),
            }
        }
        Ok(HandOff::alone(WriteOutcome::Conflict))
    }
}

/// The entries a hand-off made for its `carried` joining callers, from the results of its
/// operations (their creates come first): `NotCarried` when it carried none.
fn joined(results: &[zk::MultiWriteResult], carried: usize) -> Joined {
    if carried == 0 {
        return Joined::NotCarried;
    }
    let made: Option<Vec<Waiter>> = results.get(..carried).and_then(|creates| {
        creates
            .iter()
            .map(|result| match result {
                zk::MultiWriteResult::Create { path, .. } => {
                    Waiter::parse(path.rsplit('/').next()?)
                }
                _ => None,
            })
            .collect()
    });
    // Made, but not in a form this code knows: each caller looks for its entry.
    made.map_or(Joined::Unknown, Joined::Carried)
}
