//! Tests of the shared listener, over real sockets on loopback with short limits: a trickled
//! head, a silent connection, an idle keep-alive connection and a stalled body are each closed;
//! connections over the cap wait; shutdown lets a request in flight finish.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::routing::{get, post};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;

use super::{Limits, serve};

/// `/` answers the client's address; `/echo` its body; `/slow` says it started, then answers
/// 300 ms later.
fn app(started: Arc<Notify>) -> Router {
    Router::new()
        .route("/", get(|ConnectInfo(a): ConnectInfo<SocketAddr>| async move { a.to_string() }))
        .route("/echo", post(|body: String| async move { body }))
        .route(
            "/slow",
            get(move || async move {
                started.notify_one();
                tokio::time::sleep(Duration::from_millis(300)).await;
                "done"
            }),
        )
}

struct Server {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
    started: Arc<Notify>,
}

async fn start(header_read_timeout_ms: u64, idle_timeout_ms: u64, max_connections: usize) -> Server {
    let limits = Limits { header_read_timeout_ms, idle_timeout_ms, max_connections };
    limits.validate().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let started = Arc::new(Notify::new());
    let task = tokio::spawn(serve(listener, app(started.clone()), limits, async {
        let _ = stopped.await;
    }));
    Server { addr, stop, task, started }
}

fn get_request(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n")
}

/// Reads until the server closes the connection; what it sent meanwhile. Panics when it is
/// still open after 10 s.
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
    let closed = tokio::time::timeout(Duration::from_secs(10), read).await.is_ok();
    let text = String::from_utf8_lossy(&got).into_owned();
    assert!(closed, "the server kept the connection open; it sent: {text:?}");
    text
}

/// Reads one whole answer (head and `content-length` bytes of body).
async fn answer(c: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(10), c.read(&mut buf))
            .await
            .expect("an answer within 10 s")
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
    let s = start(500, 60_000, 16).await;
    let mut c = TcpStream::connect(s.addr).await.unwrap();
    c.write_all(b"GET / HTTP/1.1\r\nHost: test\r\n").await.unwrap();
    let (mut read, mut write) = c.into_split();
    // One more header line every 100 ms, for up to 10 s: the head never ends.
    let trickle = tokio::spawn(async move {
        for i in 0..100 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if write.write_all(format!("X-Line-{i}: x\r\n").as_bytes()).await.is_err() {
                return true;
            }
        }
        false
    });
    let mut got = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(10), read.read_to_end(&mut got)).await.is_ok();
    assert!(closed, "a head trickled for 10 s was still being read");
    assert!(got.is_empty(), "nothing is answered: {:?}", String::from_utf8_lossy(&got));
    trickle.abort();
}

#[tokio::test]
async fn a_connection_that_sends_nothing_is_closed() {
    let s = start(500, 60_000, 16).await;
    let mut c = TcpStream::connect(s.addr).await.unwrap();
    assert_eq!(until_closed(&mut c).await, "");
}

#[tokio::test]
async fn a_kept_alive_connection_serves_requests_and_is_closed_when_none_follows() {
    let s = start(500, 60_000, 16).await;
    let mut c = TcpStream::connect(s.addr).await.unwrap();
    // Requests 200 ms apart, for longer than the header timeout: each is answered on the same
    // connection, with the client's address.
    for _ in 0..5 {
        c.write_all(get_request("/").as_bytes()).await.unwrap();
        let a = answer(&mut c).await;
        assert!(a.starts_with("HTTP/1.1 200"), "{a}");
        assert!(a.ends_with(&c.local_addr().unwrap().to_string()), "ConnectInfo is the client's: {a}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Then nothing: hyper starts the head's clock as soon as it waits for the next request.
    assert_eq!(until_closed(&mut c).await, "");
}

#[tokio::test]
async fn a_stalled_body_is_closed_by_the_idle_timeout() {
    let s = start(60_000, 500, 16).await;
    let mut c = TcpStream::connect(s.addr).await.unwrap();
    let post = |body: &str| format!("POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 10\r\n\r\n{body}");
    c.write_all(post("0123456789").as_bytes()).await.unwrap();
    let a = answer(&mut c).await;
    assert!(a.starts_with("HTTP/1.1 200") && a.ends_with("0123456789"), "{a}");
    // Three bytes of ten, then nothing.
    c.write_all(post("abc").as_bytes()).await.unwrap();
    assert_eq!(until_closed(&mut c).await, "");
}

#[tokio::test]
async fn connections_over_the_cap_wait_until_one_closes() {
    let s = start(60_000, 60_000, 2).await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut c = TcpStream::connect(s.addr).await.unwrap();
        c.write_all(get_request("/").as_bytes()).await.unwrap();
        assert!(answer(&mut c).await.starts_with("HTTP/1.1 200"));
        held.push(c); // kept alive, idle
    }
    let mut third = TcpStream::connect(s.addr).await.unwrap();
    third.write_all(get_request("/").as_bytes()).await.unwrap();
    let mut buf = [0u8; 64];
    let early = tokio::time::timeout(Duration::from_millis(500), third.read(&mut buf)).await;
    assert!(early.is_err(), "a third connection was served while two held the cap: {early:?}");
    drop(held.pop());
    let a = answer(&mut third).await;
    assert!(a.starts_with("HTTP/1.1 200"), "served once a slot is free: {a}");
}

#[tokio::test]
async fn shutdown_lets_a_request_in_flight_finish_closes_idle_connections_and_returns() {
    let s = start(60_000, 60_000, 16).await;
    let mut idle = TcpStream::connect(s.addr).await.unwrap();
    idle.write_all(get_request("/").as_bytes()).await.unwrap();
    assert!(answer(&mut idle).await.starts_with("HTTP/1.1 200"));
    let mut busy = TcpStream::connect(s.addr).await.unwrap();
    busy.write_all(get_request("/slow").as_bytes()).await.unwrap();
    s.started.notified().await;
    s.stop.send(()).unwrap();
    let a = answer(&mut busy).await;
    assert!(a.starts_with("HTTP/1.1 200") && a.ends_with("done"), "{a}");
    assert_eq!(until_closed(&mut idle).await, "");
    tokio::time::timeout(Duration::from_secs(10), s.task).await.expect("serve returned").unwrap();
    assert!(TcpStream::connect(s.addr).await.is_err(), "no longer listening");
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
}
