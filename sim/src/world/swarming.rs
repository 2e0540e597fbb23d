//! Swarming on the world: bots, their tasks, events, termination and deletion, and their JSON.

use super::*;

impl World {
    /// The task a bot is running now, if any (tasks run back to back: `bot_task_ms` busy,
    /// `bot_idle_ms` idle, from the moment it connected).
    fn task_of(&self, b: &Bot) -> Option<(u64, Instant)> {
        let (busy, idle) = (self.cfg.bot_task_ms, self.cfg.bot_idle_ms);
        if busy == 0 || b.dead_at.is_some() {
            return None;
        }
        let cycle = busy + idle;
        let since = self.now.saturating_duration_since(b.connected_at).as_millis() as u64;
        let (k, phase) = (since / cycle, since % cycle);
        (phase < busy).then(|| (k, b.connected_at + Duration::from_millis(k * cycle + busy)))
    }

    /// `GetBot` (also for deleted bots, as Swarming answers them).
    pub fn bot_json(&self, server: &str, id: &str) -> Option<Value> {
        let b = self.bots.get(server)?.get(id)?;
        let mut v = json!({
            "botId": id,
            "externalIp": b.external_ip,
            "firstSeenTs": ts(b.first_seen),
            "lastSeenTs": ts(b.dead_at.unwrap_or_else(|| self.now_utc())),
            "dimensions": [
                {"key": "id", "value": [id]},
                {"key": "pool", "value": ["gce"]},
                {"key": "zone", "value": [b.zone]},
            ],
            "version": "simulated",
            "sessionId": format!("{:x}", b.session),
            "authenticatedAs": format!("bot:{id}"),
        });
        if let Some((k, _)) = self.task_of(b) {
            v["taskId"] = json!(format!("{:x}{k:04x}0", b.session & 0xffff_ffff));
        }
        if b.dead_at.is_some() {
            v["isDead"] = json!(true);
        }
        if b.deleted {
            v["deleted"] = json!(true);
        }
        if let Some(t) = &b.termination_task_id {
            v["terminationTaskId"] = json!(t);
        }
        Some(v)
    }

    /// `ListBots`: bots that are not deleted, by id, after `cursor`.
    pub fn list_bots(
        &self,
        server: &str,
        limit: usize,
        cursor: &str,
        is_dead: Option<bool>,
    ) -> (Vec<Value>, Option<String>) {
        let Some(bots) = self.bots.get(server) else { return (Vec::new(), None) };
        let mut items = Vec::new();
        let after =
            if cursor.is_empty() { std::ops::Bound::Unbounded } else { std::ops::Bound::Excluded(cursor) };
        let range = bots.range::<str, _>((after, std::ops::Bound::Unbounded));
        for (id, b) in range {
            if b.deleted || is_dead.is_some_and(|d| d != b.dead_at.is_some()) {
                continue;
            }
            items.push(self.bot_json(server, id).expect("listed"));
            if items.len() == limit {
                return (items, Some(id.clone()));
            }
        }
        (items, None)
    }

    /// `ListBotEvents`: newest first, optionally since `start`.
    pub fn bot_events(
        &self,
        server: &str,
        id: &str,
        limit: usize,
        start: Option<DateTime<Utc>>,
        end: Option<DateTime<Utc>>,
    ) -> Vec<Value> {
        let Some(b) = self.bots.get(server).and_then(|m| m.get(id)) else { return Vec::new() };
        b.events
            .iter()
            .rev()
            .filter(|e| start.is_none_or(|s| e.ts >= s) && end.is_none_or(|x| e.ts < x))
            .take(limit)
            .map(|e| {
                json!({"ts": ts(e.ts), "eventType": e.kind, "message": e.message, "externalIp": b.external_ip,
                       "version": "simulated", "sessionId": format!("{:x}", b.session)})
            })
            .collect()
    }

    /// `TerminateBot`: the bot finishes its current task, then dies; the same pending task id
    /// is returned while it is pending.
    pub fn terminate_bot(&mut self, server: &str, id: &str) -> String {
        let fresh = format!("{:016x}", self.rng.random::<u64>());
        let now = self.now;
        let task_end =
            self.bots.get(server).and_then(|m| m.get(id)).map(|b| self.task_of(b).map(|(_, end)| end));
        let Some(b) = self.bots.get_mut(server).and_then(|m| m.get_mut(id)) else { return fresh };
        if let Some(t) = &b.termination
            && b.dead_at.is_none()
        {
            return t.clone();
        }
        if b.dead_at.is_some() || b.deleted {
            return fresh;
        }
        b.termination = Some(fresh.clone());
        let session = b.session;
        let dies = task_end.flatten().unwrap_or(now);
        let ev = Ev::BotDeath { server: server.to_owned(), bot: id.to_owned(), session, terminated: true };
        let seq = self.next();
        self.timeline.push(Reverse((dies, seq, ev)));
        fresh
    }

    /// `DeleteBot`: true when a bot was deleted.
    pub fn delete_bot(&mut self, server: &str, id: &str) -> bool {
        let now = self.now_utc();
        let Some(b) = self.bots.get_mut(server).and_then(|m| m.get_mut(id)) else { return false };
        if b.deleted {
            return false;
        }
        b.deleted = true;
        if b.dead_at.is_none() {
            b.dead_at = Some(now);
        }
        push_event(b, now, "bot_deleted", "deleted through DeleteBot".into());
        true
    }

    /// Kills a bot now (as if its machine died).
    pub fn kill_bot(&mut self, server: &str, id: &str) -> bool {
        let Some(session) = self.bots.get(server).and_then(|m| m.get(id)).map(|b| b.session) else {
            return false;
        };
        self.apply(Ev::BotDeath {
            server: server.to_owned(),
            bot: id.to_owned(),
            session,
            terminated: false,
        });
        true
    }
}

/// Request of a `ListBots` filter value: protojson NullableBool.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(untagged)]
pub enum NullableBool {
    /// `"NULL"`, `"FALSE"`, `"TRUE"`.
    Name(NullableName),
    /// 0, 1, 2.
    Number(u8),
}

/// Names of NullableBool.
#[derive(Debug, Clone, Copy, Deserialize)]
#[allow(clippy::upper_case_acronyms)]
pub enum NullableName {
    /// No filter.
    NULL,
    /// False.
    FALSE,
    /// True.
    TRUE,
}

impl NullableBool {
    /// As a filter.
    pub fn as_filter(self) -> Option<bool> {
        match self {
            NullableBool::Name(NullableName::TRUE) | NullableBool::Number(2) => Some(true),
            NullableBool::Name(NullableName::FALSE) | NullableBool::Number(1) => Some(false),
            _ => None,
        }
    }
}
