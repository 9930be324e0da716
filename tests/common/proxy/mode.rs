//! The proxy's modes: what it does with the traffic of its connections (`super::Proxy`).

use std::time::Duration;

/// What the proxy does with traffic.
#[derive(Clone, Debug, PartialEq)]
pub enum Mode {
    /// Forward everything at once.
    Pass,
    /// Forward every chunk, in both directions, this long after it was read (order kept).
    Delay(Duration),
    /// Forward client→server at once and server→client this long after it was read.
    DelayReplies(Duration),
    /// Read and discard everything in both directions; keep the sockets open. New
    /// connections are not connected to the target at all.
    BlackHole,
    /// Pass, until a client request whose type is in `ops` is seen: it is forwarded, nothing
    /// more goes back to the client, the connection is closed `CUT_GRACE` later, and new
    /// connections are refused (accepted and closed) until `refuse_for` after that; then
    /// the mode is `Pass`. Fires once per arming.
    CutAfter { ops: Vec<i32>, refuse_for: Duration },
    /// Accept new connections and close them at once; existing ones are closed.
    Refuse,
    /// A server cut off from its leader without noticing: on existing connections it
    /// answers pings and reads, and takes in every write and sync (which go through the
    /// leader) without ever answering them (they are dropped); new connections are refused.
    Stall,
    /// As `Stall`, but syncs are answered: only writes go unanswered.
    StallWrites,
    /// On the connections open when it was set, answers every `getData` of `path` after the
    /// first with the first one's answer (`stale_copy.rs`); new connections pass.
    StaleCopy { path: String },
}
