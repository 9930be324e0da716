//! The stand-in session: while the primary session is disconnected, a fresh session that
//! serves this instance's requests (never its waiter nodes). Why it keeps every guarantee is
//! argued in `session.rs`, which owns the primary; the supervisor (`supervisor.rs`) decides
//! when a stand-in runs.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tracing::info;
use zookeeper_client as zk;

use super::session::Shared;

/// How long one try to open a stand-in session may take, and the pause between tries.
const STAND_IN_TRY: Duration = Duration::from_millis(500);
const STAND_IN_PAUSE: Duration = Duration::from_millis(50);

/// While `primary` is disconnected: opens a fresh session (see the module doc), offers it as
/// the stand-in, and withdraws it (closing its session) once the primary is connected again
/// or has ended.
pub(super) async fn serve_while_disconnected(
    shared: Arc<Shared>,
    primary: zk::Client,
    mut stopped: watch::Receiver<bool>,
) {
    let mut states = primary.state_watcher();
    let back = async move {
        while states.state() == zk::SessionState::Disconnected {
            states.changed().await;
        }
    };
    tokio::pin!(back);
    let stand_in = loop {
        let attempt = async {
            let client = shared.open().await.ok()?;
            client.sync("/").await.ok()?;
            Some(client)
        };
        tokio::select! {
            _ = &mut back => return,
            _ = stopped.changed() => return,
            opened = tokio::time::timeout(STAND_IN_TRY, attempt) => {
                if let Ok(Some(client)) = opened {
                    break client;
                }
            }
        }
        tokio::select! {
            _ = &mut back => return,
            _ = stopped.changed() => return,
            _ = tokio::time::sleep(STAND_IN_PAUSE) => {}
        }
    };
    info!(session = %stand_in.session_id(), primary = %primary.session_id(),
        "the ZooKeeper session is disconnected; a stand-in session serves meanwhile");
    shared.stand_in.send_replace(Some(stand_in));
    shared.metrics.stand_in(true);
    tokio::select! {
        _ = &mut back => {}
        _ = stopped.changed() => {}
    }
    shared.stand_in.send_replace(None);
    shared.metrics.stand_in(false);
    info!(primary = %primary.session_id(), state = ?primary.state(),
        "the stand-in ZooKeeper session is closed");
}
