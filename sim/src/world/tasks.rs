//! Swarming tasks on the world: the queue (FIFO by creation), idle bots indexed by dimension,
//! and who runs what. A live, idle, not-terminating, not-silent bot takes the oldest pending task
//! whose dimensions it matches; a task arriving while a matching bot is idle starts at once. Only
//! in real-work mode (`bot_task_ms` 0): with the synthetic busy/idle cycle, bots take no task.
//! Idle bots are indexed by each of their `key:value` pairs, so a world of idle bots and no
//! tasks costs nothing per event, and a task looks only at the idle bots of its rarest dimension.

use super::*;
use crate::dims::{Dims, matches};
use model::BotRef;

impl World {
    /// Adds a task now; it starts at once if a matching bot is idle. Errors on an id in use.
    pub fn add_task(&mut self, t: NewTask) -> Result<String, String> {
        let id = match t.id {
            Some(id) if self.queue.by_id.contains_key(&id) => return Err(format!("task {id} exists")),
            Some(id) if id.is_empty() => return Err("task id: empty".into()),
            Some(id) => id,
            None => format!(
                "{:x}{:06x}0",
                self.now.saturating_duration_since(self.base.0).as_millis(),
                self.next()
            ),
        };
        let n = self.queue.tasks.len();
        self.queue.by_id.insert(id.clone(), n);
        self.queue.tasks.push(Task {
            id: id.clone(),
            dimensions: t.dimensions,
            duration: t.duration,
            state: TaskState::Pending,
            created: self.now,
            started: None,
            ended: None,
            bot: None,
        });
        self.queue.totals[TaskState::Pending as usize] += 1;
        match self.idle_bot_for(n) {
            Some(bot) => self.start_task(n, bot),
            None => {
                self.queue.pending.insert(n);
            }
        }
        Ok(id)
    }

    /// Checks ids before adding several tasks: none in use, none twice.
    pub fn check_task_ids<'a>(&self, ids: impl IntoIterator<Item = &'a str>) -> Result<(), String> {
        let mut seen = BTreeSet::new();
        for id in ids {
            if self.queue.by_id.contains_key(id) || !seen.insert(id) {
                return Err(format!("task {id} exists"));
            }
        }
        Ok(())
    }

    /// Schedules `t` to arrive after `after`.
    pub fn schedule_task(&mut self, after: Duration, t: NewTask) {
        self.at(after, Ev::TaskArrive(Box::new(t)));
    }

    /// Every task, oldest first.
    pub fn tasks(&self) -> &[Task] {
        &self.queue.tasks
    }

    /// Tasks by state, in the order of [`TaskState::ALL`]: O(1).
    pub fn task_totals(&self) -> [u64; 5] {
        self.queue.totals
    }

    /// The id of the task `b` runs, if any.
    pub(super) fn real_task_id(&self, b: &Bot) -> Option<String> {
        b.task.map(|n| self.queue.tasks[n].id.clone())
    }

    /// A matching idle bot for task `n`: among those idle with its first dimension.
    fn idle_bot_for(&self, n: usize) -> Option<BotRef> {
        let dims = &self.queue.tasks[n].dimensions;
        let idle_with = |(k, alts): (&String, &Vec<String>)| -> usize {
            alts.iter().filter_map(|v| self.queue.idle.get(&(k.clone(), v.clone()))).map(BTreeSet::len).sum()
        };
        // The dimension with the fewest idle bots: often none, and nothing is scanned.
        let Some((k, alts)) = dims.iter().min_by_key(|d| idle_with(*d)) else {
            return self.queue.idle.values().flatten().find(|r| self.bot_dims(r).is_some()).cloned();
        };
        alts.iter()
            .filter_map(|v| self.queue.idle.get(&(k.clone(), v.clone())))
            .flatten()
            .find(|r| self.bot_dims(r).is_some_and(|d| matches(dims, d)))
            .cloned()
    }

    fn bot_dims(&self, (server, id): &BotRef) -> Option<&Dims> {
        self.bots.get(server).and_then(|m| m.get(id)).map(|b| &b.dims)
    }

    fn set_state(&mut self, n: usize, to: TaskState) {
        let t = &mut self.queue.tasks[n];
        self.queue.totals[t.state as usize] -= 1;
        self.queue.totals[to as usize] += 1;
        t.state = to;
        if to != TaskState::Running {
            t.ended = Some(self.now);
        }
    }

    /// Bot `bot` starts task `n` (it is idle; the task pending).
    fn start_task(&mut self, n: usize, bot: BotRef) {
        self.unidle(&bot);
        self.queue.pending.remove(&n);
        self.set_state(n, TaskState::Running);
        let t = &mut self.queue.tasks[n];
        t.started = Some(self.now);
        t.bot = Some(bot.clone());
        let duration = t.duration;
        let Some(b) = self.bots.get_mut(&bot.0).and_then(|m| m.get_mut(&bot.1)) else { return };
        b.task = Some(n);
        let session = b.session;
        self.at(duration, Ev::TaskEnd { task: n, session });
    }

    /// Task `n` ran to its end: its bot is idle again (or terminates, if asked to).
    pub(super) fn end_task(&mut self, n: usize, session: u64) {
        if self.queue.tasks.get(n).is_none_or(|t| t.state != TaskState::Running) {
            return;
        }
        let Some(bot) = self.queue.tasks[n].bot.clone() else { return };
        let Some(b) = self.bots.get_mut(&bot.0).and_then(|m| m.get_mut(&bot.1)) else { return };
        if b.session != session || b.task != Some(n) {
            return;
        }
        b.task = None;
        let terminating = b.termination.is_some();
        self.set_state(n, TaskState::Completed);
        if terminating {
            self.apply(Ev::BotDeath { server: bot.0, bot: bot.1, session, terminated: true });
        } else {
            self.bot_idle(&bot.0, &bot.1);
        }
    }

    /// The task of bot `server`/`id`, if it runs one, ends BOT_DIED; the bot is no longer idle.
    pub(super) fn bot_stops_working(&mut self, server: &str, id: &str) {
        self.unidle(&(server.to_owned(), id.to_owned()));
        let Some(b) = self.bots.get_mut(server).and_then(|m| m.get_mut(id)) else { return };
        if let Some(n) = b.task.take() {
            self.set_state(n, TaskState::BotDied);
        }
    }

    /// Bot `server`/`id` may take work: it takes the oldest pending task it matches, else waits in
    /// the idle index. Nothing in synthetic mode or when the bot cannot work.
    pub(super) fn bot_idle(&mut self, server: &str, id: &str) {
        if self.cfg.bot_task_ms > 0 {
            return;
        }
        let Some(b) = self.bots.get(server).and_then(|m| m.get(id)) else { return };
        if b.dead_at.is_some()
            || b.deleted
            || b.termination.is_some()
            || b.silent_at.is_some()
            || b.task.is_some()
        {
            return;
        }
        let found =
            self.queue.pending.iter().copied().find(|&n| matches(&self.queue.tasks[n].dimensions, &b.dims));
        let bot = (server.to_owned(), id.to_owned());
        match found {
            Some(n) => self.start_task(n, bot),
            None => {
                for (k, vs) in &b.dims {
                    for v in vs {
                        self.queue.idle.entry((k.clone(), v.clone())).or_default().insert(bot.clone());
                    }
                }
            }
        }
    }

    /// Bot `server`/`id` takes no new task (it is asked to terminate).
    pub(super) fn bot_stops_idling(&mut self, server: &str, id: &str) {
        self.unidle(&(server.to_owned(), id.to_owned()));
    }

    /// Takes bot `r` out of the idle index.
    fn unidle(&mut self, r: &BotRef) {
        let Some(b) = self.bots.get(&r.0).and_then(|m| m.get(&r.1)) else { return };
        for (k, vs) in &b.dims {
            for v in vs {
                let key = (k.clone(), v.clone());
                if let Some(set) = self.queue.idle.get_mut(&key) {
                    set.remove(r);
                    if set.is_empty() {
                        self.queue.idle.remove(&key);
                    }
                }
            }
        }
    }

    /// The dimensions of bot `id` in `zone`: its group's (longest prefix), `id`, and the
    /// defaults `pool: gce` and `zone` where the group gives none.
    pub(super) fn dims_of(&self, id: &str, zone: &str) -> Dims {
        let mut d = self.bot_groups.of(id).map(|g| g.dimensions.clone()).unwrap_or_default();
        d.insert("id".into(), vec![id.to_owned()]);
        d.entry("pool".into()).or_insert_with(|| vec!["gce".into()]);
        d.entry("zone".into()).or_insert_with(|| vec![zone.to_owned()]);
        d
    }

    /// Replaces the bot groups; every bot's dimensions follow, idle bots may take work.
    pub fn set_bot_groups(&mut self, groups: crate::config::BotGroups) {
        self.bot_groups = groups;
        let all: Vec<BotRef> =
            self.bots.iter().flat_map(|(s, m)| m.keys().map(move |id| (s.clone(), id.clone()))).collect();
        for r in all {
            self.unidle(&r);
            let zone = self.bots[&r.0][&r.1].zone.clone();
            let dims = self.dims_of(&r.1, &zone);
            if let Some(b) = self.bots.get_mut(&r.0).and_then(|m| m.get_mut(&r.1)) {
                b.dims = dims;
            }
            self.bot_idle(&r.0, &r.1);
        }
    }
}

impl World {
    /// `CountTasks`: tasks created in `[start, end)` in one of `states` (all when none) whose
    /// tags (their dimensions, `key:value` each) pass `tags`. O(tasks).
    pub fn count_tasks(
        &self,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        states: Option<&[TaskState]>,
        tags: &crate::dims::Filter,
    ) -> u64 {
        let n = self
            .queue
            .tasks
            .iter()
            .filter(|t| states.is_none_or(|s| s.contains(&t.state)))
            .filter(|t| {
                let created = self.utc(t.created);
                created >= start && created < end
            })
            .filter(|t| tags.matches(&t.dimensions))
            .count();
        n as u64
    }
}
