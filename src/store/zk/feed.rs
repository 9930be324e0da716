//! The change feed on ZooKeeper: persistent recursive watches on the lock root and the
//! state root turn every change, made through any instance, into a [`Change`] naming the
//! lock whose record or queue changed.
//!
//! The watches are set only while the feed has subscribers, and dropped a moment after the
//! last one leaves: every watched change costs ZooKeeper a notification to this instance.
//! The watches follow the store's session: when it hands out a new one (the old expired, or
//! was given up while it lived on), they are set again on the new one.
//! Whenever the watches are (re)set (the first subscriber, a new session, a reconnect after
//! which ZooKeeper may not replay what happened meanwhile), the feed says `Resync` first,
//! so readers re-read what they know instead of trusting that nothing was missed.
//!
//! Keeps I14 (DESIGN.md, "Invariants"): `Resync` whenever the watches are set again.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::{broadcast, watch, Notify};
use tracing::debug;
use zookeeper_client as zk;

use crate::model::LockName;
use crate::store::{Change, FEED_CAPACITY};

/// Shared between the store (which hands out subscriptions) and the task that watches.
pub(super) struct Feed {
    sender: broadcast::Sender<Change>,
    wanted: Notify,
}

impl Feed {
    pub(super) fn start(
        clients: watch::Receiver<Option<zk::Client>>,
        lock_root: String,
        state_root: String,
    ) -> Arc<Feed> {
        let feed = Arc::new(Feed {
            sender: broadcast::channel(FEED_CAPACITY).0,
            wanted: Notify::new(),
        });
        let roots = Roots {
            locks: lock_root,
            state: state_root,
        };
        tokio::spawn(run(Arc::downgrade(&feed), clients, roots));
        feed
    }

    pub(super) fn subscribe(&self) -> broadcast::Receiver<Change> {
        let receiver = self.sender.subscribe();
        self.wanted.notify_one();
        receiver
    }
}

struct Roots {
    locks: String,
    state: String,
}

impl Roots {
    /// The lock a watched path belongs to: a record (or a container of nested names) under
    /// the lock root, or a queue (or a waiter in it) under the state root.
    fn lock_of(&self, path: &str) -> Option<LockName> {
        if let Some(name) = path
            .strip_prefix(&self.locks)
            .and_then(|p| p.strip_prefix('/'))
        {
            return LockName::parse(name).ok();
        }
        let queue = path.strip_prefix(&self.state)?.strip_prefix('/')?;
        let queue = queue.split('/').next()?;
        LockName::parse(&queue.replace('~', "/")).ok()
    }
}

/// How often an idle watch checks whether anybody still listens.
const IDLE_CHECK: Duration = Duration::from_secs(1);

async fn run(feed: Weak<Feed>, mut clients: watch::Receiver<Option<zk::Client>>, roots: Roots) {
    loop {
        // Wait for a subscriber (and stop once the store is gone).
        loop {
            let Some(strong) = feed.upgrade() else { return };
            if strong.sender.receiver_count() > 0 {
                break;
            }
            let _ = tokio::time::timeout(IDLE_CHECK, strong.wanted.notified()).await;
        }
        let Ok(client) = clients.wait_for(Option::is_some).await.map(|c| c.clone()) else {
            return;
        };
        let Some(client) = client else { continue };
        let mode = zk::AddWatchMode::PersistentRecursive;
        let (locks, state) = match (
            client.watch(&roots.locks, mode).await,
            client.watch(&roots.state, mode).await,
        ) {
            (Ok(locks), Ok(state)) => (locks, state),
            (locks, state) => {
                debug!(locks = ?locks.err(), state = ?state.err(), "cannot watch for changes; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        let session = client.session_id();
        if !forward(&feed, locks, state, session, &mut clients, &roots).await {
            return;
        }
    }
}

/// Forwards watched changes until the session ends, the store hands out another session's
/// client, or nobody listens; false once the store is gone. A session the store has given up
/// (its server answered no write) may live on for a while, but a server that applies no
/// writes reports no changes either: the watches must move to the new session at once.
async fn forward(
    feed: &Weak<Feed>,
    mut locks: zk::PersistentWatcher,
    mut state: zk::PersistentWatcher,
    session: zk::SessionId,
    clients: &mut watch::Receiver<Option<zk::Client>>,
    roots: &Roots,
) -> bool {
    let replaced = |current: &Option<zk::Client>| {
        current
            .as_ref()
            .is_some_and(|client| client.session_id() != session)
    };
    let send = |change: Change| match feed.upgrade() {
        Some(feed) => {
            let _ = feed.sender.send(change);
            feed.sender.receiver_count() > 0
        }
        None => false,
    };
    if !send(Change::Resync) {
        return feed.upgrade().is_some();
    }
    let mut disconnected = false;
    loop {
        let event = tokio::select! {
            event = locks.changed() => event,
            event = state.changed() => event,
            changed = clients.changed() => {
                if changed.is_err() {
                    return false;
                }
                if replaced(&clients.borrow_and_update()) {
                    return true;
                }
                continue;
            }
            _ = tokio::time::sleep(IDLE_CHECK) => {
                match feed.upgrade() {
                    Some(feed) if feed.sender.receiver_count() > 0 => continue,
                    Some(_) => return true,
                    None => return false,
                }
            }
        };
        let listening = match event.event_type {
            zk::EventType::Session => match event.session_state {
                zk::SessionState::Disconnected => {
                    disconnected = true;
                    true
                }
                zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly
                    if disconnected =>
                {
                    disconnected = false;
                    send(Change::Resync)
                }
                state if state.is_terminated() => return feed.upgrade().is_some(),
                _ => true,
            },
            _ => match roots.lock_of(&event.path) {
                Some(name) => send(Change::Lock(name)),
                None => true,
            },
        };
        if !listening {
            return feed.upgrade().is_some();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watched_paths_name_their_lock() {
        let roots = Roots {
            locks: "/lw/locks".into(),
            state: "/lw/state".into(),
        };
        let name = |s: &str| LockName::parse(s).ok();
        assert_eq!(roots.lock_of("/lw/locks/a/b"), name("a/b"));
        assert_eq!(roots.lock_of("/lw/state/a~b"), name("a/b"));
        assert_eq!(
            roots.lock_of("/lw/state/a~b/0000000001-k-0000000003"),
            name("a/b")
        );
        assert_eq!(roots.lock_of("/lw/locks"), None);
        assert_eq!(roots.lock_of("/lw/lockss/a"), None);
        assert_eq!(roots.lock_of("/other/a"), None);
    }
}
