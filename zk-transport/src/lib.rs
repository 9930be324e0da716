//! lockwarden's ZooKeeper transport: a `TcpStream` for `zookeeper-client` that lives on
//! tokio's reactor.
//!
//! `zookeeper-client` 0.11 opens its connection with `async_net::TcpStream`, whose readiness
//! comes from `async-io`'s reactor, a thread of its own. On that stream every answer from
//! ZooKeeper crosses two threads before its request sees it: `async-io`'s thread wakes from
//! `epoll`, then wakes a tokio worker to run the session task. On a machine whose few cores
//! ZooKeeper shares, those hand-overs are a large share of the service's CPU time
//! (BENCHMARKS.md, "Where the time goes").
//!
//! The workspace's Cargo.toml patches `async-net` with this crate, so the client's socket is a
//! `tokio::net::TcpStream`: the worker that waits in tokio's `epoll` reads the answer and runs
//! the session task itself. Nothing of `zookeeper-client` is copied or changed; this crate
//! provides only what it uses of `async-net` (`TcpStream::connect` and the `futures-io`
//! traits), with `async-net`'s meaning: a connect tries each resolved address in turn, a
//! read of 0 bytes is the end of the stream, `close` shuts the write half down.
//!
//! What it asks of its users: a connect, and every poll of the stream, happen inside a tokio
//! runtime (the client's session task is spawned on tokio by its `tokio` feature, and lockwarden
//! only connects from tokio tasks). `TCP_NODELAY` is set, because the client writes whole
//! requests and waits for their answers.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_io::{AsyncRead, AsyncWrite};
use tokio::io::{AsyncRead as _, AsyncWrite as _, ReadBuf};

/// A TCP connection on tokio's reactor, with the `futures-io` traits `zookeeper-client` reads
/// and writes through.
#[derive(Debug)]
pub struct TcpStream {
    inner: tokio::net::TcpStream,
}

impl TcpStream {
    /// Connects to the first address of `addr` that accepts (`async-net`'s contract).
    pub async fn connect<A: tokio::net::ToSocketAddrs>(addr: A) -> io::Result<TcpStream> {
        let inner = tokio::net::TcpStream::connect(addr).await?;
        inner.set_nodelay(true)?;
        Ok(TcpStream { inner })
    }
}

impl AsyncRead for TcpStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let mut read_buf = ReadBuf::new(buf);
        match Pin::new(&mut self.get_mut().inner).poll_read(cx, &mut read_buf) {
            Poll::Ready(Ok(())) => Poll::Ready(Ok(read_buf.filled().len())),
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncWrite for TcpStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use futures::{AsyncReadExt, AsyncWriteExt};
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::TcpStream;

    #[tokio::test]
    async fn reads_writes_and_closes_like_a_socket() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let peer = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut got = Vec::new();
            socket.read_to_end(&mut got).await.unwrap();
            socket.write_all(b"pong").await.unwrap();
            got
        });
        let mut stream = TcpStream::connect(("localhost", port)).await.unwrap();
        stream.write_all(b"ping").await.unwrap();
        stream.flush().await.unwrap();
        stream.close().await.unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.unwrap();
        assert_eq!(answer, b"pong");
        assert_eq!(peer.await.unwrap(), b"ping");
    }

    #[tokio::test]
    async fn a_refused_connect_is_an_error() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let error = TcpStream::connect(("127.0.0.1", port)).await.unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::ConnectionRefused);
    }
}
