//! A proxy on loopback that lets one write land late, after its client gave its connection
//! up, as a server does with a request it had read before the connection broke. It owns one
//! listening port in front of one ZooKeeper server and every connection through it.
//!
//! Once armed, the first request of one of the given types that comes through fires it:
//! the client's side of that connection is closed at once, and the request reaches the
//! server `hold` later on the server's side, which stays open. For `window` after firing,
//! the client cannot resume that session elsewhere (connections that resume a session are
//! closed at once; a resumed session would make the server drop the held request), so the
//! instance serves through a fresh session, its stand-in; and the `multi`s of fresh
//! sessions reach the server `fresh_delay` late, so that a write sent on the stand-in after
//! its reads goes in after the held one. Fresh sessions can also be kept out for a while
//! after firing (`refuse_fresh_for`), so that nothing serves the instance then.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

use super::framing::op;

pub struct LateWrite {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: AbortHandle,
}

struct Shared {
    target: SocketAddr,
    ops: Vec<i32>,
    hold: Duration,
    fresh_delay: Duration,
    window: Duration,
    /// How long after firing fresh sessions are refused, in ms.
    fresh_refused_ms: AtomicU64,
    armed: AtomicBool,
    fired_at: Mutex<Option<Instant>>,
    delivered: AtomicBool,
    resumed: AtomicBool,
    read_first: AtomicBool,
}

impl Shared {
    fn within_window(&self) -> bool {
        self.fired_within(self.window)
    }

    fn fired_within(&self, span: Duration) -> bool {
        let fired = *self.fired_at.lock().unwrap();
        fired.is_some_and(|at| at.elapsed() < span)
    }
}

impl LateWrite {
    /// Starts the proxy, unarmed, on the current tokio runtime; it holds a request of one of
    /// the types `ops`.
    pub fn start(
        target: SocketAddr,
        ops: &[i32],
        hold: Duration,
        fresh_delay: Duration,
        window: Duration,
    ) -> LateWrite {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a proxy port");
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            target,
            ops: ops.to_vec(),
            hold,
            fresh_delay,
            window,
            fresh_refused_ms: AtomicU64::new(0),
            armed: AtomicBool::new(false),
            fired_at: Mutex::new(None),
            delivered: AtomicBool::new(false),
            resumed: AtomicBool::new(false),
            read_first: AtomicBool::new(false),
        });
        let listener = TcpListener::from_std(listener).expect("a tokio listener");
        let accept = tokio::spawn(accept_loop(listener, shared.clone())).abort_handle();
        LateWrite {
            addr,
            shared,
            accept,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The next request of one of its types is held and its connection closed.
    pub fn arm(&self) {
        self.shared.armed.store(true, Ordering::SeqCst);
    }

    /// For `span` after firing, connections that open a fresh session are closed at once.
    pub fn refuse_fresh_for(&self, span: Duration) {
        let ms = span.as_millis() as u64;
        self.shared.fresh_refused_ms.store(ms, Ordering::SeqCst);
    }

    /// Whether a request has been held (the proxy fired).
    pub fn fired(&self) -> bool {
        self.shared.fired_at.lock().unwrap().is_some()
    }

    /// Whether the held request has been sent on to the server.
    pub fn delivered(&self) -> bool {
        self.shared.delivered.load(Ordering::SeqCst)
    }

    /// Whether a fresh session read a record (a `getData`) before the held request was sent
    /// on: what the settling read of a lost answer does on a stand-in.
    pub fn read_first(&self) -> bool {
        self.shared.read_first.load(Ordering::SeqCst)
    }

    /// Whether a session resumed through the proxy after it fired (the window over).
    pub fn resumed(&self) -> bool {
        self.shared.resumed.load(Ordering::SeqCst)
    }
}

impl Drop for LateWrite {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        if let Ok((client, _)) = listener.accept().await {
            tokio::spawn(relay(client, shared.clone()));
        }
    }
}

/// One length-prefixed message of ZooKeeper's client stream, prefix included.
async fn message(read: &mut (impl AsyncRead + Unpin)) -> Option<Vec<u8>> {
    let mut prefix = [0u8; 4];
    read.read_exact(&mut prefix).await.ok()?;
    let len = i32::from_be_bytes(prefix).max(0) as usize;
    let mut bytes = vec![0u8; 4 + len];
    bytes[..4].copy_from_slice(&prefix);
    read.read_exact(&mut bytes[4..]).await.ok()?;
    Some(bytes)
}

async fn relay(client: TcpStream, shared: Arc<Shared>) {
    let Ok(server) = TcpStream::connect(shared.target).await else {
        return;
    };
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let Some(connect) = message(&mut client_read).await else {
        return;
    };
    // ConnectRequest: length, protocol version (4), last zxid seen (8), timeout (4), session.
    let session = connect
        .get(20..28)
        .map_or(0, |b| i64::from_be_bytes(b.try_into().unwrap()));
    if session != 0 && shared.within_window() {
        return;
    }
    let fresh_refused = Duration::from_millis(shared.fresh_refused_ms.load(Ordering::SeqCst));
    if session == 0 && shared.fired_within(fresh_refused) {
        return;
    }
    let fired = shared.fired_at.lock().unwrap().is_some();
    let fresh_after_firing = session == 0 && fired;
    if server_write.write_all(&connect).await.is_err() {
        return;
    }
    if session != 0 && fired {
        shared.resumed.store(true, Ordering::SeqCst);
    }
    let down = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
    });
    while let Some(request) = message(&mut client_read).await {
        let kind = request
            .get(8..12)
            .map_or(0, |b| i32::from_be_bytes(b.try_into().unwrap()));
        if shared.ops.contains(&kind) && shared.armed.swap(false, Ordering::SeqCst) {
            *shared.fired_at.lock().unwrap() = Some(Instant::now());
            // The client's side closes now; the server's stays open and gets the write late.
            down.abort();
            drop(client_read);
            tokio::time::sleep(shared.hold).await;
            let _ = server_write.write_all(&request).await;
            shared.delivered.store(true, Ordering::SeqCst);
            // Long enough for the server to have read it before it sees the close.
            tokio::time::sleep(Duration::from_millis(300)).await;
            return;
        }
        if kind == op::GET_DATA && fresh_after_firing && !shared.delivered.load(Ordering::SeqCst) {
            shared.read_first.store(true, Ordering::SeqCst);
        }
        if kind == op::MULTI && fresh_after_firing && shared.within_window() {
            tokio::time::sleep(shared.fresh_delay).await;
        }
        if server_write.write_all(&request).await.is_err() {
            break;
        }
    }
    down.abort();
}
