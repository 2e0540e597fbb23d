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
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A key server counting its fetches; it fails while `down`.
    async fn server(hits: Arc<AtomicUsize>, down: Arc<std::sync::atomic::AtomicBool>) -> String {
        let app = axum::Router::new().route(
            "/certs",
            axum::routing::get(move || {
                let (hits, down) = (hits.clone(), down.clone());
                async move {
                    hits.fetch_add(1, Ordering::SeqCst);
                    // Slow, as a loaded network is: callers arrive while a fetch runs.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    if down.load(Ordering::SeqCst) {
                        return (axum::http::StatusCode::SERVICE_UNAVAILABLE, String::new());
                    }
                    let jwk = crate::sim::identity::jwk(crate::sim::identity::KEY, "k1").unwrap();
                    (axum::http::StatusCode::OK, serde_json::json!({"keys": [jwk]}).to_string())
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/certs", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        url
    }

    #[tokio::test]
    async fn keys_are_fetched_once_kept_and_asked_again_at_most_once_a_minute() {
        let (hits, down) =
            (Arc::new(AtomicUsize::new(0)), Arc::new(std::sync::atomic::AtomicBool::new(true)));
        let keys = Arc::new(HttpKeys::new(&server(hits.clone(), down.clone()).await).unwrap());
        // Down at start: one fetch for many callers at once, then none for a minute.
        let tries: Vec<_> = (0..20)
            .map(|_| {
                tokio::spawn({
                    let keys = keys.clone();
                    async move { keys.keys(true).await }
                })
            })
            .collect();
        for t in tries {
            assert!(t.await.unwrap().is_err());
        }
        assert!(keys.keys(true).await.is_err());
        assert_eq!(hits.load(Ordering::SeqCst), 1, "a failed fetch counts too");
        // Up again, a minute later: fetched once, then kept (an unknown key asks again only a
        // minute after the last fetch).
        down.store(false, Ordering::SeqCst);
        keys.cache().tried = Some(Instant::now() - AGAIN);
        assert_eq!(keys.keys(false).await.unwrap()[0].kid, "k1");
        assert_eq!(keys.keys(true).await.unwrap().len(), 1);
        assert_eq!(hits.load(Ordering::SeqCst), 2);
        // Down again after an hour: the keys we had are still used.
        down.store(true, Ordering::SeqCst);
        {
            let mut c = keys.cache();
            (c.tried, c.fetched) = (Some(Instant::now() - KEEP), Some(Instant::now() - KEEP));
        }
        assert_eq!(keys.keys(false).await.unwrap()[0].kid, "k1");
        assert_eq!(hits.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn callers_that_come_while_the_first_fetch_runs_wait_for_it() {
        let (hits, down) =
            (Arc::new(AtomicUsize::new(0)), Arc::new(std::sync::atomic::AtomicBool::new(false)));
        let keys = Arc::new(HttpKeys::new(&server(hits.clone(), down).await).unwrap());
        let first = tokio::spawn({
            let keys = keys.clone();
            async move { keys.keys(false).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await; // the first one is fetching
        let others: Vec<_> = (0..10)
            .map(|_| {
                let keys = keys.clone();
                tokio::spawn(async move { keys.keys(false).await })
            })
            .collect();
        assert_eq!(first.await.unwrap().unwrap().len(), 1);
        for o in others {
            assert_eq!(o.await.unwrap().unwrap().len(), 1, "got the keys the first one fetched");
        }
        assert_eq!(hits.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_redirect_from_the_certs_url_is_not_followed() {
        let (hits, down) =
            (Arc::new(AtomicUsize::new(0)), Arc::new(std::sync::atomic::AtomicBool::new(false)));
        let elsewhere = server(hits.clone(), down).await;
        let app = axum::Router::new().fallback(move || {
            let to = elsewhere.clone();
            async move { axum::response::Redirect::temporary(&to) }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/certs", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        let keys = HttpKeys::new(&url).unwrap();
        assert!(keys.keys(true).await.is_err(), "a redirect is no key set");
        assert_eq!(hits.load(Ordering::SeqCst), 0, "the redirect's target was never asked");
    }
}
