//! The resource the locks protect in a chaos run: it accepts a write only with the highest
//! fencing token seen so far for its lock, and remembers the writes it refused.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::now_floor_ms;

/// The resource the locks protect: per lock, it remembers the highest token written and
/// refuses a write with a lower one.
#[derive(Debug, Default)]
pub struct FencedResource {
    highest: Mutex<HashMap<String, u64>>,
    writes: AtomicU64,
    rejections: AtomicU64,
    /// The first few rejected writes.
    rejected: Mutex<Vec<FencedRejection>>,
}

/// A write the fenced resource refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FencedRejection {
    pub client: usize,
    pub lock: String,
    pub token: u64,
    /// The highest token written before.
    pub highest: u64,
    /// When (unix ms, test clock).
    pub at_ms: i64,
}

/// How many rejected writes a `FencedResource` describes.
const REJECTIONS_KEPT: usize = 20;

impl FencedResource {
    pub fn new() -> FencedResource {
        FencedResource::default()
    }

    /// Accepts the write if `token` ≥ the highest token written to `lock` so far.
    pub fn write(&self, lock: &str, token: u64) -> bool {
        self.write_by(usize::MAX, lock, token)
    }

    /// `write`, by `client` (named in the description of a rejection).
    pub fn write_by(&self, client: usize, lock: &str, token: u64) -> bool {
        self.writes.fetch_add(1, Ordering::Relaxed);
        let mut highest = self.highest.lock().unwrap();
        let seen = highest.entry(lock.to_owned()).or_insert(0);
        if token >= *seen {
            *seen = token;
            return true;
        }
        self.rejections.fetch_add(1, Ordering::Relaxed);
        let mut rejected = self.rejected.lock().unwrap();
        if rejected.len() < REJECTIONS_KEPT {
            rejected.push(FencedRejection {
                client,
                lock: lock.to_owned(),
                token,
                highest: *seen,
                at_ms: now_floor_ms(),
            });
        }
        false
    }

    /// The first few rejected writes.
    pub fn rejected(&self) -> Vec<FencedRejection> {
        self.rejected.lock().unwrap().clone()
    }

    pub fn rejections(&self) -> u64 {
        self.rejections.load(Ordering::Relaxed)
    }

    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }
}
