//! The HTTP/1 connection loop: accepts at most `--max-connections` connections at once,
//! closes a connection whose client does not send a request's headers within
//! `--request-read-timeout-ms` (slowloris), and drains connections on shutdown. With TLS
//! ([`crate::tls`]), each connection's handshake runs in its own task, holding its slot, and
//! must finish within the same read timeout; a failed or late handshake closes the
//! connection, and nothing else.
//!
//! (axum's own `serve` sets no timer, so hyper would wait for headers forever.) A request's
//! body is bounded separately, in the JSON extractor ([`BodyReadTimeout`]), which answers
//! `408 request_timeout`.
//!
//! On shutdown, long-lived responses (the event streams) are told through [`Closing`], a
//! request extension, and end, so that the drain is not spent waiting on them.
//!
//! Keeps I15 (DESIGN.md, "Invariants"): connections are capped, and a client slow to send a request
//! is cut off.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio_rustls::TlsAcceptor;
use tracing::{debug, warn};

/// How long a request body may take to arrive in full (a request extension the server sets).
#[derive(Clone, Copy, Debug)]
pub struct BodyReadTimeout(pub Duration);

/// Tells a long-lived response that the server is shutting down (a request extension the
/// server sets).
#[derive(Clone, Debug)]
pub struct Closing(watch::Receiver<bool>);

impl Closing {
    /// Completes once the server has begun to shut down, or is gone.
    pub async fn wait(mut self) {
        let _ = self.0.wait_for(|closing| *closing).await;
    }
}

/// How long shutdown waits for requests in progress before it drops their connections.
/// With the second `main` gives background tasks after it, an instance exits within 10 s
/// of SIGTERM.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(9);

/// The connection limits.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    pub max_connections: usize,
    pub read_timeout: Duration,
}

/// Serves `app` on `listener` until `shutdown` completes, then drains; over TLS with `tls`.
pub async fn run(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    tls: Option<TlsAcceptor>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let (closing, closing_watch) = watch::channel(false);
    let app = app
        .layer(axum::Extension(BodyReadTimeout(limits.read_timeout)))
        .layer(axum::Extension(Closing(closing_watch.clone())));
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.read_timeout)
        .keep_alive(true);
    tokio::pin!(shutdown);
    loop {
        // A slot first: past the limit, clients wait in the kernel's listen backlog rather
        // than take memory and file descriptors here.
        let slot = tokio::select! {
            _ = &mut shutdown => break,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors, say: back off instead of spinning.
                    warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // Small request/response exchanges: do not let Nagle's algorithm hold them back.
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        // Watched from here, so that the drain waits for a connection still in its handshake.
        let watcher = graceful.watcher();
        let (builder, tls) = (builder.clone(), tls.clone());
        let closing = Closing(closing_watch.clone());
        tokio::spawn(async move {
            let served = match tls {
                None => watcher.watch(serve(&builder, stream, service)).await,
                Some(tls) => match handshake(&tls, stream, limits.read_timeout, closing).await {
                    Ok(stream) => watcher.watch(serve(&builder, stream, service)).await,
                    Err(why) => {
                        debug!(%peer, "TLS handshake {why}");
                        Ok(())
                    }
                },
            };
            if let Err(error) = served {
                debug!(%peer, %error, "connection ended with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    let _ = closing.send(true);
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown())
        .await
        .is_err()
    {
        warn!("shutting down with requests still in progress");
    }
}

type Service = TowerToHyperService<Router>;

fn serve<I>(
    builder: &http1::Builder,
    io: I,
    service: Service,
) -> http1::Connection<TokioIo<I>, Service>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    builder.serve_connection(TokioIo::new(io), service)
}

/// The server's side of a TLS handshake on `stream`, given up after `within` or when the
/// server begins to shut down. `Err` says why it failed.
async fn handshake(
    tls: &TlsAcceptor,
    stream: TcpStream,
    within: Duration,
    closing: Closing,
) -> Result<tokio_rustls::server::TlsStream<TcpStream>, String> {
    tokio::select! {
        done = tokio::time::timeout(within, tls.accept(stream)) => match done {
            Ok(Ok(stream)) => Ok(stream),
            Ok(Err(error)) => Err(format!("failed: {error}")),
            Err(_) => Err(format!("took longer than {within:?}")),
        },
        () = closing.wait() => Err("abandoned: shutting down".into()),
    }
}
