//! The ZooKeeper store: one persistent znode per lock at `{lock_root}/{name}`, holding the
//! Helix ZNRecord; intermediate znodes of nested names are containers, which the server
//! removes once they are empty.
//!
//! Every change is a single conditional write; concurrent record writes may travel in one
//! shared `multi`, each keeping its own conditions (`batch.rs`). Every request is bounded by
//! a deadline, because the client neither times out nor cancels a request on its own; a
//! call is bounded by the deadline it is given, except a queue join, whose later attempts
//! get as long again, up to three times in all, and a fourth for the listing that settles a
//! lost answer (`queue.rs`). A write whose answer is lost is reported as
//! [`StoreError::OutcomeUnknown`] so the service re-reads.
//!
//! Keeps I8 (DESIGN.md, "Invariants"): every request has a deadline (`request.rs`).

use std::time::Duration;
use tokio::time::Instant;

use async_trait::async_trait;
use zookeeper_client as zk;

use super::collect::Removal;
use super::{
    EntryLife, EntrySession, Fresh, HandOff, ListPage, ListQuery, LockStore, RecordWrite,
    StoreError, Version, WriteOutcome,
};
use crate::metrics::zookeeper::{ZkMetrics, ZkOp};
use crate::model::LockName;
use crate::record::LockRecord;
use crate::store::{Found, Take, Wake};
use crate::waiter::Watch;
use crate::waiter::{Ticket, Waiter};

pub mod access;
pub(crate) mod batch;
mod batch_plan;
mod contradiction;
mod create;
mod feed;
mod handoff;
mod list;
mod no_answer;
pub(crate) mod ops;
mod queue;
mod read;
mod request;
mod session;
mod stand_in;
mod supervisor;
mod watch;
mod write;

pub use session::ZkSession;

use crate::seal::Sealer;
use access::ZkAccess;
pub(super) use no_answer::{Late, NoAnswer};

pub struct ZkStore {
    /// Shared by the stores of one instance (`ZkStore::beside`): one session, many roots.
    session: std::sync::Arc<ZkSession>,
    lock_root: String,
    state_root: String,
    access: ZkAccess,
    /// Turns the bearer secrets of records in the unsealed layout into their seals.
    sealer: Sealer,
    feed: std::sync::Arc<feed::Feed>,
    /// Lets concurrent record writes share a `multi` (`batch.rs`).
    batch: batch::Coalescer,
    /// Notices a server whose copy of a record contradicts the leader's.
    contradictions: contradiction::Contradictions,
    metrics: ZkMetrics,
}

/// How to reach ZooKeeper and what to do there.
pub struct ZkConfig {
    pub connect: String,
    pub lock_root: String,
    pub state_root: String,
    pub session_timeout: Duration,
    pub access: ZkAccess,
    pub sealer: Sealer,
    /// Where request latencies, errors and the session's state are recorded.
    pub metrics: ZkMetrics,
    /// Record writes in flight before further ones wait to share a `multi` (`batch.rs`);
    /// 0: every write goes out alone at once.
    pub writes_in_flight: usize,
}

impl ZkStore {
    pub fn new(config: ZkConfig) -> Self {
        let session = ZkSession::start(
            config.connect.clone(),
            config.session_timeout,
            config.access.clone(),
            config.metrics.clone(),
        );
        Self::on_session(std::sync::Arc::new(session), config)
    }

    /// A store under other roots on this store's session, so that an instance keeps one
    /// ZooKeeper session whatever it stores (locks, elections). `config.connect`,
    /// `session_timeout` and `access` are the session's, whatever `config` says.
    pub fn beside(&self, config: ZkConfig) -> Self {
        Self::on_session(self.session.clone(), config)
    }

    fn on_session(session: std::sync::Arc<ZkSession>, config: ZkConfig) -> Self {
        let lock_root = config.lock_root.trim_end_matches('/').to_owned();
        let state_root = config.state_root.trim_end_matches('/').to_owned();
        let batch = batch::Coalescer::new(
            config.writes_in_flight,
            std::sync::Arc::new(session.serves()),
            config.access.clone(),
            config.metrics.clone(),
        );
        ZkStore {
            feed: feed::Feed::start(session.clients(), lock_root.clone(), state_root.clone()),
            session,
            lock_root,
            state_root,
            batch,
            contradictions: Default::default(),
            access: config.access,
            sealer: config.sealer,
            metrics: config.metrics,
        }
    }

    fn path(&self, name: &LockName) -> String {
        format!("{}/{}", self.lock_root, name)
    }

    async fn client(&self, deadline: Instant) -> Result<zk::Client, NoAnswer> {
        self.session
            .client(deadline)
            .await
            .ok_or(NoAnswer::NoSession)
    }

    /// The primary session's client: for ephemeral nodes (see `session.rs`).
    async fn primary_client(&self, deadline: Instant) -> Result<zk::Client, NoAnswer> {
        self.session
            .primary(deadline)
            .await
            .ok_or(NoAnswer::NoSession)
    }
}

#[async_trait]
impl LockStore for ZkStore {
    async fn fetch(
        &self,
        name: &LockName,
        take: Take,
        fresh: Fresh,
        deadline: Instant,
    ) -> Result<Found, StoreError> {
        let latest = fresh == Fresh::Latest;
        Ok(match take {
            Take::Record => Found {
                stored: self.read_record(name, deadline, latest).await?,
                queue: Vec::new(),
            },
            // A `sync` goes with a read of the record: the queue alone is never asked for
            // after one, and takes the one-state read when it is.
            Take::Queue if !latest => Found {
                stored: None,
                queue: self.read_queue(name, deadline).await?,
            },
            Take::Queue | Take::Both => {
                let (stored, queue) = self.read_record_and_queue(name, deadline, latest).await?;
                let stored = stored.filter(|_| take == Take::Both);
                Found { stored, queue }
            }
        })
    }

    async fn write(
        &self,
        name: &LockName,
        write: RecordWrite<'_>,
        deadline: Instant,
    ) -> Result<WriteOutcome, StoreError> {
        match write {
            RecordWrite::Create(record) => self.create_record(name, record, deadline).await,
            RecordWrite::Update(record, version) => {
                self.write_record(name, record, version, deadline).await
            }
        }
    }

    async fn list(&self, query: &ListQuery, deadline: Instant) -> Result<ListPage, StoreError> {
        let read = || async {
            let client = (self.client(deadline).await).map_err(|e| self.read_failure(Err(e)))?;
            let mut page = ListPage::default();
            let root = &self.lock_root;
            list::walk(
                &self.metrics,
                &client,
                root,
                Vec::new(),
                query,
                &mut page,
                deadline,
            )
            .await
            .map_err(|e| self.read_failure(e))?;
            Ok(page)
        };
        self.read_again_if_cut(deadline, read).await
    }

    async fn ready(&self, deadline: Instant) -> Result<(), StoreError> {
        let client = self
            .client(deadline)
            .await
            .map_err(|e| self.read_failed(Err(e)))?;
        match self
            .within(ZkOp::Exists, deadline, client.check_stat("/"))
            .await
        {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(self.read_failed(Ok(e))),
            Err(e) => Err(self.read_failed(Err(e))),
        }
    }

    fn entry_life(&self) -> EntryLife {
        EntryLife {
            session: self.session.primary_alive_id().map(EntrySession),
            outlives_outage: self.session.session_timeout(),
        }
    }

    async fn enqueue(
        &self,
        name: &LockName,
        ticket: &Ticket,
        deadline: Instant,
    ) -> Result<Waiter, StoreError> {
        self.join_queue(name, ticket, deadline).await
    }

    async fn ticket(
        &self,
        name: &LockName,
        waiter: &Waiter,
        deadline: Instant,
    ) -> Result<Option<Ticket>, StoreError> {
        self.read_ticket(name, waiter, deadline).await
    }

    async fn leave(
        &self,
        name: &LockName,
        waiter: &Waiter,
        deadline: Instant,
    ) -> Result<bool, StoreError> {
        self.leave_queue(name, waiter, deadline).await
    }

    async fn hand_off(
        &self,
        name: &LockName,
        record: &LockRecord,
        version: Option<Version>,
        waiter: &Waiter,
        joining: &[Ticket],
        deadline: Instant,
    ) -> Result<HandOff, StoreError> {
        self.hand_off_to(name, record, version, waiter, joining, deadline)
            .await
    }

    async fn wait_change(
        &self,
        name: &LockName,
        watch: &Watch,
        seen: Option<Version>,
        until: Instant,
    ) -> Result<Wake, StoreError> {
        self.wait_for_change(name, watch, seen, until).await
    }

    fn changes(&self) -> tokio::sync::broadcast::Receiver<super::Change> {
        self.feed.subscribe()
    }
}

/// The collector's writes (`store::collect`): `write.rs` and `queue.rs`.
#[async_trait]
impl Removal for ZkStore {
    async fn fence(
        &self,
        name: &LockName,
        version: Version,
        deadline: Instant,
    ) -> Result<WriteOutcome, StoreError> {
        self.fence_record(name, version, deadline).await
    }

    async fn delete(
        &self,
        name: &LockName,
        version: Version,
        deadline: Instant,
    ) -> Result<WriteOutcome, StoreError> {
        self.delete_record(name, version, deadline).await
    }

    async fn remove_empty_queues(&self, deadline: Instant) -> Result<(), StoreError> {
        self.remove_childless_queue_dirs(deadline).await
    }
}
