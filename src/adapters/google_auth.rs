//! Google access tokens for Compute Engine and Swarming, from Application Default Credentials as
//! Google's libraries find them: the key file `GOOGLE_APPLICATION_CREDENTIALS` names (else
//! gcloud's well-known file), else the metadata server (`GCE_METADATA_HOST`, else
//! `metadata.google.internal`). Each use asks for its own scope: Compute `cloud-platform`,
//! Swarming `userinfo.email`, the one scope LUCI's servers accept an access token with.
//!
//! The metadata server and a service-account key file are spoken to here, not through the auth
//! library, for three reasons: the library signs its own JWT for a key file (Google APIs take it,
//! LUCI's servers do not: they check tokens with Google's tokeninfo), it waits without a bound on
//! a metadata server that stopped answering (and then never renews), and its failures would be
//! logged by every call. Here a token is renewed when half its life (at most five minutes of it)
//! is left, each fetch is bounded, a failed fetch is retried no sooner than a growing wait (calls
//! meanwhile fail at once, or keep the token they have while it lasts), and the first failure and
//! the recovery are each one log line. Other credential files (a user's, workload identity
//! federation) go through the library.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use google_cloud_auth::credentials::{
    AccessTokenCredentials, CacheableResource, CredentialsProvider, EntityTag,
};
use http::{Extensions, HeaderMap, HeaderValue};
use serde::Deserialize;
use tokio::time::Instant;

use gce_backend_jobs::ports::clock::Clock;

/// The scope Compute Engine takes.
pub const CLOUD_PLATFORM: &str = "https://www.googleapis.com/auth/cloud-platform";
/// The scope LUCI's servers (Swarming) require of an access token.
pub const USERINFO_EMAIL: &str = "https://www.googleapis.com/auth/userinfo.email";

/// How long one token fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The first wait after a failed fetch; it doubles up to [`MAX_WAIT`].
const FIRST_WAIT: Duration = Duration::from_secs(1);
/// The longest wait between fetches while they fail.
const MAX_WAIT: Duration = Duration::from_secs(30);
/// The grant type of a key file's signed assertion.
const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// No token could be had.
#[derive(Debug, Clone, thiserror::Error)]
#[error("Google credentials ({source_name}): {message}")]
pub struct TokenError {
    /// Where tokens come from.
    pub source_name: String,
    /// What went wrong.
    pub message: String,
    /// Whether waiting may mend it (a metadata server not answering; not a malformed key file).
    pub transient: bool,
}

#[derive(Debug, Deserialize)]
struct KeyFile {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    client_email: String,
    #[serde(default)]
    private_key_id: String,
    #[serde(default)]
    token_uri: String,
}

#[derive(Debug, Deserialize)]
struct TokenAnswer {
    access_token: String,
    #[serde(default)]
    expires_in: Option<u64>,
}

#[derive(Debug)]
enum Source {
    /// The metadata server at this origin (`http://host[:port]`).
    Metadata(String),
    /// A service-account key file: assertions signed with its key, exchanged at `token_uri`.
    KeyFile { signer: google_cloud_auth::signer::Signer, email: String, kid: String, token_uri: String },
    /// Any other credentials file, read by the auth library (each scope's credentials its own).
    Library,
}

/// Where a service's Google tokens come from, found once: every scope's [`Tokens`] share it (one
/// key file read, one HTTP client, and an outage said once between them).
#[derive(Debug)]
pub struct Adc {
    source: Source,
    name: String,
    http: reqwest::Client,
    failing: AtomicBool,
}

impl Adc {
    /// Application Default Credentials. Errors name a key file that cannot be read or used; a
    /// metadata server is not asked until a token is needed.
    pub fn discover() -> Result<Arc<Self>, String> {
        let file =
            std::env::var_os("GOOGLE_APPLICATION_CREDENTIALS").map(std::path::PathBuf::from).or_else(|| {
                let p = std::path::Path::new(&std::env::var_os("HOME")?)
                    .join(".config/gcloud/application_default_credentials.json");
                p.exists().then_some(p)
            });
        let Some(path) = file else {
            let host =
                std::env::var("GCE_METADATA_HOST").unwrap_or_else(|_| "metadata.google.internal".into());
            return Self::metadata(&host);
        };
        let shown = path.display().to_string();
        let bad = |e: String| format!("credentials file {shown}: {e}");
        let text = std::fs::read_to_string(&path).map_err(|e| bad(e.to_string()))?;
        let json: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| bad(format!("not JSON: {e}")))?;
        let key: KeyFile = serde_json::from_value(json.clone()).map_err(|e| bad(e.to_string()))?;
        if key.kind != "service_account" {
            return Self::new(Source::Library, format!("the credentials file {shown}"));
        }
        gce_backend_jobs::config::check_endpoint("the key file's token_uri", &key.token_uri).map_err(bad)?;
        let signer = google_cloud_auth::credentials::service_account::Builder::new(json)
            .build_signer()
            .map_err(|e| bad(e.to_string()))?;
        let source = Source::KeyFile {
            signer,
            email: key.client_email,
            kid: key.private_key_id,
            token_uri: key.token_uri,
        };
        Self::new(source, format!("the key file {shown}"))
    }

    /// The metadata server at `host` (`host[:port]`).
    pub fn metadata(host: &str) -> Result<Arc<Self>, String> {
        Self::new(Source::Metadata(format!("http://{host}")), format!("the metadata server at {host}"))
    }

    fn new(source: Source, name: String) -> Result<Arc<Self>, String> {
        super::install_crypto();
        let http = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("http client: {e}"))?;
        Ok(Arc::new(Self { source, name, http, failing: AtomicBool::new(false) }))
    }

    /// Where the tokens come from (for messages).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Tokens of `scopes` from here.
    pub fn tokens(self: &Arc<Self>, scopes: &[&str]) -> Result<Tokens, String> {
        let library = match self.source {
            Source::Library => Some(
                google_cloud_auth::credentials::Builder::default()
                    .with_scopes(scopes.iter().copied())
                    .build_access_token_credentials()
                    .map_err(|e| format!("{}: {e}", self.name))?,
            ),
            _ => None,
        };
        Ok(Tokens {
            adc: Arc::clone(self),
            scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
            library,
            state: tokio::sync::Mutex::default(),
        })
    }
}

#[derive(Debug)]
struct Held {
    token: String,
    expires: Instant,
    lifetime: Duration,
}

impl Held {
    /// Renewed from then on: when half its life (at most five minutes of it) is left.
    fn renew(&self) -> Instant {
        self.expires - (self.lifetime / 2).min(Duration::from_secs(300))
    }

    /// Not sent with less life than this left (a quarter of it, at most 10 s: the call may
    /// take that long to arrive).
    fn margin(&self) -> Duration {
        (self.lifetime / 4).min(Duration::from_secs(10))
    }
}

#[derive(Debug, Default)]
struct State {
    held: Option<Held>,
    /// While fetches fail: no fetch before this, and the wait after the next failure.
    retry: Option<(Instant, Duration, TokenError)>,
}

impl State {
    /// The token held, if it has more than its margin of life left at `now`.
    fn kept(&self, now: Instant) -> Option<String> {
        self.held.as_ref().filter(|h| h.expires > now + h.margin()).map(|h| h.token.clone())
    }
}

/// Access tokens of one scope, renewed before they expire.
#[derive(Debug)]
pub struct Tokens {
    adc: Arc<Adc>,
    scopes: Vec<String>,
    /// The auth library's credentials, for [`Source::Library`].
    library: Option<AccessTokenCredentials>,
    state: tokio::sync::Mutex<State>,
}

impl Tokens {
    /// A current token: the one held until it is due for renewal, else a new one (kept, if the
    /// fetch fails, while it has a margin of life left for the call it goes on).
    pub async fn token(&self) -> Result<String, TokenError> {
        let mut state = self.state.lock().await;
        let now = Instant::now();
        if let Some(h) = state.held.as_ref().filter(|h| h.renew() > now) {
            return Ok(h.token.clone());
        }
        if let Some((not_before, _, e)) = &state.retry
            && *not_before > now
        {
            return state.kept(now).ok_or_else(|| e.clone());
        }
        let fetched = match tokio::time::timeout(FETCH_TIMEOUT, self.fetch()).await {
            Ok(r) => r,
            Err(_) => Err((true, format!("no answer within {}s", FETCH_TIMEOUT.as_secs()))),
        };
        // The fetch took time: what is kept or renewed is measured from when it ended.
        let now = Instant::now();
        let adc = &self.adc;
        match fetched {
            Ok((token, lifetime)) => {
                let lifetime = lifetime.max(Duration::from_secs(2));
                state.held = Some(Held { token: token.clone(), expires: now + lifetime, lifetime });
                state.retry = None;
                if adc.failing.swap(false, Ordering::Relaxed) {
                    tracing::info!(source = %adc.name, "Google credentials: tokens again");
                }
                Ok(token)
            }
            Err((transient, message)) => {
                let e = TokenError { source_name: adc.name.clone(), message, transient };
                let wait = state.retry.as_ref().map_or(FIRST_WAIT, |r| (r.1 * 2).min(MAX_WAIT));
                if !adc.failing.swap(true, Ordering::Relaxed) {
                    tracing::error!(error = %e, "no Google access token: Compute and Swarming calls fail and are retried with backoff until one is had (asked again within {}s at most)", MAX_WAIT.as_secs());
                } else {
                    tracing::debug!(error = %e, "still no Google access token");
                }
                state.retry = Some((now + wait, wait, e.clone()));
                state.kept(now).ok_or(e)
            }
        }
    }

    /// One fetch: the token and its lifetime, or (transient, why not).
    async fn fetch(&self) -> Result<(String, Duration), (bool, String)> {
        let http = &self.adc.http;
        let (answer, what) = match (&self.adc.source, &self.library) {
            (_, Some(c)) => {
                let t = c.access_token().await.map_err(|e| (e.is_transient(), e.to_string()))?;
                // The library renews its own tokens; ask it again within a minute.
                return Ok((t.token, Duration::from_secs(120)));
            }
            (Source::Metadata(origin), None) => {
                let url = format!("{origin}/computeMetadata/v1/instance/service-accounts/default/token");
                let req = http
                    .get(url)
                    .header("Metadata-Flavor", "Google")
                    .query(&[("scopes", self.scopes.join(","))]);
                (req.send().await, "the metadata server")
            }
            (Source::KeyFile { signer, email, kid, token_uri }, None) => {
                let assertion = self.assertion(signer, email, kid, token_uri).await?;
                let req = http.post(token_uri).form(&[("grant_type", JWT_BEARER), ("assertion", &assertion)]);
                (req.send().await, "the token endpoint")
            }
            (Source::Library, None) => return Err((false, "no credentials built for this file".into())),
        };
        let resp = answer.map_err(|e| match e.is_timeout() {
            true => (true, format!("{what}: no answer within {}s", FETCH_TIMEOUT.as_secs())),
            false => (true, format!("{what}: {}", crate::error::causes(&e))),
        })?;
        let status = resp.status();
        let body = resp.text().await.map_err(|e| (true, format!("{what}: {e}")))?;
        if !status.is_success() {
            let shown: String = body.trim().chars().take(300).collect();
            let transient = status.is_server_error() || status.as_u16() == 429;
            return Err((transient, format!("{what} answered {status}: {shown}")));
        }
        let a: TokenAnswer =
            serde_json::from_str(&body).map_err(|e| (false, format!("{what}: not a token answer: {e}")))?;
        Ok((a.access_token, Duration::from_secs(a.expires_in.unwrap_or(3600))))
    }

    /// A key file's signed assertion for its token endpoint (RFC 7523), valid for an hour.
    async fn assertion(
        &self,
        signer: &google_cloud_auth::signer::Signer,
        email: &str,
        kid: &str,
        token_uri: &str,
    ) -> Result<String, (bool, String)> {
        let now = super::SystemClock.now().timestamp();
        let header = serde_json::json!({"alg": "RS256", "typ": "JWT", "kid": kid});
        let claims = serde_json::json!({"iss": email, "scope": self.scopes.join(" "), "aud": token_uri,
            "iat": now, "exp": now + 3600});
        let signed = format!("{}.{}", B64.encode(header.to_string()), B64.encode(claims.to_string()));
        let sig = signer.sign(signed.as_bytes()).await.map_err(|e| (false, format!("signing: {e}")))?;
        Ok(format!("{signed}.{}", B64.encode(sig)))
    }
}

/// [`Tokens`] as the official clients' credentials (`Authorization: Bearer …` on every call).
#[derive(Debug, Clone)]
pub struct Bearer(pub Arc<Tokens>);

impl CredentialsProvider for Bearer {
    async fn headers(
        &self,
        _extensions: Extensions,
    ) -> Result<CacheableResource<HeaderMap>, google_cloud_auth::errors::CredentialsError> {
        let token =
            self.0.token().await.map_err(|e| {
                google_cloud_auth::errors::CredentialsError::from_msg(e.transient, e.to_string())
            })?;
        let mut value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
            google_cloud_auth::errors::CredentialsError::from_msg(false, "the token is not a header value")
        })?;
        value.set_sensitive(true);
        let mut data = HeaderMap::new();
        data.insert(http::header::AUTHORIZATION, value);
        Ok(CacheableResource::New { entity_tag: EntityTag::new(), data })
    }

    async fn universe_domain(&self) -> Option<String> {
        None
    }
}

#[cfg(test)]
mod tests;
