//! The generic task contract: a payload type names its queue and its dedupe key. Payloads
//! themselves belong to the application (`jobs`), beside their handlers; they outlive deploys in
//! Redis, so a change to one is a wire change.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A payload and the queue it travels on.
pub trait Task: Serialize + DeserializeOwned + Send + Sync + Clone + std::fmt::Debug + 'static {
    /// Queue name.
    const QUEUE: &'static str;
    /// Dedupe key: at most one pending task per key.
    fn key(&self) -> String;
}
