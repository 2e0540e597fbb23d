//! What a link is opened with (its target, options, CA and rotating credentials) and how one
//! server's connection is made from it; why opening fails.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionManagerConfig;
use redis::{ConnectionAddr, IntoConnectionInfo, RedisConnectionInfo, TlsCertificates};

use super::auth::{Rotating, TokenSource};
use super::target::{Host, Password, Target};

/// How a link connects, besides its URL.
#[derive(Clone)]
pub struct LinkOptions {
    /// Where IAM access tokens come from (needed by `auth=iam`).
    pub tokens: Option<Arc<dyn TokenSource>>,
    /// How often a password file or the token source is read again.
    pub secret_every: Duration,
    /// Longest a command may wait for its answer (`None`: forever, for blocking pops).
    pub response_timeout: Option<Duration>,
}

impl Default for LinkOptions {
    fn default() -> Self {
        Self {
            tokens: None,
            secret_every: Duration::from_secs(2),
            response_timeout: Some(Duration::from_secs(10)),
        }
    }
}

impl std::fmt::Debug for LinkOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkOptions").field("secret_every", &self.secret_every).finish_non_exhaustive()
    }
}

/// Why a link could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The URL, its files or its options are wrong: waiting will not help.
    #[error("--redis {url}: {reason}")]
    Config {
        /// The URL without its password.
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// The credentials could not be had (yet): IAM tokens from a metadata server that does not
    /// answer.
    #[error("--redis {url}: {reason}")]
    Credentials {
        /// The URL without its password.
        url: String,
        /// What the token source said.
        reason: String,
    },
    /// The servers did not answer (yet).
    #[error("--redis {url}: {source}")]
    Unreachable {
        /// The URL without its password.
        url: String,
        /// What the client said.
        source: redis::RedisError,
    },
}

/// What a link was opened with: enough to open another ([`Link::dedicated`]).
pub(super) struct Setup {
    pub(super) target: Target,
    pub(super) options: LinkOptions,
    pub(super) certs: Option<Vec<u8>>,
    pub(super) creds: Option<Rotating>,
}

impl Setup {
    /// The connection info of one server: its address (TLS when asked), database and password.
    pub(super) fn info(&self, host: &Host) -> redis::RedisResult<redis::ConnectionInfo> {
        let addr = if self.target.tls {
            ConnectionAddr::TcpTls {
                host: host.host.clone(),
                port: host.port,
                insecure: false,
                tls_params: None,
            }
        } else {
            ConnectionAddr::Tcp(host.host.clone(), host.port)
        };
        let mut redis = RedisConnectionInfo::default().set_db(self.target.db);
        if let Some(user) = &self.target.user {
            redis = redis.set_username(user);
        }
        if let Password::Inline(p) = &self.target.password {
            redis = redis.set_password(p);
        }
        Ok(addr.into_connection_info()?.set_redis_settings(redis))
    }

    /// A client for one server, trusting the CA file when one is given.
    pub(super) fn client(&self, info: redis::ConnectionInfo) -> redis::RedisResult<redis::Client> {
        match &self.certs {
            Some(pem) => redis::Client::build_with_tls(
                info,
                TlsCertificates { client_tls: None, root_cert: Some(pem.clone()) },
            ),
            None => redis::Client::open(info),
        }
    }

    pub(super) fn manager_config(&self) -> ConnectionManagerConfig {
        let mut config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(2)))
            .set_response_timeout(self.options.response_timeout)
            .set_max_delay(Duration::from_secs(2))
            // A reconnection tries twice, then the next command tries again: a first connection
            // that is refused says so at once.
            .set_number_of_retries(2);
        if let Some(creds) = &self.creds {
            config = config.set_credentials_provider(creds.clone());
        }
        config
    }
}
