//! What Swarming said about a bot: the bot as listed or got, and an observation of it with
//! its time (what `manage_bot` acts on when it changes).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// What Swarming last said about a bot (from the ListBots walk or GetBot).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Bot {
    /// Bot id.
    pub id: String,
    /// First connection of this bot.
    pub first_seen: Option<DateTime<Utc>>,
    /// Last contact.
    pub last_seen: Option<DateTime<Utc>>,
    /// Dead (no contact for Swarming's death timeout, or stopped).
    pub is_dead: bool,
    /// Deleted from Swarming.
    pub deleted: bool,
    /// Set when it died because of TerminateBot.
    pub termination_task_id: String,
    /// The task it runs now (empty: idle).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub task_id: String,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

impl Bot {
    /// Whether its last contact is older than `after` at `now` (Swarming takes minutes to call a
    /// silent bot dead).
    pub fn silent(&self, now: DateTime<Utc>, after: chrono::Duration) -> bool {
        self.last_seen.is_some_and(|t| t + after < now)
    }
}

/// A bot observation with the time it was made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Observed {
    /// The bot.
    pub bot: Bot,
    /// When it was seen.
    pub at: DateTime<Utc>,
    /// Since when it has run no task, as walks of Swarming saw it (none: busy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_since: Option<DateTime<Utc>>,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: crate::unknown::Unknown,
}

/// What `manage_bot` acts on in an observation: first connection, dead, deleted, terminated,
/// silent. A VM's bot is looked at when this changes from one ListBots walk to the next.
pub type Condition = (Option<DateTime<Utc>>, bool, bool, bool, bool);

impl Observed {
    /// `bot` seen at `at`, after the observation `before` of the same bot (if any): idle since
    /// `before` said, or since now when it was busy or not seen.
    pub fn after(before: Option<&Observed>, bot: Bot, at: DateTime<Utc>) -> Self {
        let idle_since = match bot.task_id.is_empty() {
            true => Some(before.and_then(|b| b.idle_since).unwrap_or(at)),
            false => None,
        };
        Self { unknown: Default::default(), bot, at, idle_since }
    }

    /// Its [`Condition`] when it was made (a bot silent for `silent_after` counts as silent).
    pub fn condition(&self, silent_after: chrono::Duration) -> Condition {
        let b = &self.bot;
        (
            b.first_seen,
            b.is_dead,
            b.deleted,
            !b.termination_task_id.is_empty(),
            b.silent(self.at, silent_after),
        )
    }
}
