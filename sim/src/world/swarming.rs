//! Swarming on the world: bots, their connection, tasks, events, termination and deletion.

use super::*;
use crate::names::{REGISTER_AUDIENCE, REGISTER_URL, audience};

impl World {
    pub(super) fn connect_bot(&mut self, server: String, key: InstanceKey, session: u64) {
        // Only the instance incarnation that booted may connect, and only while it runs.
        match self.instances.get(&key) {
            Some(i) if i.id == session && i.status == Status::Running => {}
            _ => return,
        }
        let ip = self.instances[&key].nics.iter().find_map(|n| n.nat.as_ref().map(|(_, ip)| ip.clone()));
        let (zone, bot) = (key.1.clone(), key.2.clone());
        let ip = ip.unwrap_or_else(|| self.random_ip(34));
        let item = |name: &str| {
            self.instances[&key].metadata.iter().find(|(k, _)| k == name).and_then(|(_, v)| v.clone())
        };
        if let Some(url) = item(REGISTER_URL)
            && self.registrations.len() < self.cfg.max_bots
        {
            let aud = item(REGISTER_AUDIENCE).unwrap_or_else(|| audience(&url).to_owned());
            self.registrations.push((key.clone(), (url, aud)));
        }
        self.put_bot(server, bot, session, ip, zone);
    }

    /// A bot (`bot` on `server`, session `session`) connects: a new record (its events kept),
    /// maybe doomed to an early death by the faults.
    pub(super) fn put_bot(&mut self, server: String, bot: String, session: u64, ip: String, zone: String) {
        let now = self.now_utc();
        let early = self.chance(self.faults.bot_early_death_rate);
        self.bot_stops_working(&server, &bot); // a record it replaces runs nothing any more
        let dims = self.dims_of(&bot, &zone);
        let events =
            self.bots.get(&server).and_then(|m| m.get(&bot)).map(|b| b.events.clone()).unwrap_or_default();
        let mut b = Bot {
            session,
            first_seen: now,
            connected_at: self.now,
            dead_at: None,
            deleted: false,
            termination: None,
            termination_task_id: None,
            external_ip: ip,
            zone,
            events,
            dims,
            task: None,
            silent_at: None,
            silence: 0,
        };
        push_event(&mut b, now, "bot_connected", format!("session {session:x}"));
        let replaced = self.bots.entry(server.clone()).or_default().insert(bot.clone(), b);
        self.counts.bot(replaced.as_ref().map(BotState::of), Some(BotState::Alive));
        self.bot_idle(&server, &bot);
        if early {
            let after = Duration::from_millis(self.faults.bot_early_death_ms);
            self.at(after, Ev::BotDeath { server, bot, session, terminated: false });
        }
        self.cap_bots();
    }

    fn cap_bots(&mut self) {
        let total: usize = self.bots.values().map(BTreeMap::len).sum();
        if total <= self.cfg.max_bots {
            return;
        }
        // Drop deleted bots first, then dead ones.
        for pass in [true, false] {
            let counts = &mut self.counts;
            for bots in self.bots.values_mut() {
                bots.retain(|_, b| {
                    let keep = !(b.dead_at.is_some() && (b.deleted || !pass));
                    if !keep {
                        counts.bot(Some(BotState::of(b)), None);
                    }
                    keep
                });
            }
            if self.bots.values().map(BTreeMap::len).sum::<usize>() <= self.cfg.max_bots {
                return;
            }
        }
    }

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
    pub fn bot<'a>(&'a self, server: &str, id: &str) -> Option<BotView<'a>> {
        let (id, b) = self.bots.get(server)?.get_key_value(id)?;
        Some(self.bot_view(id, b))
    }

    /// `b` (bot `id`) as `GetBot` answers it now.
    pub fn bot_view<'a>(&self, id: &'a str, b: &'a Bot) -> BotView<'a> {
        BotView {
            id,
            bot: b,
            // A bot that went silent was last seen then, whenever Swarming called it dead after.
            last_seen: b.silent_at.or(b.dead_at).unwrap_or_else(|| self.now_utc()),
            task_id: self
                .real_task_id(b)
                .or_else(|| self.task_of(b).map(|(k, _)| format!("{:x}{k:04x}0", b.session & 0xffff_ffff))),
        }
    }

    /// `ListBots`: bots that are not deleted and pass `filter`, by id, after `cursor`, and the
    /// next cursor.
    pub fn list_bots(
        &self,
        server: &str,
        limit: usize,
        cursor: &str,
        filter: &BotFilter,
    ) -> (Vec<BotView<'_>>, Option<String>) {
        let Some(bots) = self.bots.get(server) else { return (Vec::new(), None) };
        let mut items = Vec::new();
        let after =
            if cursor.is_empty() { std::ops::Bound::Unbounded } else { std::ops::Bound::Excluded(cursor) };
        let range = bots.range::<str, _>((after, std::ops::Bound::Unbounded));
        for (id, b) in range {
            if b.deleted
                || !filter.dims.matches(&b.dims)
                || filter.is_dead.is_some_and(|d| d != b.dead_at.is_some())
            {
                continue;
            }
            let view = self.bot_view(id, b);
            if filter.is_busy.is_some_and(|busy| busy != view.task_id.is_some()) {
                continue;
            }
            items.push(view);
            if items.len() == limit {
                return (items, Some(id.clone()));
            }
        }
        (items, None)
    }

    /// `CountBots`: bots not deleted matching `dims`: all of them, the busy (running a task) and
    /// the dead. O(bots of the server).
    pub fn count_bots(&self, server: &str, dims: &crate::dims::Filter) -> BotCount {
        let mut c = BotCount::default();
        for (id, b) in self.bots.get(server).into_iter().flatten() {
            if b.deleted || !dims.matches(&b.dims) {
                continue;
            }
            c.count += 1;
            if b.dead_at.is_some() {
                c.dead += 1;
            } else if self.bot_view(id, b).task_id.is_some() {
                c.busy += 1;
            }
        }
        c
    }

    /// `ListBotEvents`: the bot and its events newest first, at most `limit`, from `start` and
    /// before `end`.
    pub fn bot_events(
        &self,
        server: &str,
        id: &str,
        limit: usize,
        start: Option<DateTime<Utc>>,
        end: Option<DateTime<Utc>>,
    ) -> Option<(&Bot, Vec<&BotEvent>)> {
        let b = self.bots.get(server)?.get(id)?;
        let events = b
            .events
            .iter()
            .rev()
            .filter(|e| start.is_none_or(|s| e.ts >= s) && end.is_none_or(|x| e.ts < x))
            .take(limit)
            .collect();
        Some((b, events))
    }

    /// `TerminateBot`: the bot finishes its current task, then dies; the same pending task id
    /// is returned while it is pending.
    pub fn terminate_bot(&mut self, server: &str, id: &str) -> String {
        let fresh = format!("{:016x}", self.rng.random::<u64>());
        let now = self.now;
        let task_end =
            self.bots.get(server).and_then(|m| m.get(id)).map(|b| self.task_of(b).map(|(_, end)| end));
        self.bot_stops_idling(server, id);
        let Some(b) = self.bots.get_mut(server).and_then(|m| m.get_mut(id)) else { return fresh };
        if let Some(t) = &b.termination
            && b.dead_at.is_none()
        {
            return t.clone();
        }
        if b.dead_at.is_some() || b.deleted {
            return fresh;
        }
        let before = BotState::of(b);
        b.termination = Some(fresh.clone());
        self.counts.bot(Some(before), Some(BotState::of(b)));
        let session = b.session;
        if b.task.is_some() {
            return fresh; // it dies when its task ends
        }
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
        self.bot_stops_working(server, id);
        let Some(b) = self.bots.get_mut(server).and_then(|m| m.get_mut(id)) else { return false };
        let before = BotState::of(b);
        let (alive, session) = (b.dead_at.is_none(), b.session);
        b.deleted = true;
        if b.dead_at.is_none() {
            b.dead_at = Some(now);
        }
        push_event(b, now, "bot_deleted", "deleted through DeleteBot".into());
        self.counts.bot(Some(before), Some(BotState::of(b)));
        if alive {
            self.machine_bot_gone(server, id, session); // a listed machine's bot polls again
        }
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
