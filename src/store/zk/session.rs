//! Owns the ZooKeeper session's identity: which client is the primary, which the stand-in,
//! and which of them a request gets.
//!
//! A `zookeeper_client::Client` whose session expired never recovers, so a supervisor task
//! (`supervisor.rs`) watches the session state and replaces the client. Callers take a cheap
//! clone of the current client per request; while there is none, the store is unavailable.
//! Requests report what they saw go wrong (`report_trouble`, `report_stall`,
//! `report_contradiction`) and the supervisor acts on it. Dropping the [`ZkSession`] stops
//! the supervisor and closes the session.
//!
//! **The stand-in.** When the primary session's connection drops (its server died or left
//! the quorum during a leader election), zookeeper-client resumes the session on its own
//! schedule: every server once at once, then again after 300–400 ms, then after 600–700 ms
//! more. An election that ends just after the second round leaves the instance without
//! ZooKeeper for over a second, longer than a 1 s lease. So while the primary is
//! disconnected, the supervisor also tries to open a *fresh* session every
//! `STAND_IN_PAUSE` (each try asks every server once, at once; `stand_in.rs`), and once one
//! is open, caught up (`sync`) and the primary still disconnected, [`ZkSession::client`]
//! hands it out. When the primary is back (or gone for good), the stand-in is dropped, which
//! closes its session.
//! Why this keeps every guarantee:
//! - **It never owns an ephemeral node.** Waiter nodes are created only through
//!   [`ZkSession::primary`], so a waiter's place lives and dies with the primary session,
//!   as without a stand-in; the stand-in's end deletes nothing.
//! - **Writes stay conditional and on the session of their read** (`client_for` in
//!   `write.rs`): a write planned on a record read through the stand-in goes out on the
//!   stand-in or not at all, and one planned on the primary waits for the primary. Two
//!   sessions change nothing about which conditional write lands.
//! - **It reads nothing older than the primary saw.** Its first request is a `sync`, so the
//!   server it reached has applied every write committed before the outage, and a session
//!   never reads backwards after that.
//!
//! Keeps I8 (a disconnection bridged by the stand-in) and I12 (waiter nodes only on the
//! primary session); see DESIGN.md, "Invariants".

use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use tokio::sync::{watch, Notify};
use zookeeper_client as zk;

use super::access::ZkAccess;
use super::supervisor::supervise;
use crate::metrics::zookeeper::ZkMetrics;

pub struct ZkSession {
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
}

pub(super) struct Shared {
    current: watch::Sender<Option<zk::Client>>,
    /// A fresh session that serves while `current` is disconnected (see the module doc).
    pub(super) stand_in: watch::Sender<Option<zk::Client>>,
    connect: String,
    pub(super) session_timeout: Duration,
    access: ZkAccess,
    /// A request saw a session-level error (`report_trouble`).
    pub(super) suspect: Notify,
    /// A request on a connected session got no answer in time (`report_stall`).
    pub(super) stall: Notify,
    /// The session whose server's copy contradicted the leader's (`report_contradiction`).
    pub(super) contradicted: std::sync::Mutex<Option<i64>>,
    pub(super) contradiction: Notify,
    pub(super) metrics: ZkMetrics,
}

impl Shared {
    pub(super) fn set(&self, client: Option<zk::Client>) {
        self.current.send_replace(client);
    }

    /// Opens a new session: every server tried once, at once, before giving up.
    pub(super) async fn open(&self) -> Result<zk::Client, zk::Error> {
        let connector = zk::Client::connector()
            .with_session_timeout(self.session_timeout)
            .with_fail_eagerly();
        self.access
            .authenticate(connector)
            .connect(&self.connect)
            .await
    }
}

impl ZkSession {
    /// Starts the supervisor. The first connection is made in the background, so the service
    /// can start (and answer 503) while ZooKeeper is down.
    pub fn start(
        connect: String,
        session_timeout: Duration,
        access: ZkAccess,
        metrics: ZkMetrics,
    ) -> Self {
        let shared = Arc::new(Shared {
            current: watch::Sender::new(None),
            stand_in: watch::Sender::new(None),
            connect,
            session_timeout,
            access,
            suspect: Notify::new(),
            stall: Notify::new(),
            contradicted: std::sync::Mutex::new(None),
            contradiction: Notify::new(),
            metrics,
        });
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(supervise(shared.clone(), stopped));
        ZkSession { shared, stop }
    }

    /// The client for a request: the primary session's, or the stand-in's while the primary
    /// is disconnected and a stand-in is connected. Never for creating an ephemeral node.
    /// While neither is connected, waits (until `deadline`) for whichever comes first, so
    /// that a request is not parked on a connection that a stand-in may overtake.
    pub async fn client(&self, deadline: Instant) -> Option<zk::Client> {
        let primary = self.primary(deadline).await?;
        if primary.state() != zk::SessionState::Disconnected {
            return Some(primary);
        }
        let mut stand_ins = self.shared.stand_in.subscribe();
        let mut states = primary.state_watcher();
        let usable = async {
            loop {
                let stand_in = stand_ins.borrow_and_update().clone();
                if let Some(stand_in) =
                    stand_in.filter(|s| s.state() == zk::SessionState::SyncConnected)
                {
                    return stand_in;
                }
                if states.peek_state() != zk::SessionState::Disconnected {
                    return primary.clone();
                }
                tokio::select! {
                    _ = stand_ins.changed() => {}
                    _ = states.changed() => {}
                }
            }
        };
        tokio::time::timeout_at(deadline, usable).await.ok()
    }

    /// The primary session's client, for what must live and die with it (waiter nodes);
    /// while a session is being (re)built, waits for it until `deadline`.
    pub async fn primary(&self, deadline: Instant) -> Option<zk::Client> {
        self.primary_and_changes(deadline)
            .await
            .map(|(client, _)| client)
    }

    /// The primary session's client, as [`ZkSession::primary`] gives it, and a receiver
    /// whose `changed` fires once the primary is no longer that one (given up, expired,
    /// replaced).
    pub(super) async fn primary_and_changes(
        &self,
        deadline: Instant,
    ) -> Option<(zk::Client, watch::Receiver<Option<zk::Client>>)> {
        let mut current = self.shared.current.subscribe();
        let ready = current.wait_for(Option::is_some);
        let client = match tokio::time::timeout_at(deadline, ready).await {
            Ok(Ok(client)) => client.clone()?,
            _ => return None,
        };
        Some((client, current))
    }

    /// Whether a client's session still serves this instance's requests: connected, and
    /// either the primary's or the stand-in's while the primary is disconnected, as
    /// [`ZkSession::client`] would hand out now. The write coalescer asks this before it
    /// sends a write that has waited.
    pub fn serves(&self) -> impl Fn(&zk::Client) -> bool + Send + Sync + 'static {
        let shared = self.shared.clone();
        move |client: &zk::Client| {
            if client.state() != zk::SessionState::SyncConnected {
                return false;
            }
            let id = client.session_id().0;
            let current = shared.current.borrow();
            let Some(primary) = current.as_ref() else {
                return false;
            };
            if primary.session_id().0 == id {
                return true;
            }
            primary.state() == zk::SessionState::Disconnected
                && shared
                    .stand_in
                    .borrow()
                    .as_ref()
                    .is_some_and(|stand_in| stand_in.session_id().0 == id)
        }
    }

    /// Whether `client` is the primary session's, the one waiter nodes must be made on.
    pub fn is_primary(&self, client: &zk::Client) -> bool {
        self.shared
            .current
            .borrow()
            .as_ref()
            .is_some_and(|primary| primary.session_id().0 == client.session_id().0)
    }

    /// The primary session's id, if there is a primary (connected or not).
    /// The primary session's id while it is connected. A replaced primary never comes back
    /// (every new session has a new id), so a session that is this both before and after
    /// something happened was primary throughout, and connected now means it has not
    /// expired: its ephemeral nodes are all still there unless a write removed them.
    pub fn primary_alive_id(&self) -> Option<i64> {
        self.shared
            .current
            .borrow()
            .as_ref()
            .filter(|primary| primary.state() == zk::SessionState::SyncConnected)
            .map(|primary| primary.session_id().0)
    }

    /// The live client as it changes (`None` while a session is being built).
    pub(super) fn clients(&self) -> watch::Receiver<Option<zk::Client>> {
        self.shared.current.subscribe()
    }

    /// Called when a request saw a session-level error: the supervisor re-checks the state.
    pub fn report_trouble(&self) {
        self.shared.suspect.notify_one();
    }

    /// Called when the server of session `id` showed a record in a state the leader had
    /// refused a write on, twice running (`contradiction.rs`): if `id` is still the primary,
    /// the supervisor gives it up and builds a new session.
    pub fn report_contradiction(&self, id: i64) {
        *self
            .shared
            .contradicted
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(id);
        self.shared.contradiction.notify_one();
    }

    /// Called when a request got no answer within its deadline: the supervisor probes a
    /// connected primary, and replaces it if it answers nothing (see `supervisor.rs`).
    pub fn report_stall(&self) {
        self.shared.stall.notify_one();
    }

    pub fn session_timeout(&self) -> Duration {
        self.shared.session_timeout
    }
}

impl Drop for ZkSession {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        self.shared.set(None);
    }
}
