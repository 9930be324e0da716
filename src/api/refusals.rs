//! What each refusal says, by the kind of resource refused: its stable code and its
//! message (a lock's `lock_held` is an election's `leader_exists` and a semaphore's
//! `semaphore_full`). `error.rs` maps them to HTTP.

use super::error::ErrorCode;
use crate::model::LockName;
use crate::service::Refusal;

/// How the takeover margin is explained, in a refusal inside it.
const MARGIN: &str = "once the lease has ended on every instance's clock (--max-clock-skew-ms)";

pub(super) fn lock_refusal(
    refusal: Refusal,
    name: &LockName,
    takeover_at: Option<&str>,
) -> (ErrorCode, String) {
    match refusal {
        Refusal::LockHeld { retry_at } => (ErrorCode::LockHeld, match takeover_at {
            None => format!("lock '{name}' is held by another caller"),
            Some(at) if retry_at.is_some() => format!("the lease on lock '{name}' has ended; the lock may be taken over at {at}, {MARGIN}"),
            Some(at) => format!("the lease on lock '{name}' has ended; at {at}, {MARGIN}, the first caller queued for it takes it"),
        }),
        Refusal::NotOwner => (ErrorCode::NotOwner, format!("that lease does not hold lock '{name}'")),
        Refusal::NameConflict => (
            ErrorCode::NameConflict,
            format!("locks nested under '{name}' exist; a lock cannot be taken on their parent name"),
        ),
        Refusal::CleanupTimeout => (
            ErrorCode::CleanupTimeout,
            format!("the holder of '{name}' did not release it within the wait; it keeps the lock"),
        ),
        Refusal::Superseded => (
            ErrorCode::Superseded,
            format!("a higher-priority request for '{name}' took this request's place"),
        ),
        Refusal::WaitTimeout => (ErrorCode::WaitTimeout, format!("waiting_ms ran out before '{name}' was free")),
        Refusal::LeaseEnded => (
            ErrorCode::LeaseEnded,
            format!("the lease granted to this request on '{name}' has ended (it ran out, or was released or taken over); acquire again, with a new request_id if you send one"),
        ),
        Refusal::TooManyWaiters => (
            ErrorCode::TooManyWaiters,
            format!("the queue of '{name}' is full (--max-waiters-per-lock); retry later"),
        ),
        Refusal::LimitMismatch => unreachable_limit(name),
    }
}

pub(super) fn election_refusal(
    refusal: Refusal,
    name: &LockName,
    takeover_at: Option<&str>,
) -> (ErrorCode, String) {
    match refusal {
        Refusal::LockHeld { retry_at } => (ErrorCode::LeaderExists, match takeover_at {
            None => format!("election '{name}' has a leader"),
            Some(at) if retry_at.is_some() => format!("the leader's lease on election '{name}' has ended; it may be taken over at {at}, {MARGIN}"),
            Some(at) => format!("the leader's lease on election '{name}' has ended; at {at}, {MARGIN}, the first candidate waiting takes over"),
        }),
        Refusal::NotOwner => (ErrorCode::NotLeader, format!("that lease is not the live leader of election '{name}'")),
        Refusal::NameConflict => (
            ErrorCode::NameConflict,
            format!("elections nested under '{name}' exist; no election can be held on their parent name"),
        ),
        Refusal::CleanupTimeout => (
            ErrorCode::CleanupTimeout,
            format!("the leader of '{name}' did not resign within the wait; it stays leader"),
        ),
        Refusal::Superseded => (
            ErrorCode::Superseded,
            format!("a higher-priority campaign for '{name}' took this campaign's place"),
        ),
        Refusal::WaitTimeout => (ErrorCode::WaitTimeout, format!("waiting_ms ran out before this candidate was elected in '{name}'")),
        Refusal::LeaseEnded => (
            ErrorCode::LeaseEnded,
            format!("the leadership granted to this request in '{name}' has ended (it ran out, or was resigned or taken over); campaign again, with a new request_id if you send one"),
        ),
        Refusal::TooManyWaiters => (
            ErrorCode::TooManyWaiters,
            format!("the candidates' queue of '{name}' is full (--max-waiters-per-lock); retry later"),
        ),
        Refusal::LimitMismatch => unreachable_limit(name),
    }
}

/// A lock or an election has no limit, so it never refuses one; should a record say
/// otherwise, the caller is told what is wrong.
fn unreachable_limit(name: &LockName) -> (ErrorCode, String) {
    (
        ErrorCode::LimitMismatch,
        format!("'{name}' is stored with a semaphore's limit"),
    )
}

pub(super) fn semaphore_refusal(
    refusal: Refusal,
    name: &LockName,
    takeover_at: Option<&str>,
) -> (ErrorCode, String) {
    match refusal {
        Refusal::LockHeld { retry_at } => (ErrorCode::SemaphoreFull, match takeover_at {
            None => format!("every permit of semaphore '{name}' is held"),
            Some(at) if retry_at.is_some() => format!("a lease on semaphore '{name}' has ended; its permit may be taken over at {at}, {MARGIN}"),
            Some(at) => format!("a lease on semaphore '{name}' has ended; at {at}, {MARGIN}, the first caller queued takes its permit"),
        }),
        Refusal::NotOwner => (ErrorCode::NotOwner, format!("that lease does not hold a permit of semaphore '{name}'")),
        Refusal::NameConflict => (
            ErrorCode::NameConflict,
            format!("semaphores nested under '{name}' exist; no semaphore can be held on their parent name"),
        ),
        Refusal::CleanupTimeout => (
            ErrorCode::CleanupTimeout,
            format!("the holder asked to give up a permit of '{name}' did not release it within the wait; it keeps the permit"),
        ),
        Refusal::Superseded => (
            ErrorCode::Superseded,
            format!("a higher-priority request for '{name}' took this request's place"),
        ),
        Refusal::WaitTimeout => (ErrorCode::WaitTimeout, format!("waiting_ms ran out before a permit of '{name}' was free")),
        Refusal::LeaseEnded => (
            ErrorCode::LeaseEnded,
            format!("the permit granted to this request on '{name}' has ended (it ran out, or was released or taken over); acquire again, with a new request_id if you send one"),
        ),
        Refusal::TooManyWaiters => (
            ErrorCode::TooManyWaiters,
            format!("the queue of '{name}' is full (--max-waiters-per-lock); retry later"),
        ),
        Refusal::LimitMismatch => (
            ErrorCode::LimitMismatch,
            format!("semaphore '{name}' has holders or waiters under another limit; its limit changes only when it has neither"),
        ),
    }
}
