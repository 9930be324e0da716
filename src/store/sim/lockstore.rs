//! The store trait over a [`World`]: reads from the session's view, writes through the
//! dice ([`SimStore::send`]), and the apply step that lands a write on the leader.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::broadcast;
use tokio::time::Instant;

use super::super::collect::Removal;
use super::super::{
    Change, EntryLife, EntrySession, Found, Fresh, HandOff, Joined, ListPage, ListQuery, LockStore,
    RecordWrite, StoreError, Take, Version, Wake, WriteOutcome,
};
use crate::model::LockName;
use crate::record::LockRecord;
use crate::waiter::Watch;
use crate::waiter::{Ticket, Waiter};

use super::{lock_of, Applied, Session, SimStore, World, Write};

/// Applies a write on the leader, as sent on `session`: a write planned on another session
/// than the one it is sent on, or sent on a session that has ended, does not land.
pub(super) async fn apply(
    world: &World,
    me: &Mutex<Session>,
    session: i64,
    write: Write,
) -> Applied {
    let alive = lock_of(me).id == session;
    let planned_here = |v: &Version| v.session == 0 || v.session == session;
    let leader = &world.leader;
    let now = Instant::now();
    let conflict = Applied::Outcome(WriteOutcome::Conflict);
    let applied = match write {
        _ if !alive => conflict,
        Write::Create(name, record) => {
            let create = RecordWrite::Create(&record);
            Applied::Outcome(leader.write(&name, create, now).await.expect("memory"))
        }
        Write::Update(_, _, v) | Write::Fence(_, v) | Write::Delete(_, v) if !planned_here(&v) => {
            conflict
        }
        Write::Update(name, record, v) => {
            let update = RecordWrite::Update(&record, v);
            Applied::Outcome(leader.write(&name, update, now).await.expect("memory"))
        }
        Write::Fence(name, v) => {
            Applied::Outcome(leader.fence(&name, v, now).await.expect("memory"))
        }
        Write::Delete(name, v) => {
            Applied::Outcome(leader.delete(&name, v, now).await.expect("memory"))
        }
        Write::Enqueue(name, ticket) => {
            let entry = leader.enqueue(&name, &ticket, now).await.expect("memory");
            lock_of(me).entries.push((name, entry.clone()));
            Applied::Entry(entry)
        }
        Write::Leave(name, waiter) => {
            Applied::Left(leader.leave(&name, &waiter, now).await.expect("memory"))
        }
        Write::HandOff(_, _, Some(v), _, _) if !planned_here(&v) => {
            Applied::HandOff(HandOff::alone(WriteOutcome::Conflict))
        }
        Write::HandOff(name, record, version, waiter, joining) => {
            let done = leader
                .hand_off(&name, &record, version, &waiter, &joining, now)
                .await
                .expect("memory");
            if let Joined::Carried(entries) = &done.joined {
                let mut me = lock_of(me);
                me.entries
                    .extend(entries.iter().map(|e| (name.clone(), e.clone())));
            }
            Applied::HandOff(done)
        }
    };
    world.changed();
    // The server that answered has applied everything up to this write.
    let latest = world.lock().latest();
    let mut me = lock_of(me);
    if me.id == session {
        me.view = latest;
    }
    applied
}

#[async_trait]
impl LockStore for SimStore {
    async fn fetch(
        &self,
        name: &LockName,
        take: Take,
        fresh: Fresh,
        _: Instant,
    ) -> Result<Found, StoreError> {
        let latest = fresh == Fresh::Latest && take != Take::Queue;
        let (stored, queue) = self.read_view(name, latest).await?;
        Ok(match take {
            Take::Record => Found {
                stored,
                queue: Vec::new(),
            },
            Take::Queue => Found {
                stored: None,
                queue,
            },
            Take::Both => Found { stored, queue },
        })
    }

    async fn write(
        &self,
        name: &LockName,
        write: RecordWrite<'_>,
        _: Instant,
    ) -> Result<WriteOutcome, StoreError> {
        let name = name.clone();
        self.outcome(match write {
            RecordWrite::Create(record) => Write::Create(name, record.clone()),
            RecordWrite::Update(record, version) => Write::Update(name, record.clone(), version),
        })
        .await
    }

    async fn list(&self, query: &ListQuery, deadline: Instant) -> Result<ListPage, StoreError> {
        self.request().await;
        self.view(false).list(query, deadline).await
    }

    async fn ready(&self, _: Instant) -> Result<(), StoreError> {
        self.request().await;
        Ok(())
    }

    fn entry_life(&self) -> EntryLife {
        EntryLife {
            session: Some(EntrySession(self.session().id)),
            outlives_outage: Duration::ZERO,
        }
    }

    async fn enqueue(
        &self,
        name: &LockName,
        ticket: &Ticket,
        _: Instant,
    ) -> Result<Waiter, StoreError> {
        match self
            .send(Write::Enqueue(name.clone(), ticket.clone()))
            .await?
        {
            Applied::Entry(entry) => Ok(entry),
            _ => Err(StoreError::Unavailable(
                "simulated: the session ended".into(),
            )),
        }
    }

    async fn ticket(
        &self,
        name: &LockName,
        waiter: &Waiter,
        deadline: Instant,
    ) -> Result<Option<Ticket>, StoreError> {
        self.request().await;
        self.view(false).ticket(name, waiter, deadline).await
    }

    async fn leave(
        &self,
        name: &LockName,
        waiter: &Waiter,
        _: Instant,
    ) -> Result<bool, StoreError> {
        match self
            .send(Write::Leave(name.clone(), waiter.clone()))
            .await?
        {
            Applied::Left(left) => Ok(left),
            _ => Ok(false),
        }
    }

    async fn hand_off(
        &self,
        name: &LockName,
        record: &LockRecord,
        version: Option<Version>,
        waiter: &Waiter,
        joining: &[Ticket],
        _: Instant,
    ) -> Result<HandOff, StoreError> {
        let write = Write::HandOff(
            name.clone(),
            record.clone(),
            version,
            waiter.clone(),
            joining.to_vec(),
        );
        match self.send(write).await? {
            Applied::HandOff(done) => Ok(done),
            Applied::Outcome(outcome) => Ok(HandOff::alone(outcome)),
            _ => unreachable!("a hand-off answers a hand-off"),
        }
    }

    /// The watch is set on the leader; it fires late, and the server that tells it has the
    /// change by then.
    async fn wait_change(
        &self,
        name: &LockName,
        watch: &Watch,
        seen: Option<Version>,
        until: Instant,
    ) -> Result<Wake, StoreError> {
        self.request().await;
        let wake = self
            .world
            .leader
            .wait_change(name, watch, seen, until)
            .await?;
        if wake != Wake::Timer {
            let delay = {
                let mut world = self.world.lock();
                let max = world.faults.notice_max;
                world.upto(max)
            };
            tokio::time::sleep_until((Instant::now() + delay).min(until)).await;
            self.view(true);
        }
        Ok(wake)
    }

    /// The leader's notices, each passed on late, once this session's server has the change.
    fn changes(&self) -> broadcast::Receiver<Change> {
        let mut relay = self.relay.lock().unwrap_or_else(|e| e.into_inner());
        if relay.is_none() {
            let mut from = self.world.leader.changes();
            let to = self.feed.clone();
            let world: Weak<World> = Arc::downgrade(&self.world);
            let me = Arc::downgrade(&self.me);
            *relay = Some(tokio::spawn(async move {
                while let Ok(change) = from.recv().await {
                    let Some(world) = world.upgrade() else { return };
                    let delay = {
                        let mut inner = world.lock();
                        let max = inner.faults.notice_max;
                        inner.upto(max)
                    };
                    tokio::time::sleep(delay).await;
                    if let Some(me) = me.upgrade() {
                        let latest = world.lock().latest();
                        lock_of(&me).view = latest;
                    }
                    let _ = to.send(change);
                }
                let _ = to.send(Change::Resync);
            }));
        }
        self.feed.subscribe()
    }
}

/// The collector's writes go through the dice like any other.
#[async_trait]
impl Removal for SimStore {
    async fn fence(
        &self,
        name: &LockName,
        version: Version,
        _: Instant,
    ) -> Result<WriteOutcome, StoreError> {
        self.outcome(Write::Fence(name.clone(), version)).await
    }

    async fn delete(
        &self,
        name: &LockName,
        version: Version,
        _: Instant,
    ) -> Result<WriteOutcome, StoreError> {
        self.outcome(Write::Delete(name.clone(), version)).await
    }

    async fn remove_empty_queues(&self, _: Instant) -> Result<(), StoreError> {
        Ok(())
    }
}
