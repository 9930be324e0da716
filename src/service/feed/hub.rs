//! The hub's task: one loop over stream openings and closings, store changes, and lease
//! ends, one of them a turn (see the parent module for what it keeps and why); a stream's
//! opening is in `opening`.
//!
//! Keeps I14 (DESIGN.md, "Invariants"): one thing a turn, so a new stream's snapshot and the events
//! after it never interleave.

use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use tokio::sync::{broadcast, mpsc};

use super::expiry::{follow_leases, lease_ends};
use super::*;
use crate::store::Reads;
use crate::store::{Fresh, Stored};

/// How often covers whose streams have all closed are looked at.
const PRUNE_EVERY: Duration = Duration::from_secs(5);
/// The most changes read together (see `on_change`).
const COALESCE_MAX: usize = 32;

impl State {
    pub(super) async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        let mut prune = tokio::time::interval(PRUNE_EVERY);
        loop {
            let next_expiry = self.next_expiry();
            tokio::select! {
                biased;
                command = commands.recv() => match command {
                    Some(command) => self.command(command).await,
                    None => return,
                },
                change = next_change(&mut self.changes) => self.on_change(change).await,
                _ = tokio::time::sleep_until(next_expiry) => self.expire_next().await,
                _ = prune.tick() => self.prune(),
            }
        }
    }

    /// The clock the lock rules judge by, at `now`.
    pub(super) fn rules_at(&self, now: UnixMillis) -> crate::engine::Clock {
        crate::engine::Clock {
            now,
            max_skew_ms: self.max_skew_ms,
        }
    }

    pub(super) fn deadline(&self) -> Instant {
        Instant::now() + self.store_timeout
    }

    fn covered(&self, name: &LockName) -> bool {
        self.covers.keys().any(|interest| interest.covers(name))
    }

    async fn command(&mut self, command: Command) {
        match command {
            Command::Open {
                interest,
                last_seen,
                reply,
            } => {
                let opened = self.open(interest, last_seen).await;
                let _ = reply.send(opened);
            }
            Command::Close(interest) => {
                if let Some(cover) = self.covers.get_mut(&interest) {
                    cover.streams = cover.streams.saturating_sub(1);
                    if cover.streams == 0 {
                        cover.idle_since = Some(tokio::time::Instant::now());
                    }
                }
            }
        }
    }

    /// Reads the locks that `first` and the changes already queued behind it name, each
    /// once: one write on ZooKeeper is several znode events (`store::zk::ops`), and one read
    /// after them shows what all of them did.
    async fn on_change(&mut self, first: Change) {
        let mut changes = vec![first];
        if let Some(receiver) = &mut self.changes {
            while changes.len() < COALESCE_MAX {
                match receiver.try_recv() {
                    Ok(change) => changes.push(change),
                    Err(broadcast::error::TryRecvError::Lagged(_)) => changes.push(Change::Resync),
                    Err(_) => break,
                }
            }
        }
        let mut names: Vec<LockName> = Vec::new();
        if changes.iter().any(|c| matches!(c, Change::Resync)) {
            names = self.known.keys().cloned().collect();
            let prefixes: Vec<String> = self
                .covers
                .keys()
                .filter_map(|i| match i {
                    Interest::Prefix(p) => Some(p.clone()),
                    Interest::Lock(_) => None,
                })
                .collect();
            for prefix in prefixes {
                if let Ok((held, _)) = self.held_under(&prefix).await {
                    names.extend(held.into_iter().map(|(name, _)| name));
                }
            }
            // Changes named beside the resync, which a failed listing would miss.
            for change in &changes {
                if let Change::Lock(name) = change {
                    if self.covered(name) {
                        names.push(name.clone());
                    }
                }
            }
            names.sort_unstable();
            names.dedup();
        } else {
            for change in changes {
                if let Change::Lock(name) = change {
                    if self.covered(&name) && !names.contains(&name) {
                        names.push(name);
                    }
                }
            }
        }
        for name in names {
            if let Err(error) = self.refresh(&name, true).await {
                debug!(lock = %name, %error, "cannot read a changed lock for its streams");
            }
        }
    }

    /// Reads `name` (record and queue, one state) and, with `announce`, sends the events
    /// that its change since the last read makes; the zxid of the record's last write, if
    /// it has a record.
    pub(super) async fn refresh(
        &mut self,
        name: &LockName,
        announce: bool,
    ) -> Result<Option<i64>, StoreError> {
        self.reads.inc();
        let (stored, queue) = self
            .store
            .read_with_queue(name, Fresh::Any, self.deadline())
            .await?;
        let zxid = stored.as_ref().map(|s| s.version.zxid());
        let events = self.learn(name, stored, queue);
        if announce {
            for ((kind, token), lock) in events {
                // `expired` reports no write of its own.
                let write = (kind != EventType::Expired).then_some(zxid).flatten();
                self.last = self.last.next(write);
                self.send(StreamEvent {
                    id: self.last,
                    kind,
                    lock,
                    token,
                });
            }
        }
        Ok(zxid)
    }

    /// Takes a read of `name` in, and says which events it makes, in order.
    fn learn(
        &mut self,
        name: &LockName,
        stored: Option<Stored>,
        queue: Vec<Waiter>,
    ) -> Vec<(Told, LockSnapshot)> {
        let now = self.clock.now();
        let at = self.rules_at(now);
        let version = stored.as_ref().map(|s| s.version);
        let record = stored.map(|s| s.record).unwrap_or_default();
        let known = self.known.entry(name.clone()).or_default();
        let mut events = Vec::new();
        // A lease that ran out untold and is now gone or another's: it ran out first.
        let ends = lease_ends(&record);
        let ran_out: Vec<Told> = known
            .leases
            .iter()
            .filter(|l| !l.told && l.at <= now.0 && !ends.contains(&(l.token, l.at)))
            .filter(|l| !renewed(&known.record, &record, l.token))
            .map(|l| (EventType::Expired, l.token))
            .collect();
        if !ran_out.is_empty() {
            let lock = snapshot(name, &known.record, &known.queue, at);
            events.extend(ran_out.into_iter().map(|told| (told, lock.clone())));
        }
        let several =
            matches!((known.version, version), (Some(a), Some(b)) if b.several_writes_after(&a));
        let mut kinds = classify(&known.record, &record, now, several);
        if queue.len() != known.queue.len() {
            kinds.push((EventType::Queue, None));
        }
        known.version = version;
        known.record = record;
        known.queue = queue;
        let told = follow_leases(&mut self.expiries, name, known, ends, now, false);
        kinds.extend(told.into_iter().map(|token| (EventType::Expired, token)));
        let lock = snapshot(name, &known.record, &known.queue, at);
        events.extend(kinds.into_iter().map(|told| (told, lock.clone())));
        events
    }

    pub(super) fn send(&mut self, event: StreamEvent) {
        let event = Arc::new(event);
        if self.ring.len() == RING {
            self.ring.pop_front();
        }
        self.ring.push_back(event.clone());
        // Nobody may be listening right now (a lingering cover): the ring still keeps it.
        let _ = self.events.send(event);
    }

    /// Forgets covers whose streams closed more than [`LINGER`] ago, the locks only they
    /// covered, and (with no cover left) the store's change feed.
    fn prune(&mut self) {
        self.covers
            .retain(|_, cover| cover.idle_since.is_none_or(|idle| idle.elapsed() < LINGER));
        let covers = &self.covers;
        self.known
            .retain(|name, _| covers.keys().any(|interest| interest.covers(name)));
        let known = &self.known;
        self.expiries
            .retain(|(_, name, _)| known.contains_key(name));
        if self.covers.is_empty() {
            self.changes = None;
            self.ring.clear();
        }
    }
}

async fn next_change(changes: &mut Option<broadcast::Receiver<Change>>) -> Change {
    match changes {
        Some(receiver) => match receiver.recv().await {
            Ok(change) => change,
            // Fell behind the feed: what was missed must be read again.
            Err(broadcast::error::RecvError::Lagged(_)) => Change::Resync,
            Err(broadcast::error::RecvError::Closed) => {
                *changes = None;
                std::future::pending().await
            }
        },
        None => std::future::pending().await,
    }
}

/// Whether the grant with `token` in `before` holds on in `after` under another lease end (a
/// renewal the hub had not read before its old end came).
fn renewed(before: &LockRecord, after: &LockRecord, token: Option<FencingToken>) -> bool {
    let old = before.holders.iter().find(|h| h.fencing_token == token);
    old.is_some_and(|old| after.holders.iter().any(|h| h.same_grant(old)))
}
