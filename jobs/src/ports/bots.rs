//! The Swarming port (`swarming.v2.Bots`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::model::Bot;

/// A Swarming error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("swarming code {code}: {message}")]
pub struct BotError {
    /// gRPC code.
    pub code: u16,
    /// Message.
    pub message: String,
}

impl BotError {
    /// NOT_FOUND.
    pub fn is_not_found(&self) -> bool {
        self.code == 5
    }
}

/// One bot event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BotEvent {
    /// When.
    pub ts: DateTime<Utc>,
    /// `bot_terminate`, `bot_connected`, …
    pub event_type: String,
}

/// Swarming's Bots service, per server URL.
#[async_trait]
pub trait Bots: Send + Sync + std::fmt::Debug {
    /// GetBot; `None` for NOT_FOUND.
    async fn get(&self, server: &str, id: &str) -> Result<Option<Bot>, BotError>;
    /// One page of ListBots.
    async fn list(
        &self,
        server: &str,
        cursor: Option<String>,
    ) -> Result<(Vec<Bot>, Option<String>), BotError>;
    /// ListBotEvents since `start`, newest first.
    async fn events(&self, server: &str, id: &str, start: DateTime<Utc>) -> Result<Vec<BotEvent>, BotError>;
    /// TerminateBot (NOT_FOUND counts as done).
    async fn terminate(&self, server: &str, id: &str) -> Result<(), BotError>;
    /// DeleteBot; false for NOT_FOUND.
    async fn delete(&self, server: &str, id: &str) -> Result<bool, BotError>;
}
