//! What a simulated client does: acquires (waiting or not, at several priorities, some with
//! a `request_id` it retries after an unknown outcome), renews, releases, validates, lets a
//! lease run out, force-releases now and then, and sometimes gives up on a call midway, as
//! a client that vanishes does. The first lock is an election's (strict renewals), the
//! third a semaphore's (`SEMAPHORE`).

use std::sync::Arc;
use std::time::Duration;

use crate::common::history::{Call, Op};
use crate::driver::{Caller, Ctx};

/// A lease this client holds: its lock, lease id and token.
struct Held {
    lock: usize,
    lease: String,
    token: u64,
}

pub async fn client(ctx: Arc<Ctx>, client: usize, rng: fastrand::Rng, ops: usize) -> Vec<Op> {
    let mut me = Caller::new(ctx, client, rng);
    let mut done: Vec<Op> = Vec::new();
    let mut held: Option<Held> = None;
    let mut tokens: Vec<(usize, u64)> = Vec::new();
    for n in 0..ops {
        let pause = me.rng.u64(0..300);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let instance = me.rng.usize(..me.instances());
        let roll = me.rng.u32(0..100);
        match (&held, roll) {
            (Some(h), 0..=44) => {
                let lease_ms = me.rng.bool().then(|| me.rng.u64(200..1500));
                // The first lock is an election's: its renewals are strict (I17).
                let call = Call::Renew {
                    lease_id: h.lease.clone(),
                    lease_ms,
                    strict: h.lock == 0,
                };
                let patience = patience(&mut me, None);
                let op = me.call(instance, h.lock, call, patience).await;
                if op.outcome.status == Some(409) {
                    held = None;
                }
                done.push(op);
            }
            (Some(h), 45..=74) => {
                let call = Call::release(&h.lease);
                let patience = patience(&mut me, None);
                done.push(me.call(instance, h.lock, call, patience).await);
                held = None;
            }
            (Some(h), 75..=84) => {
                let patience = patience(&mut me, None);
                let op = me.call(instance, h.lock, Call::validate(h.token), patience);
                done.push(op.await);
            }
            // The client forgets its lease, which runs out.
            (Some(_), _) => held = None,
            (None, 0..=84) => {
                let lock = me.rng.usize(..me.locks());
                let call = acquire(&mut me, client, n, lock);
                let patience = patience(&mut me, waiting_of(&call));
                let mut op = me.call(instance, lock, call.clone(), patience).await;
                let retry = matches!(
                    &call,
                    Call::Acquire {
                        request_id: Some(_),
                        ..
                    }
                );
                if op.outcome.is_unknown() && retry {
                    done.push(op);
                    let instance = me.rng.usize(..me.instances());
                    let patience = patience_for(waiting_of(&call));
                    op = me.call(instance, lock, call, patience).await;
                }
                if op.outcome.is_ok() {
                    let token = op.outcome.fencing_token.unwrap_or(0);
                    tokens.push((lock, token));
                    held = Some(Held {
                        lock,
                        lease: op.outcome.lease_id.clone().unwrap_or_default(),
                        token,
                    });
                }
                done.push(op);
            }
            (None, 85..=96) if !tokens.is_empty() => {
                let (lock, token) = tokens[me.rng.usize(..tokens.len())];
                let patience = patience(&mut me, None);
                done.push(
                    me.call(instance, lock, Call::validate(token), patience)
                        .await,
                );
            }
            (None, _) => {
                let lock = me.rng.usize(..me.locks());
                let patience = patience(&mut me, None);
                done.push(me.call(instance, lock, Call::ForceRelease, patience).await);
            }
        }
    }
    if let Some(h) = held {
        let instance = me.rng.usize(..me.instances());
        let patience = patience_for(None);
        done.push(
            me.call(instance, h.lock, Call::release(&h.lease), patience)
                .await,
        );
    }
    done
}

/// The lock a simulation keeps as a semaphore, and its limit.
pub const SEMAPHORE: (usize, u32) = (2, 2);

fn acquire(me: &mut Caller, client: usize, n: usize, lock: usize) -> Call {
    let rng = &mut me.rng;
    let priority = if rng.u32(0..100) < 60 {
        0
    } else {
        rng.u32(1..4)
    };
    Call::Acquire {
        owner: format!("c{client}"),
        priority,
        lease_ms: rng.u64(200..1500),
        waiting_ms: (rng.u32(0..100) < 60).then(|| rng.u64(0..1500)),
        forceful: rng.u32(0..100) < 10,
        cleanup_ms: if rng.bool() { 0 } else { rng.u64(50..300) },
        request_id: (rng.u32(0..100) < 30).then(|| format!("c{client}-r{n}")),
        lease_id: None,
        limit: (lock == SEMAPHORE.0).then_some(SEMAPHORE.1),
    }
}

fn waiting_of(call: &Call) -> Option<u64> {
    match call {
        Call::Acquire { waiting_ms, .. } => *waiting_ms,
        _ => None,
    }
}

/// How long the client waits for an answer: long enough for any, or, now and then, a
/// moment before it vanishes.
fn patience(me: &mut Caller, waiting_ms: Option<u64>) -> Duration {
    if me.rng.u32(0..100) < 5 {
        return Duration::from_millis(me.rng.u64(0..300));
    }
    patience_for(waiting_ms)
}

fn patience_for(waiting_ms: Option<u64>) -> Duration {
    Duration::from_millis(waiting_ms.unwrap_or(0) + 10_000)
}
