//! IAM authentication to Memorystore: the AUTH password is an OAuth access token (scope
//! `cloud-platform`) from the service's Google credentials, the same Application Default
//! Credentials Compute's calls use (`google_auth.rs`: renewed before expiry, each fetch bounded).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use gce_backend_queues::link::TokenSource;

use super::google_auth::{Adc, CLOUD_PLATFORM, Tokens};

struct GoogleTokens(Tokens);

impl TokenSource for GoogleTokens {
    fn token(&self) -> Pin<Box<dyn Future<Output = Result<String, String>> + Send + '_>> {
        Box::pin(async move { self.0.token().await.map_err(|e| e.to_string()) })
    }
}

/// Access tokens from Application Default Credentials.
pub fn google_tokens() -> Result<Arc<dyn TokenSource>, String> {
    let tokens = Adc::discover()
        .and_then(|adc| adc.tokens(&[CLOUD_PLATFORM]))
        .map_err(|e| format!("auth=iam: Google credentials: {e}"))?;
    Ok(Arc::new(GoogleTokens(tokens)))
}
