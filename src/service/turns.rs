//! Turns: a semaphore's releases on one instance write one at a time (a hint, DESIGN.md
//! "Hints"; off with `--hints-off one-writer`).
//!
//! A semaphore's holders release at once, and each release is a conditional write on the one
//! record: of two planned on the same version, one loses and is read and written again. A
//! release that waits for the turn of the one before it on this instance plans on the record
//! that one left, so it does not lose to it. Correctness does not rest on the turns: every
//! write stays conditional, and releases of other instances still race.

use std::hash::{DefaultHasher, Hash, Hasher};

use tokio::sync::{Mutex, MutexGuard};

use crate::model::LockName;

/// Names share a turn by hash, among a fixed number of turns: no state to clean up.
const TURNS: usize = 64;

pub(super) struct Turns(Vec<Mutex<()>>);

impl Turns {
    pub(super) fn new() -> Turns {
        Turns((0..TURNS).map(|_| Mutex::new(())).collect())
    }

    /// Waits for `name`'s turn; it lasts as long as the guard.
    pub(super) async fn take(&self, name: &LockName) -> MutexGuard<'_, ()> {
        let mut hasher = DefaultHasher::new();
        name.hash(&mut hasher);
        self.0[hasher.finish() as usize % TURNS].lock().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_name_s_turn_waits_for_the_one_before() {
        let turns = Turns::new();
        let name = LockName::parse("s").unwrap();
        let first = turns.take(&name).await;
        let second = turns.take(&name);
        tokio::pin!(second);
        assert!(
            futures::poll!(second.as_mut()).is_pending(),
            "taken while the first holds it"
        );
        drop(first);
        assert!(futures::poll!(second.as_mut()).is_ready());
    }
}
