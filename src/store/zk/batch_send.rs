//! Sending one shared `multi` of the write coalescer (`batch.rs`) and sharing its answer out:
//! the operations are staged and the request is in the session's ordered outbox before
//! `send` returns; a task awaits the answer and gives each write its own results, its own
//! failure, or a second try alone. Why each step keeps every guarantee is argued in
//! `batch.rs`.
//!
//! Keeps I1 (a write's answer is judged on the real state) and I10 (a caller that stops
//! waiting is never written for afterwards); see DESIGN.md, "Invariants".

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use zookeeper_client as zk;

use super::{pump, Committed, Entry, Shared};
use crate::store::zk::batch_plan::{judge, Verdict};

/// Stages `batch` into one `multi` and sends it before returning (see `batch.rs`); its
/// answer is awaited and shared out by a task.
pub(super) fn send(shared: &Arc<Shared>, runtime: &tokio::runtime::Handle, batch: Vec<Entry>) {
    let client = batch[0].client.clone();
    shared.metrics.record_writes(batch.len(), batch.len() > 1);
    let staging = shared.clone();
    let mut commit = Box::pin(async move {
        let mut writer = client.new_multi_writer();
        let staged = batch
            .iter()
            .try_for_each(|entry| entry.ops.stage(&mut writer, staging.access.acls()));
        let answer = match staged {
            Ok(()) => writer.commit().await,
            Err(source) => Err(zk::MultiWriteError::RequestFailed { source }),
        };
        (batch, answer)
    });
    // The first poll stages the operations and puts the request in the session's outbox;
    // the task then only waits for the answer (each poll registers its own waker).
    let early = match commit
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(done) => Some(done),
        Poll::Pending => None,
    };
    let shared = shared.clone();
    runtime.spawn(async move {
        let (batch, answer) = match early {
            Some(done) => done,
            None => commit.await,
        };
        share_out(&shared, batch, answer);
    });
}

/// Gives each write of a shared `multi` its answer, or sends it again (`batch.rs`).
fn share_out(shared: &Arc<Shared>, batch: Vec<Entry>, answer: Committed) {
    let mut again = Vec::new();
    match answer {
        Ok(results) => {
            let mut results = results.into_iter();
            for write in batch {
                let own = results.by_ref().take(write.plan.ops).collect();
                let _ = write.reply.send(Some(Ok(own)));
            }
        }
        Err(zk::MultiWriteError::OperationFailed { index, source }) => {
            let sizes: Vec<usize> = batch.iter().map(|w| w.plan.ops).collect();
            let verdict = judge(&sizes, index);
            for (at, mut write) in batch.into_iter().enumerate() {
                match verdict {
                    Some(Verdict::Answer {
                        write: failed,
                        index,
                    }) if failed == at => {
                        let failed = zk::MultiWriteError::OperationFailed {
                            index,
                            source: source.clone(),
                        };
                        let _ = write.reply.send(Some(Err(failed)));
                    }
                    // Nothing of the multi was applied: it goes out again, alone, so that
                    // no write is held back twice by others failing behind it.
                    Some(_) => {
                        write.plan.alone = true;
                        again.push(write);
                    }
                    // An index past the multi's operations: not knowing whose failure it
                    // is, every write reports the failure (its caller reads again).
                    None => {
                        let failed = zk::MultiWriteError::RequestFailed {
                            source: source.clone(),
                        };
                        let _ = write.reply.send(Some(Err(failed)));
                    }
                }
            }
        }
        Err(failed @ zk::MultiWriteError::RequestFailed { .. }) => {
            for write in batch {
                let _ = write.reply.send(Some(Err(failed.clone())));
            }
        }
    }
    let mut state = shared.lock();
    state.in_flight -= 1;
    // Under the lock: a caller that has gone by now is never written for (`batch.rs`).
    for entry in again.into_iter().rev() {
        if !entry.reply.is_closed() {
            state.queue.push_front(entry);
        }
    }
    pump(shared, &mut state);
}
