//! Passwords that change while the service runs: a password file read again when it changes, and
//! IAM access tokens renewed before they expire. Every connection (and every reconnection)
//! authenticates with the newest secret, and open connections re-authenticate when it changes.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use redis::RedisResult;
use redis::auth::{BasicAuth, StreamingCredentialsProvider};
use tokio::sync::watch;

/// Where IAM access tokens come from (the service's Google credentials).
pub trait TokenSource: Send + Sync + 'static {
    /// The current access token: the same one until it nears its expiry, then a new one.
    fn token(&self) -> Pin<Box<dyn Future<Output = Result<String, String>> + Send + '_>>;
}

/// A secret that may change: read once now, then watched.
pub(crate) enum Secret {
    /// A file holding the password (a trailing newline is not part of it).
    File(PathBuf),
    /// Access tokens.
    Token(Arc<dyn TokenSource>),
}

impl Secret {
    async fn read(&self) -> Result<String, String> {
        match self {
            Secret::File(path) => {
                let text = tokio::fs::read_to_string(path)
                    .await
                    .map_err(|e| format!("password file {}: {e}", path.display()))?;
                let password = text.trim_end_matches(['\r', '\n']);
                if password.is_empty() {
                    return Err(format!("password file {} is empty", path.display()));
                }
                Ok(password.to_owned())
            }
            Secret::Token(source) => source.token().await.map_err(|e| format!("IAM access token: {e}")),
        }
    }
}

/// The credentials every connection of a link authenticates with, kept current by a task that
/// reads the secret every `every` (the token source caches its token, so this is cheap).
#[derive(Clone)]
pub(crate) struct Rotating {
    current: watch::Receiver<BasicAuth>,
    _task: Arc<AbortOnDrop>,
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Rotating {
    /// Reads the secret (an error if it cannot be had now), then watches it.
    pub(crate) async fn start(user: Option<&str>, secret: Secret, every: Duration) -> Result<Self, String> {
        let user = user.unwrap_or("default").to_owned();
        let first = secret.read().await?;
        let (tx, current) = watch::channel(BasicAuth::new(user.clone(), first.clone()));
        let task = tokio::spawn(async move {
            let mut last = first;
            loop {
                tokio::time::sleep(every).await;
                match secret.read().await {
                    Ok(next) if next != last => {
                        tracing::info!(user = %user, "Redis password changed; connections authenticate again");
                        if tx.send(BasicAuth::new(user.clone(), next.clone())).is_err() {
                            return;
                        }
                        last = next;
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot read the Redis password; keeping the last one")
                    }
                }
            }
        });
        Ok(Self { current, _task: Arc::new(AbortOnDrop(task)) })
    }
}

impl StreamingCredentialsProvider for Rotating {
    fn subscribe(&self) -> Pin<Box<dyn Stream<Item = RedisResult<BasicAuth>> + Send + 'static>> {
        let mut rx = self.current.clone();
        // A new subscriber hears the current credentials first, then each change.
        rx.mark_changed();
        Box::pin(futures::stream::unfold(rx, |mut rx| async move {
            rx.changed().await.ok()?;
            let auth = rx.borrow_and_update().clone();
            Some((Ok(auth), rx))
        }))
    }
}
