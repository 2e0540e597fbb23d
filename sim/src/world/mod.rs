//! The simulator's state and its timeline: the [`World`] holding instances, operations, bots
//! (records in `model`, counted in `counts`) and the events that move them (Compute's calls in
//! `compute`, Swarming's in `swarming`, static machines in `machines`: each adds the world's
//! methods for its API and imports this file, never the other way). Time only moves forward
//! inside [`World::advance`], which every request calls first, so the state is a function of the
//! seed, the requests and their times. The world answers with typed values; the routes encode
//! them for the wire.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, VecDeque};
use std::time::Duration;

use chrono::{DateTime, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::config::{Faults, SimConfig};
use crate::names::{region_of, server_key, valid_name};

mod accounts;
mod bulk;
mod compute;
mod counts;
pub mod filter;
mod machines;
mod make;
mod model;
mod rate;
mod records;
mod suspend;
mod swarming;
mod tasks;
mod templates;

pub use accounts::{Accounts, Source, TokenReport};
use counts::class;
pub use counts::{BotState, Counts, InstanceCounts};
use model::push_event;
pub use model::{
    ApiError, Billing, Bot, BotCount, BotEvent, BotFilter, BotView, ConfigUsage, Instance, InstanceEntry,
    InstanceKey, NewTask, Nic, OpError, OpStatus, Operation, Region, Scope, Status, Task, TaskState, Usage,
};
pub use records::{ApiCalls, BulkOutcome, Template, TemplateKey, ZoneOutcome};

/// Insert arrival times kept.
const KEEP_INSERT_TIMES: usize = 1_000_000;
/// The latest an event is scheduled after now.
const FAR: Duration = Duration::from_secs(100 * 365 * 86_400);
/// requestIds remembered per instance name, for the insert audit.
const KEEP_INSERT_IDS: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    OpStatus { op: String, to: OpStatus },
    InstStatus { key: InstanceKey, id: u64, to: Status },
    InstGone { key: InstanceKey, id: u64 },
    BotConnect { server: String, key: InstanceKey, session: u64 },
    BotDeath { server: String, bot: String, session: u64, terminated: bool },
    MachineBot { server: String, hostname: String },
    Preempt { key: InstanceKey, id: u64 },
    TaskArrive(Box<NewTask>),
    TaskEnd { task: usize, session: u64 },
    BotSilentDeath { server: String, bot: String, session: u64, silence: u64 },
}

/// The whole simulated world.
#[derive(Debug)]
pub struct World {
    /// Settings (delays, quotas, caps).
    pub cfg: SimConfig,
    /// Fault settings, changed at run time through `/sim/faults`.
    pub faults: Faults,
    rng: StdRng,
    seq: u64,
    base: (Instant, DateTime<Utc>),
    now: Instant,
    /// Instances by (project, zone, name).
    pub instances: BTreeMap<InstanceKey, Instance>,
    /// Operations by name.
    pub operations: HashMap<String, Operation>,
    op_order: VecDeque<String>,
    request_ids: HashMap<(String, String, String), String>,
    /// requestIds seen per instance name on insert (for invariant checks).
    pub inserts: HashMap<InstanceKey, Vec<String>>,
    insert_order: VecDeque<InstanceKey>,
    /// Quota usage by (project, region).
    pub usage: HashMap<(String, String), Usage>,
    /// Bots by server, then bot id.
    pub bots: BTreeMap<String, BTreeMap<String, Bot>>,
    timeline: BinaryHeap<Reverse<(Instant, u64, Ev)>>,
    /// Calls by method, then HTTP status.
    pub calls: BTreeMap<String, BTreeMap<u16, u64>>,
    /// Compute calls taken and held unanswered now (faults `compute_hang`).
    pub held_silent: usize,
    /// When each `instances.insert` came (the first [`KEEP_INSERT_TIMES`]).
    pub insert_times: Vec<Instant>,
    /// Bots connected on instances with a `register-url` metadata item, whose agent has not
    /// registered yet: the instance, the URL and the audience (the registrar in `agent.rs`
    /// takes them).
    pub registrations: Vec<(InstanceKey, (String, String))>,
    /// Static machines (no instance) by (server, hostname): the session of their bot, 0 while
    /// it is down for good (see `machines.rs`).
    pub machines: BTreeMap<(String, String), u64>,
    /// Counts by state, kept up to date at every transition (see [`counts`]).
    counts: Counts,
    /// Tasks and idle bots (see `tasks.rs`).
    queue: model::Queue,
    /// Bot groups: the dimensions of bots by id prefix.
    bot_groups: crate::config::BotGroups,
    /// Instance seconds by billing class, summed as the clock moves.
    billing: Billing,
    /// Operations made, by kind.
    ops_made: BTreeMap<&'static str, u64>,
    /// Instance seconds and operations made per Config (the instance name's prefix).
    by_config: BTreeMap<String, ConfigUsage>,
    /// Rate quotas used per project (see `rate.rs`).
    rates: HashMap<String, records::ProjectRate>,
    /// Compute Engine calls counted, and those refused by a rate quota.
    api: ApiCalls,
    /// Instance templates by (project, name).
    templates: BTreeMap<TemplateKey, Template>,
    /// How far the clock was moved ahead of the monotonic time (`POST /sim/clock`).
    pub skew: Duration,
    /// The service account's tokens and the calls' standing (see `accounts.rs`).
    pub accounts: Accounts,
}

/// The simulator's one clock: the wall time its timeline starts at. From then on the world's time
/// is that start plus the monotonic time elapsed ([`World::utc`]).
#[allow(clippy::disallowed_methods)] // the clock
fn wall_clock() -> DateTime<Utc> {
    Utc::now()
}

impl World {
    /// A new world at `now`.
    pub fn new(cfg: SimConfig, now: Instant) -> Self {
        let rng = StdRng::seed_from_u64(cfg.seed);
        let faults = cfg.faults.clone();
        let bot_groups = cfg.bot_groups.clone();
        let accounts = Accounts::new(cfg.auth.clone());
        Self {
            cfg,
            faults,
            rng,
            seq: 0,
            base: (now, wall_clock()),
            now,
            instances: BTreeMap::new(),
            operations: HashMap::new(),
            op_order: VecDeque::new(),
            request_ids: HashMap::new(),
            inserts: HashMap::new(),
            insert_order: VecDeque::new(),
            usage: HashMap::new(),
            bots: BTreeMap::new(),
            timeline: BinaryHeap::new(),
            calls: BTreeMap::new(),
            held_silent: 0,
            insert_times: Vec::new(),
            registrations: Vec::new(),
            machines: BTreeMap::new(),
            counts: Counts::default(),
            queue: model::Queue::default(),
            bot_groups,
            billing: Billing::default(),
            ops_made: BTreeMap::new(),
            by_config: BTreeMap::new(),
            rates: HashMap::new(),
            api: ApiCalls::default(),
            templates: BTreeMap::new(),
            skew: Duration::ZERO,
            accounts,
        }
    }

    /// Wall-clock time of `t` on the simulator's timeline.
    pub fn utc(&self, t: Instant) -> DateTime<Utc> {
        self.base.1 + chrono::Duration::from_std(t.saturating_duration_since(self.base.0)).unwrap_or_default()
    }

    /// Milliseconds from the simulator's start to `t`, on its clock.
    pub fn clock_ms(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.base.0).as_millis() as u64
    }

    /// The world's current time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The bot groups in force.
    pub fn bot_groups(&self) -> &crate::config::BotGroups {
        &self.bot_groups
    }

    /// Current simulated wall-clock time.
    pub fn now_utc(&self) -> DateTime<Utc> {
        self.utc(self.now)
    }

    fn next(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    fn at(&mut self, after: Duration, ev: Ev) {
        let seq = self.next();
        // A century at most: no later time overflows the clock.
        let when = self.now.checked_add(after.min(FAR)).unwrap_or(self.now);
        self.timeline.push(Reverse((when, seq, ev)));
    }

    /// Draws from the seeded generator: true with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.rng.random::<f64>() < p
    }

    /// Counts one call (and keeps when each insert came, for rate checks).
    pub fn count(&mut self, method: &str, status: u16) {
        if method == "compute.instances.insert" && self.insert_times.len() < KEEP_INSERT_TIMES {
            self.insert_times.push(self.now);
        }
        let by_status = match self.calls.get_mut(method) {
            Some(m) => m,
            None => self.calls.entry(method.to_owned()).or_default(),
        };
        *by_status.entry(status).or_default() += 1;
    }

    /// Events scheduled and not yet applied.
    pub fn scheduled(&self) -> usize {
        self.timeline.len()
    }

    /// Applies every scheduled event due by `now`, in time order.
    pub fn advance(&mut self, now: Instant) {
        while let Some(Reverse((t, _, _))) = self.timeline.peek() {
            if *t > now {
                break;
            }
            let Reverse((t, _, ev)) = self.timeline.pop().expect("peeked");
            self.tick(t);
            self.apply(ev);
        }
        self.tick(now);
    }

    /// Moves the clock `by` ahead at once, applying every event due meanwhile in time order (as
    /// if that time had passed); from then on it runs that far ahead of the monotonic time
    /// ([`World::skew`]).
    pub fn skip(&mut self, by: Duration) {
        self.skew += by;
        let t = self.now + by;
        self.advance(t);
    }

    /// Moves the clock to `t` (never back), billing the instances for the time between.
    fn tick(&mut self, t: Instant) {
        if t > self.now {
            let dt = t.duration_since(self.now).as_secs_f64();
            self.billing.add(&self.counts.instances.by_status, dt);
            for (config, by_status) in &self.counts.configs {
                match self.by_config.get_mut(config) {
                    Some(c) => c.billing.add(by_status, dt),
                    None => {
                        let mut c = ConfigUsage::default();
                        c.billing.add(by_status, dt);
                        self.by_config.insert(config.clone(), c);
                    }
                }
            }
            self.now = t;
        }
    }

    fn apply(&mut self, ev: Ev) {
        match ev {
            Ev::OpStatus { op, to } => {
                let now = self.now_utc();
                let Some(op) = self.operations.get_mut(&op) else { return };
                let before = op.status;
                op.status = to;
                if to == OpStatus::Running {
                    op.start_time = Some(now);
                } else {
                    op.end_time = Some(now);
                    op.error = op.pending_error.take();
                }
                self.counts.operation(Some(before), Some(to), op.error.is_some());
            }
            Ev::InstStatus { key, id, to: status } => {
                let connect = self.cfg.bot_connect_ms;
                let never_connects = self.faults.bot_never_connect_rate;
                let Some(inst) = self.instances.get_mut(&key).filter(|i| i.id == id) else { return };
                if inst.deleting && status != Status::Terminated {
                    return;
                }
                let before = class(inst);
                inst.status = status;
                let resumed = std::mem::take(&mut inst.resuming) && status == Status::Running;
                let spot = inst.spot;
                self.counts.instance(&key.1, &key.2, Some(before), Some(class(inst)));
                self.quota_follows(&key, status);
                if resumed {
                    self.bot_resumes(&key);
                    return;
                }
                if status == Status::Running && spot {
                    let (rate, ms) = (self.faults.spot_preempt_rate, self.faults.spot_preempt_ms);
                    if self.chance(rate) {
                        self.at(Duration::from_millis(ms), Ev::Preempt { key: key.clone(), id });
                    }
                }
                let Some(inst) = self.instances.get_mut(&key) else { return };
                let broken = self.faults.broken_images.contains(&inst.image);
                if status == Status::Running
                    && let Some(server) = inst.swarming.clone()
                    && !broken
                    && !self.chance(never_connects)
                {
                    let ev = Ev::BotConnect { server, key, session: id };
                    self.at(Duration::from_millis(connect), ev);
                }
            }
            Ev::InstGone { key, id } => {
                if self.instances.get(&key).is_some_and(|i| i.id == id) {
                    let inst = self.instances.remove(&key).expect("checked");
                    self.counts.instance(&key.1, &key.2, Some(class(&inst)), None);
                    let u = self.usage.entry((key.0.clone(), region_of(&key.1).to_owned())).or_default();
                    if inst.cpus_held {
                        u.cpus -= inst.cpus;
                    }
                    if inst.counted {
                        u.instances -= 1;
                    }
                }
            }
            Ev::BotConnect { server, key, session } => self.connect_bot(server, key, session),
            Ev::MachineBot { server, hostname } => self.connect_machine_bot(server, hostname),
            Ev::Preempt { key, id } => {
                if self.instances.get(&key).is_some_and(|i| i.id == id && i.status == Status::Running) {
                    let _ = self.preempt(&key.0, &key.1, &key.2);
                }
            }
            Ev::TaskArrive(t) => {
                let _ = self.add_task(*t); // ids of a trace are checked when it is scheduled
            }
            Ev::TaskEnd { task, session } => self.end_task(task, session),
            Ev::BotSilentDeath { server, bot, session, silence } => {
                self.silent_death(server, bot, session, silence)
            }
            Ev::BotDeath { server, bot, session, terminated } => {
                let now = self.now_utc();
                let Some(b) = self.bots.get(&server).and_then(|m| m.get(&bot)) else { return };
                if b.session != session || b.dead_at.is_some() {
                    return;
                }
                self.bot_stops_working(&server, &bot);
                let Some(b) = self.bots.get_mut(&server).and_then(|m| m.get_mut(&bot)) else { return };
                let before = BotState::of(b);
                b.dead_at = Some(now);
                let (kind, message) = if terminated {
                    b.termination_task_id = b.termination.clone();
                    ("bot_terminate", "terminated by TerminateBot".to_owned())
                } else {
                    ("bot_missing", "bot stopped pinging".to_owned())
                };
                push_event(b, now, kind, message);
                self.counts.bot(Some(before), Some(BotState::of(b)));
                if terminated {
                    self.machine_bot_gone(&server, &bot, session); // a listed machine restarts it
                }
            }
        }
    }

    /// The counts, kept up to date as the world changes: O(1).
    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// The counts by scanning every instance, bot and operation: O(n), for checks.
    pub fn scan_counts(&self) -> Counts {
        let mut c = Counts::default();
        for ((_, zone, name), i) in &self.instances {
            c.instance(zone, name, None, Some(class(i)));
        }
        for b in self.bots.values().flat_map(BTreeMap::values) {
            c.bot(None, Some(BotState::of(b)));
        }
        for op in self.operations.values() {
            c.operation(None, Some(op.status), op.error.is_some());
        }
        c
    }

    fn random_ip(&mut self, first: u8) -> String {
        let [a, b, c] = [self.rng.random::<u8>(), self.rng.random::<u8>(), self.rng.random_range(1..255u8)];
        format!("{first}.{a}.{b}.{c}")
    }
}

fn not_found(project: &str, zone: &str, name: &str) -> ApiError {
    ApiError::new(
        404,
        "notFound",
        format!("The resource 'projects/{project}/zones/{zone}/instances/{name}' was not found"),
    )
}

fn quota_error(metric: &str, limit: f64, region: &str) -> OpError {
    OpError {
        code: "QUOTA_EXCEEDED".into(),
        message: format!("Quota '{metric}' exceeded.  Limit: {limit:.1} in region {region}."),
        http: 403,
    }
}

#[cfg(test)]
mod tests;
