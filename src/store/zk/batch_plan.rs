//! The write coalescer's decisions, apart from its I/O (`batch.rs`): which queued writes
//! the next shared `multi` carries, and what a failed shared `multi` means for each write.

use std::borrow::Borrow;

/// At most this many operations, and about this many bytes, in one shared `multi` (far
/// below ZooKeeper's 1 MB request limit).
pub(super) const MAX_OPS: usize = 128;
pub(super) const MAX_BYTES: usize = 256 * 1024;

/// What `pick` needs to know of a queued write.
#[derive(Clone, Debug)]
pub(super) struct Candidate {
    pub(super) session: i64,
    pub(super) ops: usize,
    pub(super) bytes: usize,
    pub(super) alone: bool,
    /// The nodes it writes (`node_key`).
    pub(super) nodes: Vec<u64>,
}

/// Stands for a node's path in `pick` (two paths with the same key only keep two writes
/// apart that could have shared a `multi`).
pub(super) fn node_key(path: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    path.hash(&mut hasher);
    hasher.finish()
}

/// The queued writes (their positions, in order) the next `multi` carries: the first one,
/// and, unless it must go alone, every later one of its session that need not go alone,
/// in order, while the `multi` stays within its caps. A write that touches a node an earlier
/// write in the `multi` touches waits for the next one: it was planned without that
/// write's effect, so it would most likely fail behind it and fail the whole `multi`; at
/// the head of the next one it is judged on the real state.
pub(super) fn pick<C: Borrow<Candidate>>(queue: &[C]) -> Vec<usize> {
    let Some(first) = queue.first().map(Borrow::borrow) else {
        return Vec::new();
    };
    let mut picked = vec![0];
    if first.alone {
        return picked;
    }
    let (mut ops, mut bytes) = (first.ops, first.bytes);
    let mut nodes: std::collections::HashSet<u64> = first.nodes.iter().copied().collect();
    for (at, c) in queue.iter().map(Borrow::borrow).enumerate().skip(1) {
        if c.alone || c.session != first.session || c.nodes.iter().any(|n| nodes.contains(n)) {
            continue;
        }
        if ops + c.ops > MAX_OPS || bytes + c.bytes > MAX_BYTES {
            break;
        }
        ops += c.ops;
        bytes += c.bytes;
        nodes.extend(c.nodes.iter().copied());
        picked.push(at);
    }
    picked
}

/// What a failed shared `multi` means for its writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Write `write` failed on the real state: its answer is the failure, at `index` of
    /// its own operations. The others go out again, each alone.
    Answer { write: usize, index: usize },
    /// Write `write` failed behind others, perhaps only because of them: nobody is
    /// answered, and every write goes out again, each alone.
    Alone { write: usize },
}

/// Judges the failure of operation `index` of a `multi` carrying writes of `sizes`
/// operations each, in order. `None` when the index is past the last operation.
pub(super) fn judge(sizes: &[usize], index: usize) -> Option<Verdict> {
    let mut start = 0;
    for (write, &size) in sizes.iter().enumerate() {
        if index < start + size {
            return Some(if write == 0 {
                Verdict::Answer {
                    write,
                    index: index - start,
                }
            } else {
                Verdict::Alone { write }
            });
        }
        start += size;
    }
    None
}

#[cfg(test)]
#[path = "batch_plan_tests.rs"]
mod tests;
