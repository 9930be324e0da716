//! The hub's task: one loop over stream openings and closings, store changes, and lease
//! expiries (see the parent module for what it keeps and why).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{broadcast, mpsc};

use super::*;

/// How often covers whose streams have all closed are looked at.
const PRUNE_EVERY: Duration = Duration::from_secs(5);

impl State {
    pub(super) async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        let mut prune = tokio::time::interval(PRUNE_EVERY);
        loop {
            let next_expiry = self.next_expiry();
            tokio::select! {
                command = commands.recv() => match command {
                    Some(command) => self.command(command).await,
                    None => return,
                },
                change = next_change(&mut self.changes) => self.on_change(change).await,
                _ = tokio::time::sleep_until(next_expiry.into()) => self.expire_due().await,
                _ = prune.tick() => self.prune(),
            }
        }
    }

    fn deadline(&self) -> Instant {
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
                        cover.idle_since = Some(Instant::now());
                    }
                }
            }
        }
    }

    async fn open(
        &mut self,
        interest: Interest,
        last_seen: Option<EventId>,
    ) -> Result<Subscription, StoreError> {
        if self.changes.is_none() {
            self.changes = Some(self.store.changes());
        }
        let already = self.covers.get(&interest).map(|c| c.since);
        let cover = self.covers.entry(interest.clone()).or_insert(Cover {
            streams: 0,
            since: self.last,
            idle_since: None,
        });
        cover.streams += 1;
        cover.idle_since = None;
        let open = OpenStream {
            commands: self.commands.clone(),
            interest: interest.clone(),
        };
        // Only from an event still kept, on an interest covered since before it: then
        // nothing that followed it is missing.
        let resumable = |seen: EventId| {
            already.is_some_and(|since| since <= seen) && self.ring.iter().any(|e| e.id == seen)
        };
        let opening = match last_seen {
            Some(seen) if resumable(seen) => Opening::Replay(
                self.ring
                    .iter()
                    .filter(|e| e.id > seen && interest.covers(&e.lock.name))
                    .cloned()
                    .collect(),
            ),
            _ => self.snapshot(&interest).await?,
        };
        Ok(Subscription {
            opening,
            live: LiveEvents {
                events: self.events.subscribe(),
                _open: open,
            },
        })
    }

    async fn snapshot(&mut self, interest: &Interest) -> Result<Opening, StoreError> {
        let now = UnixMillis::now();
        let (locks, truncated) = match interest {
            Interest::Lock(name) => {
                // The snapshot's id is at least the zxid of the state it shows, so that a
                // client can tell that its own grant is in it; ids after it only grow.
                if let Some(zxid) = self.refresh(name).await? {
                    self.last = self.last.max(EventId { zxid, seq: 0 });
                }
                let known = &self.known[name];
                (
                    vec![snapshot(name, &known.record, &known.queue, now)],
                    false,
                )
            }
            Interest::Prefix(prefix) => {
                let (held, truncated) = self.held_under(prefix).await?;
                let mut locks = Vec::with_capacity(held.len());
                for (name, record) in held {
                    let known = self.known.entry(name.clone()).or_insert_with(|| Known {
                        record,
                        ..Known::default()
                    });
                    locks.push(snapshot(&name, &known.record, &known.queue, now));
                    Self::schedule_expiry(&mut self.expiries, &name, &known.record);
                }
                (locks, truncated)
            }
        };
        Ok(Opening::Snapshot {
            id: self.last,
            locks,
            truncated,
        })
    }

    /// The held (or expired) locks under `prefix`, up to [`SNAPSHOT_MAX`].
    async fn held_under(
        &self,
        prefix: &str,
    ) -> Result<(Vec<(LockName, LockRecord)>, bool), StoreError> {
        let mut held = Vec::new();
        let mut after = None;
        loop {
            let query = ListQuery {
                prefix: prefix.to_owned(),
                after: after.take(),
                limit: 1000,
                free: false,
            };
            let page = self.store.list(&query, self.deadline()).await?;
            after = page.locks.last().map(|(name, _)| name.clone());
            held.extend(page.locks);
            if held.len() >= SNAPSHOT_MAX {
                held.truncate(SNAPSHOT_MAX);
                return Ok((held, true));
            }
            if !page.more {
                return Ok((held, false));
            }
        }
    }

    async fn on_change(&mut self, change: Change) {
        let names: Vec<LockName> = match change {
            Change::Lock(name) if self.covered(&name) => vec![name],
            Change::Lock(_) => return,
            Change::Resync => {
                let mut names: Vec<LockName> = self.known.keys().cloned().collect();
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
                names.sort_unstable();
                names.dedup();
                names
            }
        };
        for name in names {
            if let Err(error) = self.refresh(&name).await {
                debug!(lock = %name, %error, "cannot read a changed lock for its streams");
            }
        }
    }

    /// Reads `name` and sends the events that its change since the last read makes; the
    /// zxid of the record's last write, if it has a record.
    async fn refresh(&mut self, name: &LockName) -> Result<Option<i64>, StoreError> {
        let deadline = self.deadline();
        let stored = self.store.read(name, deadline).await?;
        let queue = match &stored {
            Some(_) => self.store.queue(name, deadline).await?,
            None => Vec::new(),
        };
        let zxid = stored.as_ref().map(|s| s.version.mzxid);
        let version = stored.as_ref().map(|s| s.version.number);
        let record = stored.map(|s| s.record).unwrap_or_default();
        let now = UnixMillis::now();
        let known = self.known.entry(name.clone()).or_default();
        // lockwarden's writes move a record on by two versions (one from an odd version).
        let several = matches!((known.version, version), (Some(a), Some(b)) if b - a > 2);
        known.version = version;
        let mut kinds = classify(&known.record, &record, now, several);
        if queue.len() != known.queue.len() {
            kinds.push(EventType::Queue);
        }
        let expiry_changed = known.record.holder.as_ref().map(|h| h.expires)
            != record.holder.as_ref().map(|h| h.expires);
        if expiry_changed {
            known.expiry_sent = false;
        }
        known.record = record;
        known.queue = queue;
        let lock = snapshot(name, &known.record, &known.queue, now);
        Self::schedule_expiry(&mut self.expiries, name, &known.record);
        for kind in kinds {
            self.last = self.last.next(zxid);
            self.send(StreamEvent {
                id: self.last,
                kind,
                lock: lock.clone(),
            });
        }
        Ok(zxid)
    }

    fn schedule_expiry(
        expiries: &mut BTreeSet<(i64, LockName)>,
        name: &LockName,
        record: &LockRecord,
    ) {
        if let Some(Expiry::At(at)) = record.holder.as_ref().map(|h| h.expires) {
            expiries.insert((at.0, name.clone()));
        }
    }

    fn next_expiry(&self) -> Instant {
        let far = Instant::now() + Duration::from_secs(3600);
        match self.expiries.first() {
            Some((at, _)) => {
                let wait = u64::try_from(at - UnixMillis::now().0).unwrap_or(0);
                Instant::now() + Duration::from_millis(wait)
            }
            None => far,
        }
    }

    async fn expire_due(&mut self) {
        let now = UnixMillis::now();
        while let Some((at, name)) = self.expiries.first().cloned() {
            if at > now.0 {
                break;
            }
            self.expiries.pop_first();
            if !self.known.contains_key(&name) {
                continue;
            }
            // Read before saying so: a renewal this hub has not heard of yet (its watch
            // was reconnecting, say) must not be reported as an expiry.
            if let Err(error) = self.refresh(&name).await {
                debug!(lock = %name, %error, "cannot check an expiry; trying again shortly");
                self.expiries.insert((now.0 + 200, name));
                continue;
            }
            let Some(known) = self.known.get_mut(&name) else {
                continue;
            };
            let same_lease = known
                .record
                .holder
                .as_ref()
                .is_some_and(|h| h.expires == Expiry::At(UnixMillis(at)));
            if !same_lease || known.expiry_sent {
                continue;
            }
            known.expiry_sent = true;
            let lock = snapshot(&name, &known.record, &known.queue, now);
            self.last = self.last.next(None);
            self.send(StreamEvent {
                id: self.last,
                kind: EventType::Expired,
                lock,
            });
        }
    }

    fn send(&mut self, event: StreamEvent) {
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
        self.expiries.retain(|(_, name)| known.contains_key(name));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Holder;
    use crate::store::memory::MemoryStore;

    fn held(owner: &str) -> LockRecord {
        LockRecord::held_by(Holder {
            lease_id: Some(crate::model::LeaseId::random()),
            ..Holder::minimal(owner)
        })
    }

    #[tokio::test]
    async fn a_stream_that_does_not_read_is_closed_not_buffered_without_bound() {
        let store: Arc<dyn LockStore> = Arc::new(MemoryStore::new());
        let hub = Hub::start(store.clone(), Duration::from_secs(1));
        let mut reading = hub
            .open(Interest::Prefix(String::new()), None)
            .await
            .unwrap();
        let mut idle = hub
            .open(Interest::Prefix(String::new()), None)
            .await
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let total = STREAM_BUFFER + 10;
        for i in 0..total {
            let name = LockName::parse(&format!("l{i}")).unwrap();
            store.create(&name, &held("o"), deadline).await.unwrap();
            // The reading stream keeps up, event by event.
            let event = tokio::time::timeout(Duration::from_secs(5), reading.live.next())
                .await
                .unwrap()
                .expect("a stream that reads keeps getting events");
            assert_eq!(
                (event.kind, event.lock.name.as_str()),
                (EventType::Acquired, name.as_str())
            );
        }
        // The idle one fell more than its buffer behind: it ends instead of growing.
        assert!(idle.live.next().await.is_none());
    }
}
