//! Owns the ZooKeeper session: connects, notices a dead session, and builds a new one.
//!
//! A `zookeeper_client::Client` whose session expired never recovers, so a supervisor task
//! watches the session state and replaces the client. Callers take a cheap clone of the
//! current client per request; while there is none, the store is unavailable. Dropping the
//! [`ZkSession`] stops the supervisor and closes the session. The supervisor also keeps the
//! session-state gauge of `/metrics`, since it sees every change of state.
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
//! **The server that answers no write.** A server can keep a session's connection alive (it
//! answers the client's pings and reads, so zookeeper-client never calls it disconnected)
//! while it answers no write, as a server that was the leader, was paused past the session
//! timeout and came back can do (RELIABILITY.md). Every write of the instance then times
//! out, and nothing above would ever move it off that server. So a request that times out
//! on a connected primary (`report_stall`) makes the supervisor probe it with a write that
//! changes nothing: a `multi` holding one version check of the root, with any version. Like
//! every write it goes through the leader and is logged by a quorum (a `sync` would go
//! through the leader only, so a server that answered syncs but not writes would pass it).
//! If that gets no answer within a whole session timeout (a server merely slow under load
//! has that long, the time ZooKeeper itself gives a silent client) and the session is still
//! connected, the supervisor gives up on the session and builds a new one, as for an
//! expired session (`lockwarden_zookeeper_session_probes_total` counts the outcomes). One
//! probe at a time, and only after a request timed out. What that keeps:
//! - **Safety needs nothing new.** Every write stays conditional; a write sent on the
//!   abandoned session whose answer never came is an unknown outcome, as after any timeout.
//! - **Waiters keep their places.** Their nodes belong to the abandoned session and stay
//!   while it lives on (zookeeper-client keeps its connection until its unanswered requests
//!   are answered, so it ends only when the server answers or stops answering pings). The
//!   waiting calls of this instance wake when the primary changes (`ZkStore::wait_for_change`:
//!   a watch on the abandoned session may never fire) and decide again on the new session,
//!   still queued; once the old session ends, its nodes go, and the queue moves past a caller
//!   that has gone by the usual hand-off and lease rules.
//! - **The write window of `--gc-delay-ms`** assumes a request is applied, if ever, within
//!   2 store timeouts + 1.5 session timeouts of being sent. A stalled server may apply one
//!   later whether or not the session is abandoned; abandoning it cannot make that worse, and
//!   it stops new requests from joining that backlog.
//!
//! **The server whose copy contradicts the leader's.** The store notices a server that
//! shows a record in a state the leader has refused a write on (`contradiction.rs`) and
//! reports it (`report_contradiction`); the supervisor then gives the primary up as above.
//!
//! Keeps I8 (a session replaced, bridged or given up) and I12 (waiter nodes only on the primary
//! session); see DESIGN.md, "Invariants".

use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use tokio::sync::{watch, Notify};
use tracing::{info, warn};
use zookeeper_client as zk;

use super::access::ZkAccess;
use super::stand_in;
use crate::metrics::zookeeper::{ProbeOutcome, SessionState, ZkMetrics};

pub struct ZkSession {
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
}

pub(super) struct Shared {
    current: watch::Sender<Option<zk::Client>>,
    /// A fresh session that serves while `current` is disconnected (see the module doc).
    pub(super) stand_in: watch::Sender<Option<zk::Client>>,
    connect: String,
    session_timeout: Duration,
    access: ZkAccess,
    suspect: Notify,
    /// A request on a connected session got no answer in time (`report_stall`).
    stall: Notify,
    /// The session whose server's copy contradicted the leader's (`report_contradiction`).
    contradicted: std::sync::Mutex<Option<i64>>,
    contradiction: Notify,
    pub(super) metrics: ZkMetrics,
}

impl Shared {
    fn set(&self, client: Option<zk::Client>) {
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
    pub fn primary_id(&self) -> Option<i64> {
        self.shared
            .current
            .borrow()
            .as_ref()
            .map(|primary| primary.session_id().0)
    }

    /// Whether session `id` is the primary and connected. A replaced primary never comes
    /// back (every new session has a new id), so a session that is primary both before and
    /// after something happened was primary throughout, and connected now means it has not
    /// expired: its ephemeral nodes are all still there unless a write removed them.
    pub fn primary_alive(&self, id: i64) -> bool {
        self.shared
            .current
            .borrow()
            .as_ref()
            .is_some_and(|primary| {
                primary.session_id().0 == id && primary.state() == zk::SessionState::SyncConnected
            })
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
    /// connected primary, and replaces it if it answers nothing (see the module doc).
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

async fn supervise(shared: Arc<Shared>, mut stopped: watch::Receiver<bool>) {
    let mut backoff = Duration::from_millis(50);
    while !*stopped.borrow() {
        shared.metrics.session(SessionState::Connecting);
        let attempt = shared.open();
        let client = tokio::select! {
            _ = stopped.changed() => return,
            connected = tokio::time::timeout(shared.session_timeout, attempt) => match connected {
                Ok(Ok(client)) => client,
                failed => {
                    let error = failed.map_or("timed out".to_string(), |r| format!("{:?}", r.err()));
                    warn!(%error, "cannot connect to ZooKeeper; retrying");
                    tokio::select! {
                        _ = stopped.changed() => return,
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                    continue;
                }
            }
        };
        backoff = Duration::from_millis(50);
        info!(session = %client.session_id(), "connected to ZooKeeper");
        let mut states = client.state_watcher();
        shared.set(Some(client.clone()));
        shared.metrics.session(gauged(client.state()));
        let mut stand_in: Option<tokio::task::JoinHandle<()>> = None;
        let mut probe: Option<tokio::task::JoinHandle<bool>> = None;
        while !client.state().is_terminated() {
            tokio::select! {
                _ = stopped.changed() => return,
                _ = shared.stall.notified(), if probe.is_none() => {
                    if client.state() == zk::SessionState::SyncConnected {
                        let probed = answers_within(client.clone(), shared.session_timeout);
                        probe = Some(tokio::spawn(probed));
                    }
                },
                answered = async { probe.as_mut().expect("a probe").await }, if probe.is_some() => {
                    probe = None;
                    let outcome = match answered {
                        Ok(true) => ProbeOutcome::Answered,
                        _ if client.state() == zk::SessionState::SyncConnected => ProbeOutcome::Abandoned,
                        _ => ProbeOutcome::Disconnected,
                    };
                    shared.metrics.session_probed(outcome);
                    if outcome == ProbeOutcome::Abandoned {
                        warn!(session = %client.session_id(),
                            "the ZooKeeper server keeps this session alive but answers none of its writes; giving the session up");
                        break;
                    }
                },
                _ = shared.contradiction.notified() => {
                    let id = shared.contradicted.lock().unwrap_or_else(|e| e.into_inner()).take();
                    if id == Some(client.session_id().0) {
                        shared.metrics.contradicting_copy();
                        warn!(session = %client.session_id(),
                            "the ZooKeeper server's copy of a record contradicts the leader's; giving the session up");
                        break;
                    }
                },
                state = states.changed() => {
                    if state.is_terminated() {
                        break;
                    }
                    shared.metrics.session(gauged(state));
                    let idle = stand_in.as_ref().is_none_or(|task| task.is_finished());
                    if state == zk::SessionState::Disconnected && idle {
                        let task = stand_in::serve_while_disconnected(
                            shared.clone(),
                            client.clone(),
                            stopped.clone(),
                        );
                        stand_in = Some(tokio::spawn(task));
                    }
                },
                _ = shared.suspect.notified() => {}
            }
        }
        if let Some(task) = stand_in {
            task.abort();
        }
        if let Some(task) = probe {
            task.abort();
        }
        shared.stand_in.send_replace(None);
        shared.metrics.stand_in(false);
        warn!(session = %client.session_id(), state = ?client.state(),
            "ZooKeeper session ended; building a new one");
        shared.set(None);
    }
}

/// Whether the session's server answers a write within `within`: a `multi` that only checks
/// the root's version (any version, so it changes nothing). Any answer counts, an error too
/// (a root this session may not read, say): the server is not stalled.
async fn answers_within(client: zk::Client, within: Duration) -> bool {
    const ANY_VERSION: i32 = -1;
    let mut probe = client.new_multi_writer();
    if probe.add_check_version("/", ANY_VERSION).is_err() {
        return true;
    }
    tokio::time::timeout(within, probe.commit()).await.is_ok()
}

/// The state `/metrics` shows for a live session's client state. A terminated session is
/// about to be replaced, which the supervisor shows as `connecting`.
fn gauged(state: zk::SessionState) -> SessionState {
    match state {
        zk::SessionState::SyncConnected => SessionState::Connected,
        zk::SessionState::ConnectedReadOnly => SessionState::ReadOnly,
        zk::SessionState::Disconnected => SessionState::Disconnected,
        _ => SessionState::Connecting,
    }
}
