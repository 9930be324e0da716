//! Owns the ZooKeeper session: connects, notices a dead session, and builds a new one.
//!
//! A `zookeeper_client::Client` whose session expired never recovers, so a supervisor task
//! watches the session state and replaces the client. Callers take a cheap clone of the
//! current client per request; while there is none, the store is unavailable. Dropping the
//! [`ZkSession`] stops the supervisor and closes the session. The supervisor also keeps the
//! session-state gauge of `/metrics`, since it sees every change of state.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{watch, Notify};
use tracing::{info, warn};
use zookeeper_client as zk;

use super::access::ZkAccess;
use crate::metrics::zookeeper::{SessionState, ZkMetrics};

pub struct ZkSession {
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
}

struct Shared {
    current: watch::Sender<Option<zk::Client>>,
    connect: String,
    session_timeout: Duration,
    access: ZkAccess,
    suspect: Notify,
    metrics: ZkMetrics,
}

impl Shared {
    fn set(&self, client: Option<zk::Client>) {
        self.current.send_replace(client);
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
            connect,
            session_timeout,
            access,
            suspect: Notify::new(),
            metrics,
        });
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(supervise(shared.clone(), stopped));
        ZkSession { shared, stop }
    }

    /// The live client; while a session is being (re)built, waits for it until `deadline`.
    pub async fn client(&self, deadline: Instant) -> Option<zk::Client> {
        let mut current = self.shared.current.subscribe();
        let ready = current.wait_for(Option::is_some);
        let client = match tokio::time::timeout_at(deadline.into(), ready).await {
            Ok(Ok(client)) => client.clone(),
            _ => None,
        };
        client
    }

    /// The live client as it changes (`None` while a session is being built).
    pub(super) fn clients(&self) -> watch::Receiver<Option<zk::Client>> {
        self.shared.current.subscribe()
    }

    /// Called when a request saw a session-level error: the supervisor re-checks the state.
    pub fn report_trouble(&self) {
        self.shared.suspect.notify_one();
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
        let connector = zk::Client::connector()
            .with_session_timeout(shared.session_timeout)
            .with_fail_eagerly();
        let attempt = shared
            .access
            .authenticate(connector)
            .connect(&shared.connect);
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
        while !client.state().is_terminated() {
            tokio::select! {
                _ = stopped.changed() => return,
                state = states.changed() => {
                    if state.is_terminated() { break }
                    shared.metrics.session(gauged(state));
                }
                _ = shared.suspect.notified() => {}
            }
        }
        warn!(session = %client.session_id(), state = ?client.state(),
            "ZooKeeper session ended; building a new one");
        shared.set(None);
    }
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
