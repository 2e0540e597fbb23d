//! The identity token signing keys over HTTP: a JSON Web Key Set (Google's
//! `https://www.googleapis.com/oauth2/v3/certs`, or the simulator's `/oauth2/v3/certs`), kept
//! for an hour; a token naming an unknown key asks again, at most once a minute.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use gce_backend_jobs::ports::keys::Keys;
use gce_backend_jobs::providers::identity::{Key, keys_from_jwks};
use tokio::sync::Mutex;

/// Google's published keys for its identity tokens.
pub const GOOGLE_CERTS: &str = "https://www.googleapis.com/oauth2/v3/certs";
/// How long fetched keys are used.
const KEEP: Duration = Duration::from_secs(3600);
/// Least time between two fetches.
const AGAIN: Duration = Duration::from_secs(60);
/// Longest a fetch may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Keys fetched from `url`.
#[derive(Debug)]
pub struct HttpKeys {
    url: String,
    http: reqwest::Client,
    cached: Mutex<Option<(Instant, Vec<Key>)>>,
}

impl HttpKeys {
    /// Keys from `url`, fetched when first asked for.
    pub fn new(url: &str) -> Self {
        super::install_crypto();
        Self { url: url.to_owned(), http: reqwest::Client::new(), cached: Mutex::new(None) }
    }

    async fn fetch(&self) -> Result<Vec<Key>, String> {
        let res = self
            .http
            .get(&self.url)
            .timeout(TIMEOUT)
            .send()
            .await
            .map_err(|e| format!("{}: {e}", self.url))?;
        if !res.status().is_success() {
            return Err(format!("{}: HTTP {}", self.url, res.status()));
        }
        let body = res.bytes().await.map_err(|e| format!("{}: {e}", self.url))?;
        keys_from_jwks(&body).map_err(|e| format!("{}: {e}", self.url))
    }
}

#[async_trait]
impl Keys for HttpKeys {
    async fn keys(&self, fresh: bool) -> Result<Vec<Key>, String> {
        let mut cached = self.cached.lock().await;
        if let Some((at, keys)) = cached.as_ref() {
            let age = at.elapsed();
            if age < AGAIN || (!fresh && age < KEEP) {
                return Ok(keys.clone());
            }
        }
        match self.fetch().await {
            Ok(keys) => {
                *cached = Some((Instant::now(), keys.clone()));
                Ok(keys)
            }
            // Google unreachable for a while: the keys we had are still Google's.
            Err(e) => match cached.as_ref() {
                Some((_, keys)) => {
                    tracing::warn!(error = %e, "cannot refresh the identity token keys; using the ones fetched before");
                    Ok(keys.clone())
                }
                None => Err(e),
            },
        }
    }
}
