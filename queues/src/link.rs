//! How the service reaches Redis: one connection type for the store, the queues, the cron claims
//! and `recover`, whatever the `--redis` URL names: one server (`redis://`, `rediss://`), a
//! primary behind sentinels (`redis+sentinel://`, followed on promotion) or a cluster
//! (`redis+cluster://`, MOVED/ASK followed and the slot map refreshed by the `redis` crate). TLS
//! checks the server's certificate (against `ca_file` when given); passwords come from the URL,
//! a file read again when it changes, or IAM access tokens ([`TokenSource`]).
//!
//! `target.rs` parses the URL (floor 1); `auth.rs` keeps rotating secrets; `setup.rs` holds what
//! a link is opened with and makes one server's connection; `sentinel.rs` follows a promoted
//! primary; this file opens the link and sends commands on it.

mod auth;
mod sentinel;
mod setup;
mod target;

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, TlsCertificates, Value};

pub use auth::TokenSource;
use auth::{Rotating, Secret};
use setup::Setup;
pub use setup::{LinkError, LinkOptions};
pub use target::{Host, Mode, Password, Target};

/// Installs the process-wide TLS crypto provider (ring), which TLS connections (to Redis, and
/// the HTTP clients' even for plain `http://`) need. Safe to call more than once.
pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A connection to a deployment's Redis, cheap to clone (clones share it); it reconnects by
/// itself, and a command sent while Redis is away fails (callers retry).
#[derive(Clone)]
pub struct Link {
    conn: Conn,
    setup: Arc<Setup>,
}

#[derive(Clone)]
enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
    Sentinel(Arc<sentinel::Follower>),
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link").field("target", &self.setup.target.redacted()).finish()
    }
}

impl Link {
    /// Parses `url` and connects with the default options.
    pub async fn open(url: &str) -> Result<Self, LinkError> {
        Self::open_with(url, LinkOptions::default()).await
    }

    /// Parses `url` and connects.
    pub async fn open_with(url: &str, options: LinkOptions) -> Result<Self, LinkError> {
        install_crypto();
        let target = Target::parse(url).map_err(|reason| LinkError::Config { url: redact(url), reason })?;
        let config = |reason: String| LinkError::Config { url: target.redacted(), reason };
        let certs = match &target.ca_file {
            Some(path) => {
                Some(std::fs::read(path).map_err(|e| config(format!("ca_file {}: {e}", path.display())))?)
            }
            None => None,
        };
        let secret = match &target.password {
            Password::File(path) => Some(Secret::File(path.clone())),
            Password::Iam => Some(Secret::Token(
                options.tokens.clone().ok_or_else(|| config("auth=iam: no Google credentials".into()))?,
            )),
            Password::None | Password::Inline(_) => None,
        };
        let creds = match secret {
            Some(s) => {
                let iam = target.password == Password::Iam;
                Some(Rotating::start(target.user.as_deref(), s, options.secret_every).await.map_err(
                    |reason| {
                        if iam {
                            LinkError::Credentials { url: target.redacted(), reason }
                        } else {
                            config(reason)
                        }
                    },
                )?)
            }
            None => None,
        };
        let setup = Arc::new(Setup { target, options, certs, creds });
        let conn = connect(&setup).await?;
        Ok(Self { conn, setup })
    }

    /// Another link to the same servers with connections of its own and no response timeout:
    /// for blocking pops, which would stall a shared connection.
    pub async fn dedicated(&self) -> Result<Self, LinkError> {
        let mut options = self.setup.options.clone();
        options.response_timeout = None;
        let setup = Arc::new(Setup {
            target: self.setup.target.clone(),
            options,
            certs: self.setup.certs.clone(),
            creds: self.setup.creds.clone(),
        });
        let conn = connect(&setup).await?;
        Ok(Self { conn, setup })
    }

    /// What it connects to (the URL without its password).
    pub fn target(&self) -> &Target {
        &self.setup.target
    }

    /// Waits until the replicas the URL counts on (`replicas=N`) hold every write sent through
    /// this link so far, for at most `within`; an error says how many did. On a cluster every
    /// primary is asked, and the fewest acknowledgements count.
    pub async fn replicated(&self, within: Duration) -> Result<(), String> {
        let wanted = self.setup.target.replicas;
        if wanted == 0 {
            return Ok(());
        }
        let acked: redis::RedisResult<i64> = redis::cmd("WAIT")
            .arg(wanted)
            .arg(within.as_millis() as u64)
            .query_async(&mut self.clone())
            .await;
        match acked {
            Ok(n) if n >= i64::from(wanted) => Ok(()),
            Ok(n) => Err(format!("{n} of {wanted} replicas acknowledged the write within {within:?}")),
            Err(e) => Err(format!("cannot ask the replicas: {e}")),
        }
    }
}

/// Opens the connections `setup` says.
async fn connect(setup: &Arc<Setup>) -> Result<Conn, LinkError> {
    let unreachable = |source| LinkError::Unreachable { url: setup.target.redacted(), source };
    match &setup.target.mode {
        Mode::Single(host) => {
            let client = setup.info(host).and_then(|info| setup.client(info)).map_err(unreachable)?;
            Ok(Conn::Single(
                client
                    .get_connection_manager_with_config(setup.manager_config())
                    .await
                    .map_err(unreachable)?,
            ))
        }
        Mode::Cluster(nodes) => {
            let infos =
                nodes.iter().map(|h| setup.info(h)).collect::<Result<Vec<_>, _>>().map_err(unreachable)?;
            let mut builder = ClusterClientBuilder::new(infos)
                .connection_timeout(Duration::from_secs(2))
                .response_timeout(setup.options.response_timeout.unwrap_or(Duration::from_secs(24 * 3600)));
            if setup.target.tls {
                builder = builder.tls(redis::TlsMode::Secure);
            }
            if let Some(pem) = &setup.certs {
                builder = builder.certs(TlsCertificates { client_tls: None, root_cert: Some(pem.clone()) });
            }
            if let Some(creds) = &setup.creds {
                builder = builder.set_credentials_provider(creds.clone());
            }
            let client = builder.build().map_err(unreachable)?;
            Ok(Conn::Cluster(client.get_async_connection().await.map_err(unreachable)?))
        }
        Mode::Sentinel { .. } => {
            Ok(Conn::Sentinel(Arc::new(sentinel::Follower::start(setup.clone()).await?)))
        }
    }
}

impl ConnectionLike for Link {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match &mut self.conn {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
            Conn::Sentinel(f) => sentinel::Follower::command(f.clone(), cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipe: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match &mut self.conn {
            Conn::Single(c) => c.req_packed_commands(pipe, offset, count),
            Conn::Cluster(c) => Box::pin(async move {
                match c.req_packed_commands(pipe, offset, count).await {
                    // A transaction whose slot moved (a failover, a resharding) is aborted whole
                    // and the client does not learn where the slot went: a keyed command there
                    // teaches it (MOVED is followed and the slot map refreshed), then it is sent
                    // again (an aborted transaction did nothing).
                    Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ExecAbort) => {
                        if let Some(key) = first_key(pipe) {
                            let probe: redis::RedisResult<Value> =
                                redis::cmd("EXISTS").arg(key).query_async(c).await;
                            if let Err(e) = probe {
                                tracing::debug!(error = %e, "probing a moved slot failed");
                            }
                        }
                        c.req_packed_commands(pipe, offset, count).await
                    }
                    other => other,
                }
            }),
            Conn::Sentinel(f) => sentinel::Follower::commands(f.clone(), pipe, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        self.setup.target.db
    }
}

/// The first key a pipeline's commands name (the key after a script's or function's name and
/// key count), which routes it in a cluster.
fn first_key(pipe: &Pipeline) -> Option<Vec<u8>> {
    for cmd in pipe.cmd_iter() {
        let args: Vec<&[u8]> = cmd
            .args_iter()
            .filter_map(|a| match a {
                redis::Arg::Simple(b) => Some(b),
                _ => None,
            })
            .collect();
        let name = args.first()?.to_ascii_uppercase();
        let at = match name.as_slice() {
            b"MULTI" | b"EXEC" => continue,
            b"EVAL" | b"EVALSHA" | b"FCALL" => 3,
            _ => 1,
        };
        return args.get(at).map(|k| k.to_vec());
    }
    None
}

/// `url` with what comes before the last `@` of its hosts replaced: for a URL too broken to
/// parse, whose password must not reach a message either.
pub fn redact(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), url),
    };
    // Without a scheme nothing says where the hosts end: anything before an `@` may be secret.
    let authority_end =
        if scheme.is_empty() { rest.len() } else { rest.find(['/', '?']).unwrap_or(rest.len()) };
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}***@{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
}
