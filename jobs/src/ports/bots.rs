//! The Swarming port (`swarming.v2.Bots`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::model::Bot;

/// What kind of Swarming failure, decided once here from the gRPC code (adapters pass it raw).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BotErrorKind {
    /// NOT_FOUND.
    NotFound,
    /// The server is not answering properly: UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL (also a
    /// malformed answer), UNKNOWN. Retry, and count it toward the server's breaker.
    Unavailable,
    /// RESOURCE_EXHAUSTED: retry later.
    RateLimited,
    /// PERMISSION_DENIED, UNAUTHENTICATED: our credentials or ACLs.
    Denied,
    /// Anything else: the request itself is wrong.
    Invalid,
}

impl BotErrorKind {
    /// Its name in metrics labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotFound => "not_found",
            Self::Unavailable => "unavailable",
            Self::RateLimited => "rate_limited",
            Self::Denied => "denied",
            Self::Invalid => "invalid",
        }
    }

    /// The kind of a gRPC status code: the one place codes are read.
    pub fn from_grpc(code: u16) -> Self {
        match code {
            5 => Self::NotFound,
            2 | 4 | 13 | 14 => Self::Unavailable,
            8 => Self::RateLimited,
            7 | 16 => Self::Denied,
            _ => Self::Invalid,
        }
    }
}

/// A Swarming error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("swarming {kind:?}: {message}")]
pub struct BotError {
    /// Classification.
    pub kind: BotErrorKind,
    /// Message (with the gRPC code the server answered, when it did).
    pub message: String,
    /// Not sent: the server's breaker is open for this much longer (the task is held back until
    /// then, not failed).
    pub retry_after: Option<std::time::Duration>,
}

impl BotError {
    /// The error for gRPC status `code`.
    pub fn grpc(code: u16, message: impl std::fmt::Display) -> Self {
        Self {
            kind: BotErrorKind::from_grpc(code),
            message: format!("code {code}: {message}"),
            retry_after: None,
        }
    }

    /// An error of `kind` with no server answer behind it (no connection, a timeout, …).
    pub fn new(kind: BotErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into(), retry_after: None }
    }

    /// NOT_FOUND.
    pub fn is_not_found(&self) -> bool {
        self.kind == BotErrorKind::NotFound
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
    /// `swarming.v2.Tasks/CountTasks` of PENDING tasks created since `start` whose tags hold
    /// every one of `tags` (`key:value`).
    async fn count_pending(
        &self,
        server: &str,
        tags: &[String],
        start: DateTime<Utc>,
    ) -> Result<u32, BotError>;
}

/// How far back pending tasks are counted: a task slice waits at most 7 days (Swarming's
/// longest expiration), so an older task is no longer pending.
pub const PENDING_LOOKBACK: chrono::TimeDelta = chrono::TimeDelta::days(7);

#[cfg(test)]
mod tests;
