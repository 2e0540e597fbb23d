//! A deployment's queue engine, store and rate-limit buckets: on Redis (waiting for it at start,
//! a bad URL or namespace refused at once), or in memory for the embedded default.

use std::sync::Arc;
use std::time::Duration;

use gce_backend_jobs::ports::buckets::{Buckets, MemoryBuckets};
use gce_backend_jobs::ports::store::Store;
use gce_backend_jobs::store::memory::MemoryStore;
use gce_backend_queues::link::{Link, LinkError, LinkOptions, Password, Target, redact};
use gce_backend_queues::{Engine, MemoryEngine, RedisEngine};

use crate::adapters::redis_store::{Layout, RedisStore};

/// The engine, store and rate-limit buckets of a deployment.
pub type Backends = (Arc<dyn Engine>, Arc<dyn Store>, Arc<dyn Buckets>);

/// A deployment's backends: on Redis at `redis` (waiting for it), or in memory without one.
pub async fn open(redis: Option<&str>, namespace: &str) -> anyhow::Result<Backends> {
    Ok(match redis {
        Some(url) => connect(url, namespace).await?,
        None => {
            (Arc::new(MemoryEngine::new()), Arc::new(MemoryStore::new()), Arc::new(MemoryBuckets::default()))
        }
    })
}

/// Connects the queues and the store to Redis (one link they share), waiting for it with
/// backoff (as workers do when it goes away later); a bad URL or namespace is an error at once.
async fn connect(url: &str, namespace: &str) -> anyhow::Result<Backends> {
    let mut delay = Duration::from_millis(500);
    loop {
        match link(url).await {
            Ok(link) => {
                let engine = RedisEngine::on(link.clone(), namespace)
                    .map_err(|e| anyhow::anyhow!("--namespace {namespace}: {e}"))?;
                let cluster = matches!(link.target().mode, gce_backend_queues::link::Mode::Cluster(_));
                let store = Arc::new(RedisStore::on(link, namespace));
                if cluster && store.key_layout().await.ok() == Some(Layout::One) {
                    tracing::warn!(
                        "the store is in key layout 1 (every key in one cluster slot, so one primary serves \
                         them all): once every process runs this release, move it with \
                         `gce-backend recover migrate --apply` (docs/redis.md, \"Key layouts\")"
                    );
                }
                return Ok((Arc::new(engine), store.clone(), store));
            }
            Err(Fatal(e)) => return Err(e),
            Err(Retry(e)) => {
                tracing::warn!(error = %e, retry_in = ?delay, "Redis is not reachable; waiting for it")
            }
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(10));
    }
}

/// Longest a first connection to Redis may take before it counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Why a connection failed: worth waiting for, or a mistake. Either message names the URL
/// without its password.
#[derive(Debug)]
pub enum ConnectError {
    /// Redis is not there (yet).
    Retry(String),
    /// The URL, a file it names, or the namespace is wrong.
    Fatal(anyhow::Error),
}
use ConnectError::{Fatal, Retry};

impl ConnectError {
    /// The error of a command that tries once (`recover`): not waiting for Redis.
    pub fn once(self) -> anyhow::Error {
        match self {
            Retry(e) => anyhow::anyhow!("Redis is not reachable: {e}"),
            Fatal(e) => e,
        }
    }
}

/// A link to the Redis `url` names (IAM tokens from the service's Google credentials where it
/// asks for them), within [`CONNECT_TIMEOUT`].
pub async fn link(url: &str) -> Result<Link, ConnectError> {
    let target =
        Target::parse(url).map_err(|reason| Fatal(LinkError::Config { url: redact(url), reason }.into()))?;
    let mut options = LinkOptions::default();
    if target.password == Password::Iam {
        options.tokens = Some(
            super::redis_auth::google_tokens()
                .map_err(|e| Fatal(anyhow::anyhow!("--redis {target}: {e}")))?,
        );
    }
    match tokio::time::timeout(CONNECT_TIMEOUT, Link::open_with(url, options)).await {
        Err(_) => Err(Retry(format!("--redis {target}: no answer within {CONNECT_TIMEOUT:?}"))),
        Ok(Ok(link)) => Ok(link),
        Ok(Err(e @ LinkError::Config { .. })) => Err(Fatal(e.into())),
        // Unreachable servers, and credentials not to be had yet.
        Ok(Err(e)) => Err(Retry(e.to_string())),
    }
}

/// The queue engine on Redis, within [`CONNECT_TIMEOUT`].
pub async fn redis_engine(url: &str, namespace: &str) -> Result<RedisEngine, ConnectError> {
    RedisEngine::on(link(url).await?, namespace)
        .map_err(|e| Fatal(anyhow::anyhow!("--namespace {namespace}: {e}")))
}

/// The store on Redis, within [`CONNECT_TIMEOUT`].
pub async fn redis_store(url: &str, namespace: &str) -> Result<RedisStore, ConnectError> {
    Ok(RedisStore::on(link(url).await?, namespace))
}
