//! A primary found through sentinels, and followed: when a command fails because the primary is
//! gone (or answers READONLY, demoted), the sentinels are asked again and, once they name
//! another primary, commands go there. The failed command's error reaches its caller, who
//! retries, as with any lost connection.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{Cmd, ConnectionAddr, Pipeline, RedisError, RedisFuture, TlsCertificates, TlsMode, Value};

use super::setup::{LinkError, Setup};
use super::target::{Mode, Password};

/// The connection to the primary the sentinels name now.
pub(super) struct Follower {
    setup: Arc<Setup>,
    sentinels: tokio::sync::Mutex<SentinelClient>,
    current: RwLock<(String, ConnectionManager)>,
    asking: AtomicBool,
}

impl Follower {
    /// Asks the sentinels for the primary and connects to it.
    pub(super) async fn start(setup: Arc<Setup>) -> Result<Self, LinkError> {
        let unreachable = |source| LinkError::Unreachable { url: setup.target.redacted(), source };
        let mut client = sentinel_client(&setup).map_err(unreachable)?;
        let (addr, primary) = primary(&mut client).await.map_err(unreachable)?;
        let conn =
            primary.get_connection_manager_with_config(setup.manager_config()).await.map_err(unreachable)?;
        Ok(Self {
            setup,
            sentinels: tokio::sync::Mutex::new(client),
            current: RwLock::new((addr, conn)),
            asking: AtomicBool::new(false),
        })
    }

    fn conn(&self) -> ConnectionManager {
        self.current.read().unwrap_or_else(|p| p.into_inner()).1.clone()
    }

    /// Sends `cmd` to the current primary.
    pub(super) fn command<'a>(this: Arc<Self>, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let mut conn = this.conn();
            let answer = conn.req_packed_command(cmd).await;
            this.check(answer)
        })
    }

    /// Sends a pipeline to the current primary.
    pub(super) fn commands<'a>(
        this: Arc<Self>,
        pipe: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let mut conn = this.conn();
            let answer = conn.req_packed_commands(pipe, offset, count).await;
            this.check(answer)
        })
    }

    /// Passes `answer` on; one that says the primary is gone or demoted asks the sentinels again
    /// (in the background, one question at a time).
    fn check<T>(self: &Arc<Self>, answer: Result<T, RedisError>) -> Result<T, RedisError> {
        if let Err(e) = &answer {
            let moved = e.is_io_error()
                || e.is_connection_dropped()
                || e.is_connection_refusal()
                || e.is_timeout()
                || matches!(e.code(), Some("READONLY" | "MASTERDOWN" | "LOADING"));
            if moved && !self.asking.swap(true, Ordering::SeqCst) {
                let this = self.clone();
                tokio::spawn(async move {
                    this.ask_again().await;
                    // At most one question every half second, however many commands fail.
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    this.asking.store(false, Ordering::SeqCst);
                });
            }
        }
        answer
    }

    async fn ask_again(&self) {
        let mut client = self.sentinels.lock().await;
        let (addr, primary) = match primary(&mut client).await {
            Ok(named) => named,
            Err(e) => return tracing::warn!(error = %e, "cannot ask the Redis sentinels for the primary"),
        };
        let was = self.current.read().unwrap_or_else(|p| p.into_inner()).0.clone();
        if was == addr {
            return;
        }
        match primary.get_connection_manager_with_config(self.setup.manager_config()).await {
            Ok(conn) => {
                tracing::warn!(from = %was, to = %addr, "the sentinels name another Redis primary; following it");
                *self.current.write().unwrap_or_else(|p| p.into_inner()) = (addr, conn);
            }
            Err(e) => {
                tracing::warn!(primary = %addr, error = %e, "cannot reach the primary the sentinels name")
            }
        }
    }
}

fn sentinel_client(setup: &Setup) -> redis::RedisResult<SentinelClient> {
    let Mode::Sentinel { sentinels, master } = &setup.target.mode else {
        unreachable!("a follower is made for a sentinel target");
    };
    let tls = setup.target.tls;
    let addrs = sentinels.iter().map(|h| {
        if tls {
            ConnectionAddr::TcpTls { host: h.host.clone(), port: h.port, insecure: false, tls_params: None }
        } else {
            ConnectionAddr::Tcp(h.host.clone(), h.port)
        }
    });
    let mut builder = SentinelClientBuilder::new(addrs, master, SentinelServerType::Master)?
        .set_client_to_redis_db(setup.target.db);
    if tls {
        builder = builder
            .set_client_to_redis_tls_mode(TlsMode::Secure)
            .set_client_to_sentinel_tls_mode(TlsMode::Secure);
    }
    if let Some(pem) = &setup.certs {
        let certs = || TlsCertificates { client_tls: None, root_cert: Some(pem.clone()) };
        builder =
            builder.set_client_to_redis_certificates(certs()).set_client_to_sentinel_certificates(certs());
    }
    if let Some(user) = &setup.target.user {
        builder = builder.set_client_to_redis_username(user);
    }
    if let Password::Inline(p) = &setup.target.password {
        builder = builder.set_client_to_redis_password(p);
    }
    builder.build()
}

/// The primary the sentinels name: its address and a client for it.
async fn primary(client: &mut SentinelClient) -> redis::RedisResult<(String, redis::Client)> {
    let primary = client.async_get_client().await?;
    Ok((primary.get_connection_info().addr().to_string(), primary))
}
