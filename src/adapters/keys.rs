//! The identity token signing keys over HTTP: a JSON Web Key Set (Google's
//! `https://www.googleapis.com/oauth2/v3/certs`, or the simulator's `/oauth2/v3/certs`), kept
//! for an hour; a token naming an unknown key asks again, at most once a minute.

use std::time::Duration;
use tokio::time::Instant;

use async_trait::async_trait;
use gce_backend_jobs::identity::{Key, keys_from_jwks};
use gce_backend_jobs::ports::keys::Keys;
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
    state: std::sync::Mutex<Cache>,
    /// Held by the one request that fetches.
    fetching: Mutex<()>,
}

#[derive(Debug, Default)]
struct Cache {
    keys: Option<Vec<Key>>,
    fetched: Option<Instant>,
    /// The last fetch, whether it worked or not (fetches are at least [`AGAIN`] apart).
    tried: Option<Instant>,
}

impl HttpKeys {
    /// Keys from `url`, fetched when first asked for (redirects are not followed: the keys come
    /// from the URL given, or not at all).
    pub fn new(url: &str) -> Result<Self, String> {
        super::install_crypto();
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("http client for the identity keys: {e}"))?;
        Ok(Self { url: url.to_owned(), http, state: std::sync::Mutex::default(), fetching: Mutex::new(()) })
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The cached keys, and whether to fetch now.
    fn look(&self, fresh: bool) -> (Option<Vec<Key>>, bool) {
        let c = self.cache();
        let stale = c.fetched.is_none_or(|f| f.elapsed() >= KEEP);
        let due = c.tried.is_none_or(|t| t.elapsed() >= AGAIN) && (fresh || stale);
        (c.keys.clone(), due)
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
        let (cached, due) = self.look(fresh);
        if let (Some(keys), false) = (&cached, due) {
            return Ok(keys.clone());
        }
        // One request fetches; the others answer with what is cached, or, with nothing cached
        // yet, wait for that fetch.
        let _fetching = match (self.fetching.try_lock(), cached) {
            (Ok(g), _) => g,
            (Err(_), Some(keys)) => return Ok(keys),
            (Err(_), None) => self.fetching.lock().await,
        };
        let (cached, due) = self.look(fresh); // another request may have just fetched
        if !due {
            return cached.ok_or_else(|| format!("{}: no keys (the last fetch failed)", self.url));
        }
        self.cache().tried = Some(Instant::now());
        match self.fetch().await {
            Ok(keys) => {
                let mut c = self.cache();
                (c.keys, c.fetched) = (Some(keys.clone()), Some(Instant::now()));
                Ok(keys)
            }
            // Google unreachable for a while: the keys we had are still Google's.
            Err(e) => {
                tracing::warn!(error = %e, "cannot fetch the identity token keys");
                cached.ok_or(e)
            }
        }
    }
}

#[cfg(test)]
mod tests;
