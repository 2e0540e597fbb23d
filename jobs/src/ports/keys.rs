//! The keys identity tokens are signed with (Google's published certificates), as a port: the
//! adapter fetches and caches them; tests hold them fixed.

use std::sync::Mutex;

use async_trait::async_trait;

use crate::identity::Key;

/// Where the signing keys come from.
#[async_trait]
pub trait Keys: Send + Sync + std::fmt::Debug {
    /// The current keys. `fresh` asks the source again when a token names a key not known yet
    /// (an adapter may refuse to ask more often than it should, and answer what it has).
    async fn keys(&self, fresh: bool) -> Result<Vec<Key>, String>;
}

/// Keys that change only when told (tests, and a deployment without registration).
#[derive(Debug, Default)]
pub struct FixedKeys(pub Mutex<Vec<Key>>);

#[async_trait]
impl Keys for FixedKeys {
    async fn keys(&self, _fresh: bool) -> Result<Vec<Key>, String> {
        Ok(self.0.lock().unwrap_or_else(|e| e.into_inner()).clone())
    }
}
