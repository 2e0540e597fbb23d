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
//! caller's business (the service's limits per token and address sit in its router, keyed by
//! [`client`] too).
//!
//! # Layout
//!
//! Floors, bottom to top, one module a line. A module imports only from the floors below it and
//! from the lines above it on its own floor, never up (`scripts/floors listener/src --layout`
//! checks it):
//!
//! 1. Settings
//!    * `limits`: [`Limits`], what a listener allows its clients, and their ranges.
//! 2. A connection's parts
//!    * `per_address`: [`client`], the address a client is limited by, and the connections open
//!      per client, capped.
//!    * `watched`: a connection's stream that notes when a byte last moved (the idle timeout's
//!      clock).
//! 3. The server
//!    * this file: [`serve`], [`serve_reporting`]: the accept loop, and one connection served
//!      within its limits until it closes or shutdown lets it end.

mod limits;
mod per_address;
mod watched;

use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tower_service::Service;

pub use limits::Limits;
pub use per_address::client;
use per_address::{Held, PerAddress};
use watched::{Moved, Watched};

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
    let io = TokioIo::new(Watched::new(stream, moved.clone()));
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

#[cfg(test)]
mod tests;
