//! Test support: a private `redis-server` on a free loopback port, stopped when dropped.
//!
//! Every test that needs Redis starts its own, so parallel tests never share one. The binary is
//! `redis-server` from `PATH` (or `$REDIS_SERVER`); `scripts/test` installs it where missing.
//! `tls.rs` makes a CA and a server certificate (with `openssl`); `topology.rs` starts a primary
//! with a replica and three sentinels, or a cluster.

mod tls;
mod topology;

pub use tls::Certificates;
pub use topology::{Cluster, Sentinels};

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio::time::Instant;

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A running `redis-server` owned by one test.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    aof: bool,
    /// Served over TLS only, with these certificates.
    tls: Option<Certificates>,
    /// More arguments (a replica's `--replicaof`, a cluster node's settings).
    extra: Vec<String>,
}

impl RedisServer {
    /// Starts a server without persistence.
    pub fn start() -> Self {
        Self::launch(false)
    }

    /// Starts a server with AOF on and `appendfsync always`: every acknowledged write survives
    /// a crash of the server.
    pub fn start_with_aof() -> Self {
        Self::launch(true)
    }

    /// Starts a server that speaks TLS only (TLS 1.2+, a certificate from a CA made here).
    pub fn start_tls() -> Self {
        let dir = fresh_dir();
        let certs = Certificates::make(&dir.join("tls"));
        Self::launch_in(dir, false, Some(certs), Vec::new())
    }

    /// Starts a server with more arguments (`--replicaof …`, cluster settings).
    pub fn start_with(extra: &[&str]) -> Self {
        Self::launch_in(fresh_dir(), false, None, extra.iter().map(|s| (*s).to_owned()).collect())
    }

    fn launch(aof: bool) -> Self {
        Self::launch_in(fresh_dir(), aof, None, Vec::new())
    }

    fn launch_in(dir: PathBuf, aof: bool, tls: Option<Certificates>, extra: Vec<String>) -> Self {
        let mut last = String::new();
        let cluster = extra.iter().any(|a| a == "--cluster-enabled");
        for _ in 0..8 {
            let mut port = free_port();
            // A cluster node's bus listens on its port + 10000: that one must be free too (an
            // ephemeral port of some connection may hold it).
            while cluster && (port > 55000 || !is_free(port + 10000)) {
                port = free_port();
            }
            let mut server =
                Self { child: None, port, dir: dir.clone(), aof, tls: tls.clone(), extra: extra.clone() };
            match server.spawn() {
                Ok(()) => return server,
                Err(e) => {
                    // Its log and standard error say why; what a failed start left (a cluster's
                    // nodes.conf) goes.
                    let said = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
                    let (log, err) = (said("redis.log"), said("redis.err"));
                    let tail: Vec<&str> = log.lines().chain(err.lines()).rev().take(4).collect();
                    last = format!("{e} (port {port}; log: {})", tail.join(" | "));
                    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                        if entry.path().is_file() {
                            let _ = std::fs::remove_file(entry.path());
                        }
                    }
                }
            }
        }
        panic!("could not start redis-server: {last}");
    }

    fn spawn(&mut self) -> Result<(), String> {
        let bin = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        let mut cmd = Command::new(&bin);
        match &self.tls {
            None => cmd.arg("--port").arg(self.port.to_string()),
            Some(c) => {
                cmd.args(["--port", "0", "--tls-port"]).arg(self.port.to_string()).args(c.server_args())
            }
        };
        cmd.args(["--bind", "127.0.0.1", "--save", "", "--daemonize", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(["--logfile", "redis.log"]);
        if self.aof {
            cmd.args(["--appendonly", "yes", "--appendfsync", "always"]);
        } else {
            cmd.args(["--appendonly", "no"]);
        }
        cmd.args(&self.extra);
        // What it says before its log is open (a directory it cannot use) lands in `redis.err`.
        let err = std::fs::File::create(self.dir.join("redis.err"))
            .map(Stdio::from)
            .unwrap_or_else(|_| Stdio::null());
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .map_err(|e| format!("{bin}: {e} (install redis-server, or run scripts/test)"))?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.answers() {
                return Ok(());
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                self.child = None;
                return Err(format!("redis-server exited with {status}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
        Err("redis-server did not answer PING within 10s".into())
    }

    fn answers(&self) -> bool {
        match &self.tls {
            None => ping(self.port),
            // The handshake is the client's to check; a listening port is enough here.
            Some(_) => TcpStream::connect(("127.0.0.1", self.port)).is_ok(),
        }
    }

    /// `redis://127.0.0.1:<port>/0`, or for TLS `rediss://127.0.0.1:<port>/0?ca_file=<its CA>`.
    pub fn url(&self) -> String {
        match &self.tls {
            None => format!("redis://127.0.0.1:{}/0", self.port),
            Some(c) => format!("rediss://127.0.0.1:{}/0?ca_file={}", self.port, c.ca.display()),
        }
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its directory (its log is `redis.log` there).
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// Kills the server with SIGKILL (as a crash would).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port and directory (with AOF, the data comes back).
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.spawn() {
                Ok(()) => return,
                Err(e) if Instant::now() > deadline => panic!("restart redis-server: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn fresh_dir() -> PathBuf {
    let n = NEXT.fetch_add(1, Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("gce-backend-redis-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create redis dir");
    dir
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind a free loopback port")
}

/// Whether nothing listens on loopback `port` now.
fn is_free(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok()
}

fn ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    let mut buf = [0u8; 16];
    s.write_all(b"PING\r\n").is_ok()
        && s.read(&mut buf).map(|n| buf[..n].starts_with(b"+PONG")).unwrap_or(false)
}

/// Polls `check` every 20 ms until it returns `Some`, or panics after `limit` naming `what`.
pub async fn eventually<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out after {limit:?} waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs `run(stop)` on a tokio task, where `stop` resolves when the returned sender fires or is
/// dropped: made for apalis's `worker.run_until(stop)`.
pub fn stoppable<F, Fut, E>(
    run: F,
) -> (tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<Result<(), E>>)
where
    F: FnOnce(StopSignal) -> Fut,
    Fut: std::future::Future<Output = Result<(), E>> + Send + 'static,
    E: Send + 'static,
{
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let signal: StopSignal = Box::pin(async move {
        let _ = stopped.await;
        Ok(())
    });
    (stop, tokio::spawn(run(signal)))
}

/// The stop future handed to [`stoppable`]'s closure.
pub type StopSignal = std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<()>> + Send>>;
