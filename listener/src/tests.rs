//! Tests of the shared listener, over real sockets on loopback with limits of a second or
//! two: a trickled head, a silent connection, an idle keep-alive connection and a stalled body
//! are each closed; a connection that keeps sending requests is not; connections over the cap
//! wait, and over the cap per address are closed at once; shutdown lets a request in flight
//! finish. Each asserts what happens within a generous bound (20 s), never a race of a few
//! hundred milliseconds.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::routing::{get, post};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;

use super::{Limits, client, serve_reporting};

/// Longest any test waits for what must happen.
const BOUND: Duration = Duration::from_secs(20);

/// `/` answers the client's address; `/echo` its body; `/slow` says it started, then answers
/// once released.
fn app(started: Arc<Notify>, release: Arc<Notify>) -> Router {
    Router::new()
        .route("/", get(|ConnectInfo(a): ConnectInfo<SocketAddr>| async move { a.to_string() }))
        .route("/echo", post(|body: String| async move { body }))
        .route(
            "/slow",
            get(move || async move {
                started.notify_one();
                release.notified().await;
                "done"
            }),
        )
}

struct Server {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
    started: Arc<Notify>,
    release: Arc<Notify>,
    /// The peers of connections closed for their address's cap.
    refused: Arc<Mutex<Vec<SocketAddr>>>,
}

async fn start(limits: Limits) -> Server {
    limits.validate().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let refused = Arc::new(Mutex::new(Vec::new()));
    let told = refused.clone();
    let task = tokio::spawn(serve_reporting(
        listener,
        app(started.clone(), release.clone()),
        limits,
        Arc::new(move |a| told.lock().unwrap().push(a)),
        async {
            let _ = stopped.await;
        },
    ));
    Server { addr, stop, task, started, release, refused }
}

/// Limits with a head timeout and an idle timeout (ms), 16 connections, no cap per address.
fn timeouts(header_read_timeout_ms: u64, idle_timeout_ms: u64) -> Limits {
    Limits { header_read_timeout_ms, idle_timeout_ms, max_connections: 16, max_connections_per_address: 0 }
}

/// No timeout that a test could meet.
const PATIENT: Limits = Limits {
    header_read_timeout_ms: 600_000,
    idle_timeout_ms: 600_000,
    max_connections: 16,
    max_connections_per_address: 0,
};

fn get_request(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n")
}

/// Reads until the server closes the connection; what it sent meanwhile. Panics when it is
/// still open after [`BOUND`].
async fn until_closed(c: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        loop {
            match c.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    let closed = tokio::time::timeout(BOUND, read).await.is_ok();
    let text = String::from_utf8_lossy(&got).into_owned();
    assert!(closed, "the server kept the connection open; it sent: {text:?}");
    text
}

/// Reads one whole answer (head and `content-length` bytes of body).
async fn answer(c: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(BOUND, c.read(&mut buf))
            .await
            .expect("an answer within the bound")
            .unwrap_or(0);
        assert!(n > 0, "closed before a whole answer: {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_owned())
                })
                .map_or(0, |v| v.parse::<usize>().unwrap());
            if body.len() >= len {
                return text.into_owned();
            }
        }
    }
}

#[tokio::test]
async fn a_client_trickling_its_header_lines_is_cut_off() {
    let s = start(timeouts(1_000, 600_000)).await;
    let mut c = TcpStream::connect(s.addr).await.unwrap();
    c.write_all(b"GET / HTTP/1.1\r\nHost: test\r\n").await.unwrap();
    let (mut read, mut write) = c.into_split();
    // One more header line every 100 ms, for longer than the bound: the head never ends, and
    // the client never stops sending before the server gives up on it.
    let trickle = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if write.write_all(b"X-Line: x\r\n").await.is_err() {
                return;
            }
        }
    });
    let mut got = Vec::new();
    let closed = tokio::time::timeout(BOUND, read.read_to_end(&mut got)).await.is_ok();
    trickle.abort();
    assert!(closed, "a head still trickling was being read after {BOUND:?}");
    assert!(got.is_empty(), "nothing is answered: {:?}", String::from_utf8_lossy(&got));
}

#[tokio::test]
async fn a_connection_that_sends_nothing_is_closed() {
    let s = start(timeouts(1_000, 600_000)).await;
    let mut c = TcpStream::connect(s.addr).await.unwrap();
    assert_eq!(until_closed(&mut c).await, "");
}

#[tokio::test]
async fn a_kept_alive_connection_serves_requests_and_is_closed_when_none_follows() {
    let s = start(timeouts(2_000, 600_000)).await;
    let mut c = TcpStream::connect(s.addr).await.unwrap();
    // Requests one after another (each sent as soon as the previous is answered, a 2 s head
    // timeout to spare between them), for twice the head timeout: every one is answered on
    // this connection, with the client's address.
    let since = tokio::time::Instant::now();
    let mut served = 0;
    while since.elapsed() < Duration::from_secs(4) {
        c.write_all(get_request("/").as_bytes()).await.unwrap();
        let a = answer(&mut c).await;
        assert!(a.starts_with("HTTP/1.1 200"), "{a}");
        assert!(a.ends_with(&c.local_addr().unwrap().to_string()), "ConnectInfo is the client's: {a}");
        served += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(served > 1, "one connection served {served} requests");
    // Then nothing: hyper starts the head's clock as soon as it waits for the next request.
    assert_eq!(until_closed(&mut c).await, "");
}

#[tokio::test]
async fn a_stalled_body_is_closed_by_the_idle_timeout() {
    let s = start(timeouts(600_000, 1_000)).await;
    let mut c = TcpStream::connect(s.addr).await.unwrap();
    let post = |body: &str| format!("POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 10\r\n\r\n{body}");
    c.write_all(post("0123456789").as_bytes()).await.unwrap();
    let a = answer(&mut c).await;
    assert!(a.starts_with("HTTP/1.1 200") && a.ends_with("0123456789"), "{a}");
    // Three bytes of ten, then nothing.
    c.write_all(post("abc").as_bytes()).await.unwrap();
    assert_eq!(until_closed(&mut c).await, "");
}

/// Two connections, each served a request and kept open (idle).
async fn hold_two(addr: SocketAddr) -> Vec<TcpStream> {
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.write_all(get_request("/").as_bytes()).await.unwrap();
        assert!(answer(&mut c).await.starts_with("HTTP/1.1 200"));
        held.push(c);
    }
    held
}

#[tokio::test]
async fn connections_over_the_cap_wait_until_one_closes() {
    let s = start(Limits { max_connections: 2, ..PATIENT }).await;
    let mut held = hold_two(s.addr).await;
    let mut third = TcpStream::connect(s.addr).await.unwrap();
    third.write_all(get_request("/").as_bytes()).await.unwrap();
    // Not served while two hold the cap (nothing else could close them: no timeout is near):
    // a broken cap would answer within milliseconds; 2 s is a wide margin for it to show.
    let mut buf = [0u8; 64];
    let early = tokio::time::timeout(Duration::from_secs(2), third.read(&mut buf)).await;
    assert!(early.is_err(), "a third connection was served while two held the cap: {early:?}");
    drop(held.pop());
    let a = answer(&mut third).await;
    assert!(a.starts_with("HTTP/1.1 200"), "served once a slot is free: {a}");
    assert!(s.refused.lock().unwrap().is_empty(), "waiting is not refusing");
}

#[tokio::test]
async fn a_connection_over_its_address_cap_is_closed_at_once_and_counted() {
    let s = start(Limits { max_connections: 16, max_connections_per_address: 2, ..PATIENT }).await;
    let mut held = hold_two(s.addr).await;
    // A third from the same address, with a request: closed unanswered, though slots are free
    // and no timeout is near.
    let mut third = TcpStream::connect(s.addr).await.unwrap();
    let from = third.local_addr().unwrap();
    let _ = third.write_all(get_request("/").as_bytes()).await;
    assert_eq!(until_closed(&mut third).await, "");
    assert_eq!(*s.refused.lock().unwrap(), [from], "the refusal reported");
    // The two held are still served.
    for c in &mut held {
        c.write_all(get_request("/").as_bytes()).await.unwrap();
        assert!(answer(c).await.starts_with("HTTP/1.1 200"));
    }
    // Another client (a loopback address of its own, where the system has one) is served.
    let other = tokio::net::TcpSocket::new_v4().unwrap();
    if other.bind("127.0.0.2:0".parse().unwrap()).is_ok() {
        let mut c = other.connect(s.addr).await.unwrap();
        c.write_all(get_request("/").as_bytes()).await.unwrap();
        let a = answer(&mut c).await;
        assert!(a.starts_with("HTTP/1.1 200") && a.contains("127.0.0.2:"), "{a}");
    }
    // Once one of the two closes, the address may open another.
    drop(held.pop());
    let since = tokio::time::Instant::now();
    loop {
        assert!(since.elapsed() < BOUND, "the closed connection's share was never given back");
        let mut c = TcpStream::connect(s.addr).await.unwrap();
        let _ = c.write_all(b"GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n").await;
        let mut got = Vec::new();
        let _ = tokio::time::timeout(BOUND, c.read_to_end(&mut got)).await;
        if got.starts_with(b"HTTP/1.1 200") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn ipv6_clients_count_by_their_64_and_mapped_ipv4_as_ipv4() {
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    assert_eq!(client(ip("2001:db8:1:2:aaaa::1")), client(ip("2001:db8:1:2:bbbb::9")));
    assert_ne!(client(ip("2001:db8:1:2::1")), client(ip("2001:db8:1:3::1")));
    assert_eq!(client(ip("::ffff:10.0.0.7")), ip("10.0.0.7"));
    assert_ne!(client(ip("10.0.0.7")), client(ip("10.0.0.8")));
}

#[tokio::test]
async fn shutdown_lets_a_request_in_flight_finish_closes_idle_connections_and_returns() {
    let s = start(PATIENT).await;
    let mut idle = TcpStream::connect(s.addr).await.unwrap();
    idle.write_all(get_request("/").as_bytes()).await.unwrap();
    assert!(answer(&mut idle).await.starts_with("HTTP/1.1 200"));
    let mut busy = TcpStream::connect(s.addr).await.unwrap();
    busy.write_all(get_request("/slow").as_bytes()).await.unwrap();
    s.started.notified().await;
    s.stop.send(()).unwrap();
    // The idle one is closed, and the listener too, while `/slow` is still in flight.
    assert_eq!(until_closed(&mut idle).await, "");
    let since = tokio::time::Instant::now();
    while TcpStream::connect(s.addr).await.is_ok() {
        assert!(since.elapsed() < BOUND, "still listening after shutdown");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    s.release.notify_one();
    let a = answer(&mut busy).await;
    assert!(a.starts_with("HTTP/1.1 200") && a.ends_with("done"), "{a}");
    tokio::time::timeout(BOUND, s.task).await.expect("serve returned").unwrap();
}

#[test]
fn limits_are_checked() {
    Limits::default().validate().unwrap();
    let bad = Limits { header_read_timeout_ms: 0, ..Limits::DEFAULT };
    assert!(bad.validate().unwrap_err().starts_with("header_read_timeout"));
    let bad = Limits { idle_timeout_ms: 3_600_001, ..Limits::DEFAULT };
    assert!(bad.validate().unwrap_err().starts_with("idle_timeout"));
    let bad = Limits { max_connections: 0, ..Limits::DEFAULT };
    assert!(bad.validate().unwrap_err().starts_with("max_connections"));
    let bad = Limits { max_connections_per_address: 65_537, ..Limits::DEFAULT };
    assert!(bad.validate().unwrap_err().starts_with("max_connections_per_address"));
    Limits { max_connections_per_address: 0, ..Limits::DEFAULT }.validate().unwrap();
}
