//! The proxy's modes: what it does with the traffic of its connections (`super::Proxy`).

use std::time::Duration;

use crate::common::framing::{op, Message};

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
    /// leader) without ever answering them (they are dropped), and it sends no watch
    /// notification (it applies no change); new connections are refused.
    Stall,
    /// As `Stall`, but syncs are answered: only writes go unanswered.
    StallWrites,
    /// On the connections open when it was set, answers every `getData` of `path` after the
    /// first with the first one's answer (`stale_copy.rs`); new connections pass.
    StaleCopy { path: String },
}

/// A watch notification (xid -1) in the server→client stream, whose replies begin with the
/// xid where requests do.
pub(super) fn is_notification(message: &Message) -> bool {
    matches!(message, Message::Request { xid: -1, .. })
}

/// What a stalled server still answers: all but what goes through the leader, and syncs
/// too when `syncs`.
pub(super) fn answered_when_stalled(message: &Message, syncs: bool) -> bool {
    match message {
        Message::Request { op, .. } => !op::through_the_leader(*op) || (syncs && *op == op::SYNC),
        Message::Connect | Message::Short => true,
    }
}
