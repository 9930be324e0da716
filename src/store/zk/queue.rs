//! Lock queues in ZooKeeper: one container per lock at `{state_root}/{name, '/' as '~'}`,
//! holding an ephemeral sequential node per waiter (so a waiter vanishes with its
//! instance's session), whose data is the waiter's ticket.
//!
//! A hand-off is one `multi`: write the record at the version read, and delete the
//! waiter's node, so the lock never goes to a waiter that has left.
//!
//! Keeps (DESIGN.md, "Invariants") I1, I7 and I11 (`hand_off_to`), I8 (bounded joins), I9 and I10
//! (`join_queue` finds a retry's or a lost create's node by key) and I12
//! (`remove_childless_queue_dirs`).

use tokio::time::Instant;

use zookeeper_client as zk;

use super::contradiction::Basis;
use super::ops::{written, Ops};
use super::{NoAnswer, ZkStore};
use crate::metrics::zookeeper::ZkOp;
use crate::model::LockName;
use crate::record::LockRecord;
use crate::store::{HandOff, Joined, StoreError, Version, Wake, WriteOutcome};
use crate::waiter::Watch;
use crate::waiter::{sort_queue, Ticket, Waiter};

impl ZkStore {
    pub(super) fn queue_dir(&self, name: &LockName) -> String {
        // '~' never occurs in a lock name, so this flattening is one-to-one.
        format!("{}/{}", self.state_root, name.as_str().replace('/', "~"))
    }

    fn waiter_path(&self, name: &LockName, waiter: &Waiter) -> String {
        format!("{}/{}", self.queue_dir(name), waiter.id)
    }

    pub(super) async fn read_queue(
        &self,
        name: &LockName,
        deadline: Instant,
    ) -> Result<Vec<Waiter>, StoreError> {
        let dir = self.queue_dir(name);
        let read = || async {
            let client = (self.client(deadline).await).map_err(|e| self.read_failure(Err(e)))?;
            let list = client.list_children(&dir);
            let children = self
                .read_node_once(ZkOp::GetChildren, deadline, list)
                .await?;
            Ok(queue_of(&children.unwrap_or_default()))
        };
        self.read_again_if_cut(deadline, read).await
    }

    /// Makes a lock's queue container: at once, and only if the state root is missing too
    /// (refused with `NoNode`) that root first. Every request costs a round trip, and on a
    /// slow server (a lagging follower) making the root's components every time would take
    /// most of a store timeout.
    async fn create_queue_dir(&self, dir: &str, deadline: Instant) -> Result<(), StoreError> {
        let client = self
            .client(deadline)
            .await
            .map_err(|e| self.write_failed(Err(e)))?;
        let container = zk::CreateMode::Container.with_acls(self.access.acls());
        let create = || client.create(dir, b"", &container);
        match self.within(ZkOp::Create, deadline, create()).await {
            Ok(Ok(_)) | Ok(Err(zk::Error::NodeExists)) => return Ok(()),
            Ok(Err(zk::Error::NoNode)) => {}
            Ok(Err(e)) => return Err(self.write_failed(Ok(e))),
            Err(e) => return Err(self.write_failed(Err(e))),
        }
        let persistent = zk::CreateMode::Persistent.with_acls(self.access.acls());
        let mkdir = client.mkdir(&self.state_root, &persistent);
        match self.within(ZkOp::Create, deadline, mkdir).await {
            Ok(Ok(())) | Ok(Err(zk::Error::NodeExists)) => {}
            Ok(Err(e)) => return Err(self.write_failed(Ok(e))),
            Err(e) => return Err(self.write_failed(Err(e))),
        }
        match self.within(ZkOp::Create, deadline, create()).await {
            Ok(Ok(_)) | Ok(Err(zk::Error::NodeExists)) => Ok(()),
            Ok(Err(e)) => Err(self.write_failed(Ok(e))),
            Err(e) => Err(self.write_failed(Err(e))),
        }
    }

    pub(super) async fn join_queue(
        &self,
        name: &LockName,
        ticket: &Ticket,
        deadline: Instant,
    ) -> Result<Waiter, StoreError> {
        // Each request sent after an answered one (the container's create after a refusal for
        // want of it, the next attempt), and a listing that settles an answer lost by running
        // out of time, gets as long as the call had (see `service::outcome`): on a slow
        // server the three requests of a join whose container has gone can take more than
        // one store timeout.
        let budget = deadline.saturating_duration_since(Instant::now());
        // ... but all attempts together no longer than three such budgets (the settling
        // listing may take one more), as `LockService::round_deadline` bounds a call's rounds.
        let limit = Instant::now() + budget * 3;
        let afresh = || (Instant::now() + budget).min(limit);
        let mut deadline = deadline;
        let dir = self.queue_dir(name);
        let prefix = Waiter::id_prefix(ticket.priority, &ticket.key);
        let data = ticket.encode();
        let options = zk::CreateMode::EphemeralSequential.with_acls(self.access.acls());
        let mine = |queue: Vec<Waiter>| queue.into_iter().find(|w| w.key == ticket.key);
        if ticket.request_id.is_some() {
            // A retried call finds the node its first attempt created.
            if let Some(existing) = mine(self.read_queue(name, deadline).await?) {
                return Ok(existing);
            }
        }
        for attempt in 0..4 {
            if attempt > 0 {
                deadline = deadline.max(afresh());
            }
            // The waiter's node must live and die with the primary session, never with a
            // stand-in (see `session.rs`).
            let client = self
                .primary_client(deadline)
                .await
                .map_err(|e| self.write_failed(Err(e)))?;
            let path = format!("{dir}/{prefix}");
            let create = client.create(&path, &data, &options);
            let failure = match self.within(ZkOp::Create, deadline, create).await {
                Ok(Ok((_, sequence))) => {
                    let id = format!("{prefix}{:010}", sequence.into_i64());
                    return Waiter::parse(&id).ok_or_else(|| {
                        StoreError::Unavailable(format!("unexpected waiter id {id}"))
                    });
                }
                Ok(Err(zk::Error::NoNode)) => {
                    self.create_queue_dir(&dir, deadline.max(afresh())).await?;
                    continue;
                }
                Ok(Err(error)) => Ok(error),
                Err(no_answer) => Err(no_answer),
            };
            // The answer was lost (logged, counted, and a stall reported, as for any write).
            // The listing goes out on the very client the create went out on: its requests
            // are sent in order, after a reconnection too, so the listing shows the node if
            // the create landed. A stand-in's listing would not be ordered after it. Should
            // the session end in between, its nodes go with it.
            let _ = self.write_failed(failure);
            // As `service::LockService::settle_by`, one budget more (not bound by `limit`).
            let settle = if Instant::now() >= deadline {
                Instant::now() + budget
            } else {
                deadline
            };
            let listed = client.list_children(&dir);
            let children = self
                .read_node(ZkOp::GetChildren, settle, listed)
                .await?
                .unwrap_or_default();
            if let Some(existing) = mine(queue_of(&children)) {
                return Ok(existing);
            }
        }
        Err(StoreError::Unavailable("could not join the queue".into()))
    }

    /// Deletes every queue container without a child, each at the version it was seen at. A
    /// caller joining at that moment finds its container gone and makes it again.
    pub(super) async fn remove_childless_queue_dirs(
        &self,
        deadline: Instant,
    ) -> Result<(), StoreError> {
        let client = self
            .client(deadline)
            .await
            .map_err(|e| self.read_failed(Err(e)))?;
        let dirs = self
            .read_node(
                ZkOp::GetChildren,
                deadline,
                client.list_children(&self.state_root),
            )
            .await?
            .unwrap_or_default();
        for dir in dirs {
            let path = format!("{}/{dir}", self.state_root);
            let stat = match self
                .within(ZkOp::Exists, deadline, client.check_stat(&path))
                .await
            {
                Ok(Ok(Some(stat))) => stat,
                Ok(Ok(None)) => continue,
                Ok(Err(e)) => return Err(self.read_failed(Ok(e))),
                Err(e) => return Err(self.read_failed(Err(e))),
            };
            if stat.num_children > 0 || stat.data_length > 0 {
                continue;
            }
            let delete = client.delete(&path, Some(stat.version));
            match self.within(ZkOp::Delete, deadline, delete).await {
                Ok(
                    Ok(()) | Err(zk::Error::NoNode | zk::Error::NotEmpty | zk::Error::BadVersion),
                ) => {}
                Ok(Err(e)) => return Err(self.write_failed(Ok(e))),
                Err(e) => return Err(self.write_failed(Err(e))),
            }
        }
        Ok(())
    }

    pub(super) async fn read_ticket(
        &self,
        name: &LockName,
        waiter: &Waiter,
        deadline: Instant,
    ) -> Result<Option<Ticket>, StoreError> {
        let path = self.waiter_path(name, waiter);
        let read = || async {
            let client = (self.client(deadline).await).map_err(|e| self.read_failure(Err(e)))?;
            let get = client.get_data(&path);
            let found = self.read_node_once(ZkOp::GetData, deadline, get).await?;
            Ok(found.and_then(|(data, _)| Ticket::decode(&data)))
        };
        self.read_again_if_cut(deadline, read).await
    }

    pub(super) async fn leave_queue(
        &self,
        name: &LockName,
        waiter: &Waiter,
        deadline: Instant,
    ) -> Result<bool, StoreError> {
        let client = self
            .client(deadline)
            .await
            .map_err(|e| self.write_failed(Err(e)))?;
        let path = self.waiter_path(name, waiter);
        match self
            .within(ZkOp::Delete, deadline, client.delete(&path, None))
            .await
        {
            Ok(Ok(())) => Ok(true),
            Ok(Err(zk::Error::NoNode)) => Ok(false),
            Ok(Err(e)) => Err(self.write_failed(Ok(e))),
            Err(e) => Err(self.write_failed(Err(e))),
        }
    }

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

    pub(super) async fn wait_for_change(
        &self,
        name: &LockName,
        watch: &Watch,
        seen: Option<Version>,
        until: Instant,
    ) -> Result<Wake, StoreError> {
        // Watches go on the primary session, which sets them again when it reconnects; a
        // stand-in's watches would end with it (see `session.rs`). A watch on a primary that
        // is then given up on may never fire, so a change of primary wakes the caller too.
        let Some((client, mut replaced)) = self.session.primary_and_changes(until).await else {
            return Err(self.read_failed(Err(NoAnswer::NoSession)));
        };
        let (path, woken) = match watch {
            Watch::Record => (self.path(name), Wake::Record),
            Watch::Predecessor(id) => (format!("{}/{id}", self.queue_dir(name)), Wake::Predecessor),
        };
        let watched = client.check_and_watch_stat(&path);
        let answer = tokio::select! {
            answer = self.within(ZkOp::Exists, until, watched) => answer,
            _ = replaced.changed() => return Ok(woken),
        };
        let (stat, watcher) = match answer {
            Ok(Ok(found)) => found,
            Ok(Err(e)) => return Err(self.read_failed(Ok(e))),
            Err(NoAnswer::TimedOut(_)) => return Ok(Wake::Timer),
            Err(e) => return Err(self.read_failed(Err(e))),
        };
        let moved = match watch {
            Watch::Record => stat.map(|s| s.version) != seen.map(|v| v.number),
            Watch::Predecessor(_) => stat.is_none(),
        };
        if moved {
            return Ok(woken);
        }
        tokio::select! {
            _ = watcher.changed() => Ok(woken),
            _ = replaced.changed() => Ok(woken),
            _ = tokio::time::sleep_until(until) => Ok(Wake::Timer),
        }
    }
}

/// A queue container's children as waiters, in service order; names that are not waiters
/// are left out.
pub(super) fn queue_of(children: &[String]) -> Vec<Waiter> {
    let mut queue: Vec<Waiter> = children.iter().filter_map(|c| Waiter::parse(c)).collect();
    sort_queue(&mut queue);
    queue
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
