//! The write coalescer: record writes of concurrent requests share one ZooKeeper `multi`
//! when this instance already has `limit` record writes waiting for ZooKeeper.
//!
//! **Why.** ZooKeeper pays most of a transaction's cost per request, not per operation:
//! proposing it, logging it, committing it and answering it. So the same record writes cost
//! the server much less CPU in shared `multi`s than in separate ones
//! (BENCHMARKS.md, "Shared multis"; `lockwarden bench --scenarios shapes` measures it). A
//! write that finds a free slot goes out at once and alone, as with the coalescer off, so a
//! lone caller waits for nothing; only writes that would queue in ZooKeeper behind others
//! wait here instead, and go out together when a slot frees.
//!
//! **Why every guarantee holds.**
//! - *Each write keeps its own conditions.* A write's operations are staged contiguously and
//!   unchanged (still conditional, still at the version read, still the even-version rule of
//!   `ops.rs`). A shared `multi` applies all of them in order, atomically, or none: when it
//!   succeeds, the result is exactly what the same writes sent one after another on the
//!   session would have given in that order, with nothing in between, which is one of the
//!   outcomes those concurrent requests could have had anyway.
//! - *A failure is only reported when it was judged on the real state.* When a shared
//!   `multi` fails, nothing of it was applied. ZooKeeper names the first failing operation.
//!   If it belongs to the first write, that write was judged on the state before the
//!   `multi`, as if alone: its failure (a conflict, usually) is its answer. A later write
//!   may have failed only because of the writes staged before it, which never happened.
//!   So every write but an answered first one goes out again, each in a `multi` of its own,
//!   where its answer is its own: a write shares at most one failed `multi`, and no write is
//!   held back twice by others failing behind it.
//! - *Writes stay on the session of their read* (`client_for`): a `multi` carries writes of
//!   one session only, and goes out on that session's client. A hand-off's carried waiter
//!   creates are staged only for the primary session (`handoff.rs`), and stay on it.
//! - *A write that waited goes out only on a session that still serves*
//!   (`ZkSession::serves`): connected, and the one `ZkSession::client` hands out now. A
//!   write planned on a session that has since disconnected, or been replaced by the
//!   stand-in or by the primary again, is not sent, and its caller is told so (a conflict:
//!   it reads again and plans on the serving session). Otherwise it could sit in a
//!   disconnected session's outbox, reach ZooKeeper after its caller had given up and read
//!   the outcome on another session, and land unseen.
//! - *A caller that stops waiting is never written for afterwards.* Sending a shared
//!   `multi` and withdrawing a queued write happen under the same lock, and the send is done
//!   (the request is in the session's ordered outbox) before the lock is released. So a
//!   caller whose deadline passed, or whose request was dropped, either withdraws its write
//!   unsent, or it was sent before anything the caller sends next, such as the read that
//!   settles a lost answer (`service::outcome`), which ZooKeeper answers after it. A write
//!   that must go out again after a failed `multi` does not, once its caller has gone.
//!
//! Keeps I1 (each write keeps its own conditions and session) and I10 (a caller that stops waiting
//! is never written for afterwards); see DESIGN.md, "Invariants".

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;
use zookeeper_client as zk;

use super::access::ZkAccess;
use super::batch_plan::{node_key, pick, Candidate};
use super::ops::Ops;
use crate::metrics::zookeeper::ZkMetrics;
use send::send;

#[path = "batch_send.rs"]
mod send;

/// What ZooKeeper answered to one write: its own results, or its own failure (an index
/// into its own operations).
pub(crate) type Committed = Result<Vec<zk::MultiWriteResult>, zk::MultiWriteError>;

/// Whether a client's session still serves this instance's writes (`ZkSession::serves`).
pub(crate) type Serves = Arc<dyn Fn(&zk::Client) -> bool + Send + Sync>;

pub(crate) struct Coalescer {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    /// Record writes in flight before others wait to share a `multi`; 0 never shares.
    limit: usize,
    serves: Serves,
    access: ZkAccess,
    metrics: ZkMetrics,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Entry>,
    in_flight: usize,
    next_id: u64,
}

struct Entry {
    id: u64,
    client: zk::Client,
    ops: Ops,
    /// What `pick` looks at, worked out once when the write is queued.
    plan: Candidate,
    reply: oneshot::Sender<Option<Committed>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Coalescer {
    pub(crate) fn new(
        limit: usize,
        serves: Serves,
        access: ZkAccess,
        metrics: ZkMetrics,
    ) -> Coalescer {
        Coalescer {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                limit,
                serves,
                access,
                metrics,
            }),
        }
    }

    /// Commits `ops` on `client`'s session: at once and alone while a slot is free, else in
    /// the next shared `multi`. `Ok(None)` when nothing was sent because the session no
    /// longer serves (module doc); `Err` when the operations cannot be staged.
    pub(crate) async fn commit(
        &self,
        client: &zk::Client,
        ops: Ops,
    ) -> Result<Option<Committed>, zk::Error> {
        let shared = &self.shared;
        let mut writer = client.new_multi_writer();
        ops.stage(&mut writer, shared.access.acls())?;
        if shared.limit == 0 {
            shared.metrics.record_writes(1, false);
            return Ok(Some(writer.commit().await));
        }
        let queued = {
            let mut state = shared.lock();
            if state.queue.is_empty() && state.in_flight < shared.limit {
                state.in_flight += 1;
                None
            } else {
                let (reply, answer) = oneshot::channel();
                let id = state.next_id;
                state.next_id += 1;
                let plan = Candidate {
                    session: client.session_id().0,
                    ops: ops.len(),
                    bytes: ops.bytes(),
                    alone: false,
                    nodes: ops.paths().map(node_key).collect(),
                };
                state.queue.push_back(Entry {
                    id,
                    client: client.clone(),
                    ops,
                    plan,
                    reply,
                });
                pump(shared, &mut state);
                Some(Waiting {
                    shared: shared.clone(),
                    id,
                    answer,
                })
            }
        };
        match queued {
            None => {
                let _slot = Slot(shared);
                shared.metrics.record_writes(1, false);
                Ok(Some(writer.commit().await))
            }
            Some(mut waiting) => {
                let gone = Err(zk::MultiWriteError::RequestFailed {
                    source: zk::Error::ClientClosed,
                });
                Ok((&mut waiting.answer).await.unwrap_or(Some(gone)))
            }
        }
    }
}

/// A write sent alone holds a slot until it is answered or its caller stops waiting.
struct Slot<'a>(&'a Arc<Shared>);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.in_flight -= 1;
        pump(self.0, &mut state);
    }
}

/// A queued write's caller. Dropping it (answered, deadline passed, request dropped)
/// withdraws the write if it has not been sent; see the module doc for why the order of
/// the two steps matters.
struct Waiting {
    shared: Arc<Shared>,
    id: u64,
    answer: oneshot::Receiver<Option<Committed>>,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.answer.close();
        let mut state = self.shared.lock();
        if let Some(at) = state.queue.iter().position(|e| e.id == self.id) {
            state.queue.remove(at);
            self.shared.metrics.writes_waiting(state.queue.len());
        }
    }
}

/// Sends shared `multi`s while slots are free, and updates the gauge of waiting writes.
/// Called with the state locked.
fn pump(shared: &Arc<Shared>, state: &mut State) {
    // Outside a runtime (a caller dropped while everything shuts down) no answer could be
    // awaited: nothing is sent, and the waiting writes are withdrawn as their callers go.
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        send_while_free(shared, state, &runtime);
    }
    shared.metrics.writes_waiting(state.queue.len());
}

fn send_while_free(shared: &Arc<Shared>, state: &mut State, runtime: &tokio::runtime::Handle) {
    while state.in_flight < shared.limit {
        // A write planned on a session that no longer serves (disconnected, or replaced by
        // the stand-in or the primary) is not sent: nothing after its caller's next
        // request on the serving session would be ordered behind it (module doc).
        let queue = std::mem::take(&mut state.queue);
        for entry in queue {
            if entry.reply.is_closed() {
                continue;
            }
            if (shared.serves)(&entry.client) {
                state.queue.push_back(entry);
            } else {
                let _ = entry.reply.send(None);
            }
        }
        let candidates: Vec<&Candidate> = state.queue.iter().map(|e| &e.plan).collect();
        let picked = pick(&candidates);
        if picked.is_empty() {
            return;
        }
        // Removed from the back first, so the indices of the rest stay valid.
        let mut batch: Vec<Entry> = picked
            .iter()
            .rev()
            .filter_map(|&at| state.queue.remove(at))
            .collect();
        batch.reverse();
        state.in_flight += 1;
        send(shared, runtime, batch);
    }
}
