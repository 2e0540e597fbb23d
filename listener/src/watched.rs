//! A connection's stream that notes when a byte last moved either way ([`Watched`], [`Moved`]):
//! the clock of the idle timeout.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// When a byte last moved on a connection.
pub(crate) struct Moved {
    since: Instant,
    ms: AtomicU64,
}

impl Moved {
    /// Bytes last moved now (the connection has just opened).
    pub(crate) fn new() -> Self {
        Moved { since: Instant::now(), ms: AtomicU64::new(0) }
    }

    /// Bytes moved now.
    pub(crate) fn now(&self) {
        self.ms.store(self.since.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// When bytes last moved.
    pub(crate) fn last(&self) -> Instant {
        self.since + Duration::from_millis(self.ms.load(Ordering::Relaxed))
    }
}

/// A stream that notes when bytes move.
pub(crate) struct Watched {
    inner: TcpStream,
    moved: Arc<Moved>,
}

impl Watched {
    /// `inner`, noting in `moved` when bytes move on it.
    pub(crate) fn new(inner: TcpStream, moved: Arc<Moved>) -> Self {
        Watched { inner, moved }
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.moved.now();
        }
        r
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.moved.now();
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.moved.now();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
