//! The bot groups of a simulated Swarming server (as its bots.cfg): bots whose id starts with a
//! group's prefix have its dimensions.

use serde::{Deserialize, Serialize};

use crate::dims::{self, Dims};

/// One bots.cfg group: bots whose id starts with `prefix` have `dimensions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BotGroup {
    /// Bot-id prefix (`ci-linux-`).
    pub prefix: String,
    /// Its dimensions: key to values.
    pub dimensions: Dims,
}

/// The bot groups, as `POST /sim/bot_groups` sets them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BotGroups {
    /// The groups, as given.
    pub groups: Vec<BotGroup>,
}

impl BotGroups {
    /// From `{"groups": [{"prefix", "dimensions"}]}`; two groups with one prefix are an error.
    pub fn parse(v: &serde_json::Value) -> Result<Self, String> {
        let groups = v
            .get("groups")
            .and_then(serde_json::Value::as_array)
            .ok_or("bot groups: expected {\"groups\": [{\"prefix\", \"dimensions\"}]}")?;
        let mut out = Vec::new();
        for (n, g) in groups.iter().enumerate() {
            let prefix = g
                .get("prefix")
                .and_then(serde_json::Value::as_str)
                .ok_or_else(|| format!("groups[{n}].prefix: expected a string"))?;
            let dims = g.get("dimensions").cloned().unwrap_or_else(|| serde_json::json!({}));
            let dimensions = dims::parse(&dims, &format!("groups[{n}].dimensions"))?;
            if out.iter().any(|o: &BotGroup| o.prefix == prefix) {
                return Err(format!("groups[{n}].prefix: {prefix:?} is given twice"));
            }
            out.push(BotGroup { prefix: prefix.to_owned(), dimensions });
        }
        Ok(Self { groups: out })
    }

    /// The group of bot `id`: the one with the longest prefix of it.
    pub fn of(&self, id: &str) -> Option<&BotGroup> {
        self.groups.iter().filter(|g| id.starts_with(&g.prefix)).max_by_key(|g| g.prefix.len())
    }
}
