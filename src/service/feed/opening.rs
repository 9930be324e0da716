//! Opening a stream: a replay from the ring when the client's last event is still kept and
//! its interest was covered since, else a snapshot of what the interest covers, read as a
//! change where other streams already follow it.
//!
//! Keeps I14 (DESIGN.md, "Invariants"): an opening is one turn of the hub's task, so the
//! snapshot and the events after it never interleave.

use super::expiry::{follow_leases, lease_ends};
use super::*;

impl State {
    pub(super) async fn open(
        &mut self,
        interest: Interest,
        last_seen: Option<EventId>,
    ) -> Result<Subscription, StoreError> {
        // The opener holds a strong sender until it has the answer.
        let commands = self
            .commands
            .upgrade()
            .ok_or_else(|| StoreError::Unavailable("the event hub has stopped".into()))?;
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
            commands,
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
            _ => self.snapshot(&interest, already.is_some()).await?,
        };
        Ok(Subscription {
            opening,
            live: LiveEvents {
                events: self.events.subscribe(),
                _open: open,
            },
        })
    }

    /// Whether streams other than the one opening on `interest` follow `name` (`already`:
    /// streams on the same interest were open before it).
    fn followed(&self, name: &LockName, interest: &Interest, already: bool) -> bool {
        already || self.covers.keys().any(|i| i != interest && i.covers(name))
    }

    /// The opening of a new stream on `interest`. A lock that other streams follow is read as
    /// a change, so that they hear what changed (and a lease end that came) before the new
    /// stream's snapshot shows it; a lock nobody follows is learnt without events.
    async fn snapshot(
        &mut self,
        interest: &Interest,
        already: bool,
    ) -> Result<Opening, StoreError> {
        let (locks, truncated) = match interest {
            Interest::Lock(name) => {
                let announce = self.followed(name, interest, already);
                // The snapshot's id is at least the zxid of the state it shows, so that a
                // client can tell that its own grant is in it; ids after it only grow.
                if let Some(zxid) = self.refresh(name, announce).await? {
                    self.last = self.last.max(EventId { zxid, seq: 0 });
                }
                let known = &self.known[name];
                let at = self.rules_at(self.clock.now());
                (vec![snapshot(name, &known.record, &known.queue, at)], false)
            }
            Interest::Prefix(prefix) => {
                let (held, truncated) = self.held_under(prefix).await?;
                // Followed, but its change not read yet: read it now, as that change.
                for (name, _) in &held {
                    if !self.known.contains_key(name) && self.followed(name, interest, already) {
                        self.refresh(name, true).await?;
                    }
                }
                let now = self.clock.now();
                let at = self.rules_at(now);
                let mut locks = Vec::with_capacity(held.len());
                let mut ran_out = Vec::new();
                for (name, record) in held {
                    let new = !self.known.contains_key(&name);
                    let known = self.known.entry(name.clone()).or_insert_with(|| Known {
                        record,
                        ..Known::default()
                    });
                    locks.push(snapshot(&name, &known.record, &known.queue, at));
                    // The snapshot shows a lease that ran out; streams that already follow
                    // the lock are told.
                    let ends = lease_ends(&known.record);
                    let told = follow_leases(&mut self.expiries, &name, known, ends, now, new);
                    let lock = &locks[locks.len() - 1];
                    ran_out.extend(told.into_iter().map(|token| (token, lock.clone())));
                }
                for (token, lock) in ran_out {
                    self.last = self.last.next(None);
                    let id = self.last;
                    self.send(StreamEvent {
                        id,
                        kind: EventType::Expired,
                        lock,
                        token,
                    });
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
    pub(super) async fn held_under(
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
                within: None,
            };
            self.reads.inc();
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
}
