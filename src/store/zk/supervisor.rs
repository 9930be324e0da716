//! The session supervisor: connects, notices a dead or useless session, and builds a new
//! one; while the primary is disconnected it runs the stand-in (`stand_in.rs`), whose
//! argument is in `session.rs`. It also keeps the session-state gauge of `/metrics`, since it
//! sees every change of state.
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
//! Keeps I8 (a session replaced, bridged or given up); see DESIGN.md, "Invariants".

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tracing::{info, warn};
use zookeeper_client as zk;

use super::session::Shared;
use super::stand_in;
use crate::metrics::zookeeper::{ProbeOutcome, SessionState};

/// Until `stopped`: opens a session, serves it while it lives (probing it on a stall, running
/// a stand-in while it is disconnected), and gives it up as the module doc says.
pub(super) async fn supervise(shared: Arc<Shared>, mut stopped: watch::Receiver<bool>) {
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
