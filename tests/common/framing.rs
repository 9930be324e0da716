//! ZooKeeper's client→server framing, as far as a fault-injecting proxy needs it: `Framer`
//! splits the byte stream of one connection into messages (whatever the chunking) and names
//! each request's xid and type; `op` has the request types.

/// ZooKeeper request types (the `type` field of a request header).
pub mod op {
    pub const CREATE: i32 = 1;
    pub const DELETE: i32 = 2;
    pub const EXISTS: i32 = 3;
    pub const GET_DATA: i32 = 4;
    pub const GET_CHILDREN: i32 = 8;
    pub const SET_DATA: i32 = 5;
    pub const SET_ACL: i32 = 7;
    pub const SYNC: i32 = 9;
    pub const PING: i32 = 11;
    pub const CHECK: i32 = 13;
    pub const MULTI: i32 = 14;
    pub const CREATE2: i32 = 15;
    pub const RECONFIG: i32 = 16;
    pub const CREATE_CONTAINER: i32 = 19;
    pub const DELETE_CONTAINER: i32 = 20;
    pub const CREATE_TTL: i32 = 21;
    pub const MULTI_READ: i32 = 22;
    pub const CLOSE_SESSION: i32 = -11;

    /// Whether a request of this type goes through the leader (the writes, `sync` and the
    /// session's close); a server answers the others on its own.
    pub fn through_the_leader(op: i32) -> bool {
        [
            CREATE,
            DELETE,
            SET_DATA,
            SET_ACL,
            SYNC,
            CHECK,
            MULTI,
            CREATE2,
            RECONFIG,
            CREATE_CONTAINER,
            DELETE_CONTAINER,
            CREATE_TTL,
            CLOSE_SESSION,
        ]
        .contains(&op)
    }
}

/// One message found by `Framer`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message {
    /// The first message of a connection (no request header).
    Connect,
    /// A request with its header.
    Request { xid: i32, op: i32 },
    /// A body too short to hold a request header.
    Short,
}

/// Splits ZooKeeper's client→server byte stream into messages, whatever the chunking:
/// each message is a 4-byte big-endian length, then that many bytes of body.
#[derive(Debug, Default)]
pub struct Framer {
    seen_connect: bool,
    head: Vec<u8>,
    skip: usize,
    current: Option<Message>,
}

impl Framer {
    pub fn new() -> Framer {
        Framer::default()
    }

    /// Whether a message has begun and not ended.
    pub fn mid_message(&self) -> bool {
        !self.head.is_empty() || self.skip > 0
    }

    /// Feeds the next chunk; returns each message completed in it, with the offset in
    /// `chunk` just past its last byte.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<(usize, Message)> {
        let mut done = Vec::new();
        let mut i = 0;
        while i < chunk.len() {
            if self.skip > 0 {
                let n = self.skip.min(chunk.len() - i);
                i += n;
                self.skip -= n;
                if self.skip == 0 {
                    done.push((i, self.current.take().expect("a message under way")));
                }
                continue;
            }
            self.head.push(chunk[i]);
            i += 1;
            if self.head.len() < 4 {
                continue;
            }
            let len = i32::from_be_bytes(self.head[..4].try_into().unwrap()).max(0) as usize;
            let wanted = if self.seen_connect { len.min(8) } else { 0 };
            let have = self.head.len() - 4;
            if have < wanted {
                continue;
            }
            let message = if !self.seen_connect {
                Message::Connect
            } else if len < 8 {
                Message::Short
            } else {
                let field =
                    |at: usize| i32::from_be_bytes(self.head[at..at + 4].try_into().unwrap());
                Message::Request {
                    xid: field(4),
                    op: field(8),
                }
            };
            self.seen_connect = true;
            self.head.clear();
            if len == have {
                done.push((i, message));
            } else {
                self.skip = len - have;
                self.current = Some(message);
            }
        }
        done
    }
}

/// Forwards one client→server stream either as it comes (`pass`) or message by message,
/// keeping only some (`sieve`), and can switch between the two at any byte without ever
/// sending part of a message it then drops: a message sieved is sent whole or not at all,
/// except that one already partly passed is always completed.
#[derive(Debug, Default)]
pub struct Sieve {
    framer: Framer,
    /// The bytes of the message under way that were not sent yet.
    held: Vec<u8>,
    /// Whether some bytes of the message under way were sent.
    begun: bool,
}

impl Sieve {
    pub fn new() -> Sieve {
        Sieve::default()
    }

    /// Takes the next chunk and returns what to send now: anything held back, then the chunk.
    pub fn pass(&mut self, chunk: &[u8]) -> Vec<u8> {
        self.framer.push(chunk);
        let mut send = std::mem::take(&mut self.held);
        send.extend_from_slice(chunk);
        self.begun = self.framer.mid_message();
        send
    }

    /// Takes the next chunk and returns each message completed in it that `keep` keeps (or
    /// that was begun), with the bytes of it still to send. The rest of an unfinished message
    /// is held.
    pub fn sieve(
        &mut self,
        chunk: &[u8],
        keep: impl Fn(&Message) -> bool,
    ) -> Vec<(Message, Vec<u8>)> {
        let mut kept = Vec::new();
        let mut start = 0;
        for (end, message) in self.framer.push(chunk) {
            let mut bytes = std::mem::take(&mut self.held);
            bytes.extend_from_slice(&chunk[start..end]);
            start = end;
            if self.begun || keep(&message) {
                kept.push((message, bytes));
            }
            self.begun = false;
        }
        self.held.extend_from_slice(&chunk[start..]);
        kept
    }
}
