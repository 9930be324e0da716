//! A fault-injecting TCP proxy on loopback: it owns one listening port in front of one
//! target and every connection through it, and applies a `Mode` (`proxy/mode.rs`: pass,
//! delay, black hole, cut after a ZooKeeper request, refuse, stall, stale copy) that can be
//! changed at any time and takes effect on existing and new connections alike (a stale copy
//! on existing ones only). `CutAfter` and the stalls forward the client's stream in whole
//! messages (`framing::Sieve`), so that they can pick the requests they act on, and the stale
//! copy both streams; the other modes forward bytes as they come (the links between ensemble
//! servers, which are not ZooKeeper's client protocol, go through them too).
//!
//! Proxies run on a small tokio runtime of their own, so they keep working whatever the
//! test's runtime is doing and can be started from sync or async code.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio::task::{AbortHandle, JoinSet};
use tokio::time::Instant;

use super::framing::{Message, Sieve};
use super::stale_copy::{self, Stale};

mod mode;
pub use mode::Mode;
use mode::{answered_when_stalled, is_notification};

/// How long a cut connection stays open after the request was forwarded, so the server
/// has read it before it sees the connection close.
pub const CUT_GRACE: Duration = Duration::from_millis(100);

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("fault-proxy")
            .enable_all()
            .build()
            .expect("the proxies' runtime")
    })
}

struct State {
    mode: Mode,
    refuse_until: Option<Instant>,
}

struct Shared {
    target: SocketAddr,
    state: Mutex<State>,
    fired: AtomicUsize,
    accepted: AtomicUsize,
    next_id: AtomicU64,
    connections: Mutex<HashMap<u64, AbortHandle>>,
}

impl Shared {
    fn mode(&self) -> Mode {
        self.state.lock().unwrap().mode.clone()
    }

    fn refusing(&self) -> bool {
        let state = self.state.lock().unwrap();
        matches!(state.mode, Mode::Refuse | Mode::Stall | Mode::StallWrites)
            || state.refuse_until.is_some_and(|t| Instant::now() < t)
    }

    fn black_hole(&self) -> bool {
        self.mode() == Mode::BlackHole
    }

    /// Disarms a `CutAfter` whose ops include `op`; true if this call did (one-shot).
    fn fire(&self, op: i32) -> bool {
        let mut state = self.state.lock().unwrap();
        let Mode::CutAfter { ops, refuse_for } = &state.mode else {
            return false;
        };
        if !ops.contains(&op) {
            return false;
        }
        state.refuse_until = Some(Instant::now() + CUT_GRACE + *refuse_for);
        state.mode = Mode::Pass;
        self.fired.fetch_add(1, Ordering::SeqCst);
        true
    }
}

/// A proxy listening on a free 127.0.0.1 port; dropping it closes everything.
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: AbortHandle,
}

impl Proxy {
    /// Starts a proxy to `target`, in `Mode::Pass`.
    pub fn start(target: SocketAddr) -> Proxy {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a proxy port");
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            target,
            state: Mutex::new(State {
                mode: Mode::Pass,
                refuse_until: None,
            }),
            fired: AtomicUsize::new(0),
            accepted: AtomicUsize::new(0),
            next_id: AtomicU64::new(0),
            connections: Mutex::new(HashMap::new()),
        });
        let accept = runtime()
            .spawn(accept_loop(listener, shared.clone()))
            .abort_handle();
        Proxy {
            addr,
            shared,
            accept,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `127.0.0.1:port`, as a ZooKeeper connect string.
    pub fn connect_string(&self) -> String {
        self.addr.to_string()
    }

    pub fn target(&self) -> SocketAddr {
        self.shared.target
    }

    pub fn mode(&self) -> Mode {
        self.shared.mode()
    }

    /// Sets the mode (ending any refusal window a `CutAfter` left); `Refuse` also closes
    /// the current connections.
    pub fn set_mode(&self, mode: Mode) {
        let refuse = mode == Mode::Refuse;
        {
            let mut state = self.shared.state.lock().unwrap();
            state.mode = mode;
            state.refuse_until = None;
        }
        if refuse {
            self.drop_all();
        }
    }

    /// How many times a `CutAfter` has fired.
    pub fn fired(&self) -> usize {
        self.shared.fired.load(Ordering::SeqCst)
    }

    /// How many connections were accepted (refused ones included).
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// How many connections are open now.
    pub fn open_connections(&self) -> usize {
        self.shared.connections.lock().unwrap().len()
    }

    /// Closes every current connection (both sides).
    pub fn drop_all(&self) {
        let connections: Vec<AbortHandle> = {
            let mut map = self.shared.connections.lock().unwrap();
            map.drain().map(|(_, handle)| handle).collect()
        };
        for handle in connections {
            handle.abort();
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.drop_all();
    }
}

async fn accept_loop(listener: std::net::TcpListener, shared: Arc<Shared>) {
    let listener = TcpListener::from_std(listener).expect("a tokio listener");
    loop {
        let Ok((client, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        shared.accepted.fetch_add(1, Ordering::SeqCst);
        if shared.refusing() {
            drop(client);
            continue;
        }
        let id = shared.next_id.fetch_add(1, Ordering::SeqCst);
        let mut connections = shared.connections.lock().unwrap();
        let task_shared = shared.clone();
        let task = tokio::spawn(async move {
            if task_shared.black_hole() {
                sink(client, &task_shared).await;
            } else {
                relay(client, &task_shared).await;
            }
            task_shared.connections.lock().unwrap().remove(&id);
        });
        connections.insert(id, task.abort_handle());
    }
}

/// A connection born in `BlackHole`: reads and discards until the client leaves or the
/// mode changes (then it is closed).
async fn sink(mut client: TcpStream, shared: &Shared) {
    let mut buf = vec![0u8; 16 * 1024];
    while shared.black_hole() {
        match tokio::time::timeout(Duration::from_millis(100), client.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return,
            _ => {}
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    /// Client to server.
    Up,
    /// Server to client.
    Down,
}

struct Chunk {
    at: Instant,
    data: Vec<u8>,
    written: Option<oneshot::Sender<()>>,
}

enum Ended {
    Reader,
    Writer(OwnedWriteHalf),
    Cut,
}

async fn relay(client: TcpStream, shared: &Arc<Shared>) {
    let Ok(server) = TcpStream::connect(shared.target).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let cut = Arc::new(AtomicBool::new(false));
    let stale = Arc::new(StaleCopy {
        exempt: matches!(shared.mode(), Mode::StaleCopy { .. }),
        copy: Mutex::new(Stale::default()),
    });
    let (up_tx, up_rx) = mpsc::unbounded_channel();
    let (down_tx, down_rx) = mpsc::unbounded_channel();
    let mut tasks = JoinSet::new();
    let pump = |read, tx, direction| {
        let sides = (shared.clone(), cut.clone(), stale.clone());
        read_side(read, tx, direction, sides)
    };
    tasks.spawn(pump(client_read, up_tx, Direction::Up));
    tasks.spawn(pump(server_read, down_tx, Direction::Down));
    tasks.spawn(write_side(server_write, up_rx, shared.clone(), None));
    tasks.spawn(write_side(client_write, down_rx, shared.clone(), Some(cut)));
    // A writer ends when its reader saw the end and everything queued was written; the
    // connection then closes, except in a black hole, where the client side stays open.
    let mut held = Vec::new();
    loop {
        let tick = tokio::time::sleep(Duration::from_millis(100));
        tokio::select! {
            next = tasks.join_next() => match next {
                None | Some(Ok(Ended::Cut)) | Some(Err(_)) => return,
                Some(Ok(Ended::Reader)) => {}
                Some(Ok(Ended::Writer(half))) => {
                    held.push(half);
                    if !shared.black_hole() {
                        return;
                    }
                }
            },
            _ = tick => {
                if !held.is_empty() && !shared.black_hole() {
                    return;
                }
            }
        }
    }
}

/// A connection's stale copy (`Mode::StaleCopy`), unless it was made in that mode.
struct StaleCopy {
    exempt: bool,
    copy: Mutex<Stale>,
}

async fn read_side(
    mut read: tokio::net::tcp::OwnedReadHalf,
    tx: mpsc::UnboundedSender<Chunk>,
    direction: Direction,
    (shared, cut, stale): (Arc<Shared>, Arc<AtomicBool>, Arc<StaleCopy>),
) -> Ended {
    let mut sieve = Sieve::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match read.read(&mut buf).await {
            Ok(0) | Err(_) => return Ended::Reader,
            Ok(n) => n,
        };
        let now = Instant::now();
        let mode = shared.mode();
        let data = match (&mode, direction) {
            (Mode::StaleCopy { path }, _) if !stale.exempt => {
                let mut copy = stale.copy.lock().unwrap();
                let up = direction == Direction::Up;
                stale_copy::relay(&mut sieve, &buf[..n], up, path, &mut copy)
            }
            // A server that applies no writes sees no change to tell a watcher of.
            (Mode::Stall | Mode::StallWrites, Direction::Down) => {
                let kept = sieve.sieve(&buf[..n], |m| !is_notification(m));
                kept.into_iter().flat_map(|(_, b)| b).collect()
            }
            (_, Direction::Down) => sieve.pass(&buf[..n]),
            (Mode::CutAfter { .. }, Direction::Up) => {
                let messages = sieve.sieve(&buf[..n], |_| true);
                let hit = messages.iter().position(|(message, _)| {
                    matches!(message, Message::Request { op, .. } if shared.fire(*op))
                });
                if let Some(hit) = hit {
                    cut.store(true, Ordering::SeqCst);
                    let (written, was_written) = oneshot::channel();
                    let data = messages[..=hit].iter().flat_map(|(_, b)| b.clone());
                    let _ = tx.send(Chunk {
                        at: now,
                        data: data.collect(),
                        written: Some(written),
                    });
                    let _ = tokio::time::timeout(Duration::from_secs(2), was_written).await;
                    tokio::time::sleep(CUT_GRACE).await;
                    return Ended::Cut;
                }
                messages.into_iter().flat_map(|(_, b)| b).collect()
            }
            (Mode::Stall | Mode::StallWrites, Direction::Up) => {
                let syncs = mode == Mode::StallWrites;
                let kept = sieve.sieve(&buf[..n], |m| answered_when_stalled(m, syncs));
                kept.into_iter().flat_map(|(_, b)| b).collect()
            }
            (_, Direction::Up) => sieve.pass(&buf[..n]),
        };
        let delay = match (mode, direction) {
            (Mode::BlackHole | Mode::Refuse, _) => continue,
            (_, Direction::Down) if cut.load(Ordering::SeqCst) => continue,
            (Mode::Delay(d), _) | (Mode::DelayReplies(d), Direction::Down) => d,
            _ => Duration::ZERO,
        };
        if data.is_empty() {
            continue;
        }
        let chunk = Chunk {
            at: now + delay,
            data,
            written: None,
        };
        if tx.send(chunk).is_err() {
            return Ended::Reader;
        }
    }
}

async fn write_side(
    mut write: OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<Chunk>,
    shared: Arc<Shared>,
    cut: Option<Arc<AtomicBool>>,
) -> Ended {
    while let Some(chunk) = rx.recv().await {
        tokio::time::sleep_until(chunk.at).await;
        let is_cut = cut.as_ref().is_some_and(|c| c.load(Ordering::SeqCst));
        if is_cut || shared.black_hole() {
            continue;
        }
        if write.write_all(&chunk.data).await.is_err() {
            break;
        }
        if let Some(written) = chunk.written {
            let _ = written.send(());
        }
    }
    Ended::Writer(write)
}
