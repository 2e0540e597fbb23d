//! The hardened HTTP/1 server every listener runs: the service's (the API's and
//! `--metrics-listen`) and the simulator's, each its own crate depending on this one. It holds no
//! client longer than it must:
//!
//! * a request's head must arrive within `header_read_timeout` of the connection waiting for it
//!   (opened, or its previous answer sent: hyper starts the clock then), so a client that sends
//!   nothing, one that trickles header lines, and an idle keep-alive connection are all closed
//!   after it;
//! * a connection on which no byte moves either way for `idle_timeout` is closed whatever it is
//!   doing (a client that stopped sending its body or reading its answer);
//! * at most `max_connections` are served at once: further ones wait in the kernel's accept
//!   queue, unaccepted (no descriptor of ours), until one closes;
//! * at most `max_connections_per_address` of them come from one client (an IPv4 address, or
//!   an IPv6 /64: [`client`]); one more is closed as soon as it is accepted, so one client
//!   cannot hold every slot.
//!
//! Handlers see the client's address as `ConnectInfo<SocketAddr>`. Request rates are the
//! caller's business (the service's limits per token and address sit in its router).

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tower_service::Service;

/// What a listener allows its clients (flags of `gce-backend sim`; the service's `[http]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::Args)]
pub struct Limits {
    /// A request's head must arrive within this (ms) of the connection waiting for it (opened,
    /// or its previous answer sent), else the connection is closed: an idle keep-alive
    /// connection is closed after it too.
    #[arg(long, default_value_t = Limits::DEFAULT.header_read_timeout_ms)]
    pub header_read_timeout_ms: u64,
    /// A connection on which no byte moves either way for this long (ms) is closed.
    #[arg(long, default_value_t = Limits::DEFAULT.idle_timeout_ms)]
    pub idle_timeout_ms: u64,
    /// Connections served at once; more wait unaccepted until one closes.
    #[arg(long, default_value_t = Limits::DEFAULT.max_connections)]
    pub max_connections: usize,
    /// Connections served at once from one client address (an IPv6 address by its /64); one
    /// more is closed at once. 0: no cap (the simulator's default: its clients are the
    /// service's processes, usually all on one address).
    #[arg(long, default_value_t = Limits::DEFAULT.max_connections_per_address)]
    pub max_connections_per_address: usize,
}

impl Limits {
    /// 10 s for a request's head, 60 s without a byte moving, 1 024 connections, no cap per
    /// address (the service's `[http]` sets one).
    pub const DEFAULT: Limits = Limits {
        header_read_timeout_ms: 10_000,
        idle_timeout_ms: 60_000,
        max_connections: 1024,
        max_connections_per_address: 0,
    };

    /// Checks the ranges: timeouts of 1 ms to 10 minutes (head) or 1 hour (idle), 1 to 65 536
    /// connections, 0 (no cap) to 65 536 per address. The message names the field.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=600_000).contains(&self.header_read_timeout_ms) {
            return Err("header_read_timeout: must be from 1 ms to 10 minutes".into());
        }
        if !(1..=3_600_000).contains(&self.idle_timeout_ms) {
            return Err("idle_timeout: must be from 1 ms to 1 hour".into());
        }
        if !(1..=65_536).contains(&self.max_connections) {
            return Err("max_connections: must be from 1 to 65536".into());
        }
        if self.max_connections_per_address > 65_536 {
            return Err("max_connections_per_address: must be from 0 (no cap) to 65536".into());
        }
        Ok(())
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The address a client is limited by (connections here, request rates in the service): its
/// IPv4 address (an IPv4-mapped IPv6 one as IPv4), or its IPv6 /64 (one host's share).
pub fn client(addr: IpAddr) -> IpAddr {
    match addr.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(v6.to_bits() & !u128::from(u64::MAX))),
        v4 => v4,
    }
}

/// Told the peer of each connection closed at once for being over its address's cap.
pub type Refused = Arc<dyn Fn(SocketAddr) + Send + Sync>;

/// Serves `app` on `listener` within `limits` until `shutdown` resolves; then accepts no more,
/// lets each connection finish the request it is serving (idle ones close at once), and
/// returns when all have closed. Dropping the future drops every connection.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    serve_reporting(listener, app, limits, Arc::new(|_| {}), shutdown).await
}

/// [`serve`], telling `refused` of each connection closed for being over its address's cap.
pub async fn serve_reporting(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    refused: Refused,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let per_address = PerAddress::new(limits.max_connections_per_address);
    let mut make = app.into_make_service_with_connect_info::<SocketAddr>();
    let (stop, stopping) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut shutdown = pin!(shutdown);
    loop {
        while connections.try_join_next().is_some() {}
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break, // never closed
            },
            () = &mut shutdown => break,
        };
        let (stream, addr) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) if is_connection_error(&e) => continue,
                Err(e) => {
                    // Out of descriptors, or memory: wait a moment rather than spin.
                    tracing::error!(error = %e, "cannot accept a connection; trying again in 1s");
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                        () = &mut shutdown => break,
                    }
                }
            },
            () = &mut shutdown => break,
        };
        let Some(held) = per_address.open(addr.ip()) else {
            // Closed at once (with its slot): this client holds its share already.
            drop((stream, permit));
            refused(addr);
            continue;
        };
        let Ok(service) = make.call(addr).await;
        let service = TowerToHyperService::new(service);
        connections.spawn(connection(stream, service, limits, stopping.clone(), (permit, held)));
    }
    drop(listener);
    let _ = stop.send(true);
    while connections.join_next().await.is_some() {}
}

fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(e.kind(), ConnectionRefused | ConnectionAborted | ConnectionReset)
}

/// Serves one connection until it closes, its limits close it, or shutdown lets it end.
async fn connection<S>(
    stream: TcpStream,
    service: S,
    limits: Limits,
    mut stopping: watch::Receiver<bool>,
    _slot: (OwnedSemaphorePermit, Held),
) where
    S: hyper::service::Service<
            hyper::Request<hyper::body::Incoming>,
            Response = axum::response::Response,
            Error = std::convert::Infallible,
        > + Send
        + 'static,
    S::Future: Send + 'static,
{
    let moved = Arc::new(Moved::new());
    let io = TokioIo::new(Watched { inner: stream, moved: moved.clone() });
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(Duration::from_millis(limits.header_read_timeout_ms));
    let mut conn = pin!(http.serve_connection(io, service));
    let idle = Duration::from_millis(limits.idle_timeout_ms);
    let mut draining = false;
    loop {
        tokio::select! {
            // An error here is the client's (gone, or too slow): nothing to report.
            _ = conn.as_mut() => return,
            _ = stopping.wait_for(|s| *s), if !draining => {
                draining = true;
                conn.as_mut().graceful_shutdown();
            }
            () = tokio::time::sleep_until(moved.last() + idle) => {
                if moved.last() + idle <= Instant::now() {
                    return;
                }
            }
        }
    }
}

/// Connections open per client ([`client`]), capped (0: no cap). Holds an entry only while
/// that client has a connection open, so it is no larger than the connections served.
#[derive(Clone)]
struct PerAddress {
    cap: usize,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl PerAddress {
    fn new(cap: usize) -> Self {
        PerAddress { cap, open: Arc::default() }
    }

    /// One more connection from `ip`, held until the [`Held`] is dropped; `None` when `ip`'s
    /// client has `cap` open already.
    fn open(&self, ip: IpAddr) -> Option<Held> {
        if self.cap == 0 {
            return Some(Held(None));
        }
        let key = client(ip);
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(key).or_insert(0);
        if *n >= self.cap {
            return None;
        }
        *n += 1;
        Some(Held(Some((self.clone(), key))))
    }
}

/// A connection counted against its client's cap, until dropped.
struct Held(Option<(PerAddress, IpAddr)>);

impl Drop for Held {
    fn drop(&mut self) {
        if let Some((per, key)) = self.0.take() {
            let mut open = per.open.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(n) = open.get_mut(&key) {
                *n -= 1;
                if *n == 0 {
                    open.remove(&key);
                }
            }
        }
    }
}

/// When a byte last moved on a connection.
struct Moved {
    since: Instant,
    ms: AtomicU64,
}

impl Moved {
    fn new() -> Self {
        Moved { since: Instant::now(), ms: AtomicU64::new(0) }
    }

    fn now(&self) {
        self.ms.store(self.since.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    fn last(&self) -> Instant {
        self.since + Duration::from_millis(self.ms.load(Ordering::Relaxed))
    }
}

/// A stream that notes when bytes move.
struct Watched {
    inner: TcpStream,
    moved: Arc<Moved>,
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

#[cfg(test)]
mod tests;
