//! Lock queues in ZooKeeper: one container per lock at `{state_root}/{name, '/' as '~'}`,
//! holding an ephemeral sequential node per waiter (so a waiter vanishes with its
//! instance's session), whose data is the waiter's ticket. This file owns the containers and
//! the entries: reading a queue, joining it, reading a ticket, leaving, and sweeping empty
//! containers; a hand-off's transaction is `handoff.rs`, a wait for a change `watch.rs`.
//!
//! Keeps (DESIGN.md, "Invariants") I8 (bounded joins), I9 and I10 (`join_queue` finds a
//! retry's or a lost create's node by key) and I12 (`remove_childless_queue_dirs`).

use tokio::time::Instant;

use zookeeper_client as zk;

use super::ZkStore;
use crate::metrics::zookeeper::ZkOp;
use crate::model::LockName;
use crate::store::StoreError;
use crate::waiter::{sort_queue, Ticket, Waiter};

impl ZkStore {
    pub(super) fn queue_dir(&self, name: &LockName) -> String {
        // '~' never occurs in a lock name, so this flattening is one-to-one.
        format!("{}/{}", self.state_root, name.as_str().replace('/', "~"))
    }

    pub(super) fn waiter_path(&self, name: &LockName, waiter: &Waiter) -> String {
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
}

/// A queue container's children as waiters, in service order; names that are not waiters
/// are left out.
pub(super) fn queue_of(children: &[String]) -> Vec<Waiter> {
    let mut queue: Vec<Waiter> = children.iter().filter_map(|c| Waiter::parse(c)).collect();
    sort_queue(&mut queue);
    queue
}
