//! IAM authentication to Memorystore: the AUTH password is an OAuth access token from the
//! service's Google credentials (Application Default Credentials), which the auth library caches
//! and renews before it expires.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use gce_backend_queues::link::TokenSource;
use google_cloud_auth::credentials::AccessTokenCredentials;

/// The scope Memorystore's IAM authentication accepts.
const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

struct GoogleTokens(AccessTokenCredentials);

impl TokenSource for GoogleTokens {
    fn token(&self) -> Pin<Box<dyn Future<Output = Result<String, String>> + Send + '_>> {
        Box::pin(async move { self.0.access_token().await.map(|t| t.token).map_err(|e| e.to_string()) })
    }
}

/// Access tokens from Application Default Credentials.
pub fn google_tokens() -> Result<Arc<dyn TokenSource>, String> {
    super::install_crypto();
    let credentials = google_cloud_auth::credentials::Builder::default()
        .with_scopes([SCOPE])
        .build_access_token_credentials()
        .map_err(|e| format!("auth=iam: Google credentials: {e}"))?;
    Ok(Arc::new(GoogleTokens(credentials)))
}
