//! A deployment's queue engine, store and rate-limit buckets: on Redis (waiting for it at start,
//! a bad URL or namespace refused at once), or in memory for the embedded default.

use std::sync::Arc;
use std::time::Duration;

use gce_backend_jobs::ports::buckets::{Buckets, MemoryBuckets};
use gce_backend_jobs::ports::store::Store;
use gce_backend_jobs::store::memory::MemoryStore;
use gce_backend_queues::{Engine, MemoryEngine, RedisEngine};

use crate::adapters::redis_store::RedisStore;

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

/// Connects the queues and the store to Redis, waiting for it with backoff (as workers do when
/// it goes away later); a bad URL or namespace is an error at once.
async fn connect(url: &str, namespace: &str) -> anyhow::Result<Backends> {
    let mut delay = Duration::from_millis(500);
    loop {
        let error = match redis_engine(url, namespace).await {
            Ok(engine) => match redis_store(url, namespace).await {
                Ok(store) => {
                    let store = Arc::new(store);
                    return Ok((Arc::new(engine), store.clone(), store));
                }
                Err(e) => e,
            },
            Err(Fatal(e)) => return Err(e),
            Err(Retry(e)) => e,
        };
        tracing::warn!(redis = url, error = %error, retry_in = ?delay, "Redis is not reachable; waiting for it");
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(10));
    }
}

/// Longest a first connection to Redis may take before it counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Why a connection failed: worth waiting for, or a mistake.
#[derive(Debug)]
pub enum ConnectError {
    /// Redis is not there (yet).
    Retry(String),
    /// The URL or namespace is wrong.
    Fatal(anyhow::Error),
}
use ConnectError::{Fatal, Retry};

/// The queue engine on Redis, within [`CONNECT_TIMEOUT`].
pub async fn redis_engine(url: &str, namespace: &str) -> Result<RedisEngine, ConnectError> {
    match tokio::time::timeout(CONNECT_TIMEOUT, RedisEngine::connect(url, namespace)).await {
        Err(_) => Err(Retry(format!("no answer within {CONNECT_TIMEOUT:?}"))),
        Ok(Ok(e)) => Ok(e),
        Ok(Err(gce_backend_queues::QueueError::Redis(e)))
            if e.kind() == redis::ErrorKind::InvalidClientConfig =>
        {
            Err(Fatal(anyhow::anyhow!("--redis {url}: {e}")))
        }
        Ok(Err(gce_backend_queues::QueueError::Redis(e))) => Err(Retry(e.to_string())),
        Ok(Err(e)) => Err(Fatal(anyhow::anyhow!("--namespace {namespace}: {e}"))),
    }
}

/// The store on Redis, within [`CONNECT_TIMEOUT`].
pub async fn redis_store(url: &str, namespace: &str) -> Result<RedisStore, String> {
    match tokio::time::timeout(CONNECT_TIMEOUT, RedisStore::connect(url, namespace)).await {
        Err(_) => Err(format!("no answer within {CONNECT_TIMEOUT:?}")),
        Ok(r) => r.map_err(|e| e.to_string()),
    }
}
