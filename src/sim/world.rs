//! The simulator's state: Compute Engine instances, operations and quotas, Swarming bots, and the
//! timeline that moves them. Time only moves forward inside [`World::advance`], which every
//! request calls first, so the state is a function of the seed, the requests and their times.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, VecDeque};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::config::{Faults, SimConfig};

/// Events kept per bot (oldest dropped).
const KEEP_BOT_EVENTS: usize = 20;
/// requestIds remembered per instance name, for the insert audit.
const KEEP_INSERT_IDS: usize = 8;

/// `projects/<p>/zones/<z>/instances/<name>`.
pub type InstanceKey = (String, String, String);

/// Instance status, as Compute Engine names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Status {
    /// Resources are being allocated.
    Provisioning,
    /// Booting.
    Staging,
    /// Running.
    Running,
    /// Stopping (also while being deleted).
    Stopping,
    /// Stopped (preempted, or about to be deleted).
    Terminated,
}

impl Status {
    fn name(self) -> &'static str {
        match self {
            Status::Provisioning => "PROVISIONING",
            Status::Staging => "STAGING",
            Status::Running => "RUNNING",
            Status::Stopping => "STOPPING",
            Status::Terminated => "TERMINATED",
        }
    }
}

/// One network interface.
#[derive(Debug, Clone)]
pub struct Nic {
    network: String,
    subnetwork: Option<String>,
    ip: String,
    nat: Option<(String, String)>,
}

/// A Compute Engine instance.
#[derive(Debug, Clone)]
pub struct Instance {
    /// Unique per incarnation.
    pub id: u64,
    /// Status.
    pub status: Status,
    created: DateTime<Utc>,
    machine_type: String,
    cpus: f64,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    metadata: Vec<(String, Option<String>)>,
    nics: Vec<Nic>,
    /// Other fields of the insert body (disks, tags, service accounts, scheduling, ...), echoed.
    rest: Box<str>,
    /// Fault: stays in STAGING for ever.
    pub never_boots: bool,
    /// Swarming server its bot connects to (from metadata `swarming-server`).
    pub swarming: Option<String>,
    deleting: bool,
    /// Counted in its region's quota usage.
    counted: bool,
}

/// An operation error (the first of `error.errors[]`).
#[derive(Debug, Clone, Serialize)]
pub struct OpError {
    /// E.g. `QUOTA_EXCEEDED`.
    pub code: String,
    /// Message.
    pub message: String,
    /// `httpErrorStatusCode`.
    pub http: u16,
}

/// Operation status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OpStatus {
    /// Queued.
    Pending,
    /// Working.
    Running,
    /// Finished (maybe with an error).
    Done,
}

/// A zonal operation.
#[derive(Debug, Clone)]
pub struct Operation {
    id: u64,
    /// Operation name.
    pub name: String,
    project: String,
    zone: String,
    /// `insert` or `delete`.
    pub kind: &'static str,
    /// Instance name.
    pub target: String,
    target_id: u64,
    /// Status.
    pub status: OpStatus,
    insert_time: DateTime<Utc>,
    start_time: Option<DateTime<Utc>>,
    end_time: Option<DateTime<Utc>>,
    /// Error, set when DONE.
    pub error: Option<OpError>,
    pending_error: Option<OpError>,
    request_id: Option<String>,
}

/// A bot lifecycle event.
#[derive(Debug, Clone)]
pub struct BotEvent {
    ts: DateTime<Utc>,
    kind: &'static str,
    message: String,
}

/// A Swarming bot.
#[derive(Debug, Clone)]
pub struct Bot {
    /// The instance id it runs on (its session).
    pub session: u64,
    first_seen: DateTime<Utc>,
    connected_at: Instant,
    /// Dead since.
    pub dead_at: Option<DateTime<Utc>>,
    /// Deleted from the server.
    pub deleted: bool,
    termination: Option<String>,
    /// Set when it died because of TerminateBot.
    pub termination_task_id: Option<String>,
    external_ip: String,
    zone: String,
    events: VecDeque<BotEvent>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    OpStatus { op: String, to: OpStatus },
    InstStatus { key: InstanceKey, id: u64, to: Status },
    InstGone { key: InstanceKey, id: u64 },
    BotConnect { server: String, key: InstanceKey, session: u64 },
    BotDeath { server: String, bot: String, session: u64, terminated: bool },
}

/// Usage of one (project, region).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Usage {
    /// CPUs of counted instances.
    pub cpus: f64,
    /// Counted instances.
    pub instances: u64,
}

/// A simulated Compute Engine error answer (HTTP status, reason, message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: u16,
    /// `errors[].reason`.
    pub reason: &'static str,
    /// Message.
    pub message: String,
}

impl ApiError {
    fn new(status: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self { status, reason, message: message.into() }
    }
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
}

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// `https://www.googleapis.com/compute/v1/projects/<p>/<rest>`.
pub fn url(project: &str, rest: &str) -> String {
    format!("https://www.googleapis.com/compute/v1/projects/{project}/{rest}")
}

/// The region of a zone: `us-central1-b` → `us-central1`.
pub fn region_of(zone: &str) -> &str {
    zone.rsplit_once('-').map_or(zone, |(r, _)| r)
}

/// Valid Compute Engine resource name (the rule the service's Config validation uses too).
pub use gce_backend_jobs::config::valid_gce_name as valid_name;

/// The host of a Swarming server URL: `https://x.appspot.com/` → `x.appspot.com`.
pub fn server_key(url: &str) -> String {
    let s = url.trim();
    let s = s.strip_prefix("https://").or_else(|| s.strip_prefix("http://")).unwrap_or(s);
    s.trim_end_matches('/').to_owned()
}

impl World {
    /// A new world at `now`.
    pub fn new(cfg: SimConfig, now: Instant) -> Self {
        let rng = StdRng::seed_from_u64(cfg.seed);
        let faults = cfg.faults.clone();
        Self {
            cfg,
            faults,
            rng,
            seq: 0,
            base: (now, Utc::now()),
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
        }
    }

    /// Wall-clock time of `t` on the simulator's timeline.
    pub fn utc(&self, t: Instant) -> DateTime<Utc> {
        self.base.1 + chrono::Duration::from_std(t.saturating_duration_since(self.base.0)).unwrap_or_default()
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
        self.timeline.push(Reverse((self.now + after, seq, ev)));
    }

    /// Draws from the seeded generator: true with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.rng.random::<f64>() < p
    }

    /// Counts one call.
    pub fn count(&mut self, method: &str, status: u16) {
        *self.calls.entry(method.to_owned()).or_default().entry(status).or_default() += 1;
    }

    /// Applies every scheduled event due by `now`, in time order.
    pub fn advance(&mut self, now: Instant) {
        while let Some(Reverse((t, _, _))) = self.timeline.peek() {
            if *t > now {
                break;
            }
            let Reverse((t, _, ev)) = self.timeline.pop().expect("peeked");
            self.now = t;
            self.apply(ev);
        }
        self.now = self.now.max(now);
    }

    fn apply(&mut self, ev: Ev) {
        match ev {
            Ev::OpStatus { op, to } => {
                let now = self.now_utc();
                let Some(op) = self.operations.get_mut(&op) else { return };
                op.status = to;
                if to == OpStatus::Running {
                    op.start_time = Some(now);
                } else {
                    op.end_time = Some(now);
                    op.error = op.pending_error.take();
                }
            }
            Ev::InstStatus { key, id, to: status } => {
                let connect = self.cfg.bot_connect_ms;
                let never_connects = self.faults.bot_never_connect_rate;
                let Some(inst) = self.instances.get_mut(&key).filter(|i| i.id == id) else { return };
                if inst.deleting && status != Status::Terminated {
                    return;
                }
                inst.status = status;
                if status == Status::Terminated && inst.counted {
                    inst.counted = false;
                    let cpus = inst.cpus;
                    let u = self.usage.entry((key.0.clone(), region_of(&key.1).to_owned())).or_default();
                    u.cpus -= cpus;
                    u.instances -= 1;
                }
                if status == Status::Running
                    && let Some(server) = inst.swarming.clone()
                    && !self.chance(never_connects)
                {
                    let ev = Ev::BotConnect { server, key, session: id };
                    self.at(Duration::from_millis(connect), ev);
                }
            }
            Ev::InstGone { key, id } => {
                if self.instances.get(&key).is_some_and(|i| i.id == id) {
                    let inst = self.instances.remove(&key).expect("checked");
                    if inst.counted {
                        let u = self.usage.entry((key.0.clone(), region_of(&key.1).to_owned())).or_default();
                        u.cpus -= inst.cpus;
                        u.instances -= 1;
                    }
                }
            }
            Ev::BotConnect { server, key, session } => self.connect_bot(server, key, session),
            Ev::BotDeath { server, bot, session, terminated } => {
                let now = self.now_utc();
                let Some(b) = self.bots.get_mut(&server).and_then(|m| m.get_mut(&bot)) else { return };
                if b.session != session || b.dead_at.is_some() {
                    return;
                }
                b.dead_at = Some(now);
                let (kind, message) = if terminated {
                    b.termination_task_id = b.termination.clone();
                    ("bot_terminate", "terminated by TerminateBot".to_owned())
                } else {
                    ("bot_missing", "bot stopped pinging".to_owned())
                };
                push_event(b, now, kind, message);
            }
        }
    }

    fn connect_bot(&mut self, server: String, key: InstanceKey, session: u64) {
        // Only the instance incarnation that booted may connect, and only while it runs.
        match self.instances.get(&key) {
            Some(i) if i.id == session && i.status == Status::Running => {}
            _ => return,
        }
        let ip = self.instances[&key].nics.iter().find_map(|n| n.nat.as_ref().map(|(_, ip)| ip.clone()));
        let (zone, bot) = (key.1, key.2);
        let now = self.now_utc();
        let ip = ip.unwrap_or_else(|| self.random_ip(34));
        let early = self.chance(self.faults.bot_early_death_rate);
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
        };
        push_event(&mut b, now, "bot_connected", format!("session {session:x}"));
        self.bots.entry(server.clone()).or_default().insert(bot.clone(), b);
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
            for bots in self.bots.values_mut() {
                bots.retain(|_, b| !(b.dead_at.is_some() && (b.deleted || !pass)));
            }
            if self.bots.values().map(BTreeMap::len).sum::<usize>() <= self.cfg.max_bots {
                return;
            }
        }
    }

    fn random_ip(&mut self, first: u8) -> String {
        let [a, b, c] = [self.rng.random::<u8>(), self.rng.random::<u8>(), self.rng.random_range(1..255u8)];
        format!("{first}.{a}.{b}.{c}")
    }

    fn new_op(
        &mut self,
        project: &str,
        zone: &str,
        kind: &'static str,
        target: &str,
        target_id: u64,
        rid: Option<String>,
    ) -> String {
        let n = self.next();
        let hex: u64 = self.rng.random();
        let name = format!("operation-{n}-{hex:016x}");
        let op = Operation {
            id: self.rng.random::<u64>() >> 1,
            name: name.clone(),
            project: project.to_owned(),
            zone: zone.to_owned(),
            kind,
            target: target.to_owned(),
            target_id,
            status: OpStatus::Pending,
            insert_time: self.now_utc(),
            start_time: None,
            end_time: None,
            error: None,
            pending_error: None,
            request_id: rid.clone(),
        };
        self.operations.insert(name.clone(), op);
        self.op_order.push_back(name.clone());
        if let Some(rid) = rid {
            self.request_ids.insert((project.to_owned(), zone.to_owned(), rid), name.clone());
        }
        while self.op_order.len() > self.cfg.max_operations {
            let old = self.op_order.pop_front().expect("non-empty");
            if let Some(op) = self.operations.remove(&old)
                && let Some(rid) = op.request_id
            {
                self.request_ids.remove(&(op.project, op.zone, rid));
            }
        }
        name
    }

    /// Schedules an operation's PENDING → RUNNING → DONE over `total`.
    fn run_op(&mut self, name: &str, total: Duration) {
        self.at(total / 2, Ev::OpStatus { op: name.to_owned(), to: OpStatus::Running });
        self.at(total, Ev::OpStatus { op: name.to_owned(), to: OpStatus::Done });
    }

    /// A requestId: a valid non-nil UUID, still inside its window.
    fn replay(&self, project: &str, zone: &str, rid: &Option<String>) -> Result<Option<String>, ApiError> {
        let Some(rid) = rid else { return Ok(None) };
        match uuid::Uuid::parse_str(rid) {
            Ok(u) if !u.is_nil() => {}
            _ => {
                return Err(ApiError::new(
                    400,
                    "invalid",
                    format!("Invalid value for field 'requestId': '{rid}'."),
                ));
            }
        }
        let name = self.request_ids.get(&(project.to_owned(), zone.to_owned(), rid.clone()));
        let window = chrono::Duration::seconds(self.cfg.request_id_window_s as i64);
        Ok(name
            .and_then(|n| self.operations.get(n))
            .filter(|op| op.insert_time + window > self.now_utc())
            .map(|op| op.name.clone()))
    }

    fn check_zone(&self, zone: &str) -> Result<(), ApiError> {
        if self.cfg.zones.iter().any(|z| z == zone) {
            Ok(())
        } else {
            Err(ApiError::new(
                400,
                "invalid",
                format!("Invalid value for field 'zone': '{zone}'. Unknown zone."),
            ))
        }
    }

    /// `instances.insert`; returns the operation's name.
    pub fn insert(
        &mut self,
        project: &str,
        zone: &str,
        rid: Option<String>,
        body: &Value,
    ) -> Result<String, ApiError> {
        self.check_zone(zone)?;
        if let Some(op) = self.replay(project, zone, &rid)? {
            return Ok(op);
        }
        let name = body.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
        if !valid_name(&name) {
            let msg = format!(
                "Invalid value for field 'resource.name': '{name}'. Must be a match of regex '(?:[a-z](?:[-a-z0-9]{{0,61}}[a-z0-9])?)'"
            );
            return Err(ApiError::new(400, "invalid", msg));
        }
        let machine_type = body.get("machineType").and_then(Value::as_str).unwrap_or_default().to_owned();
        if machine_type.is_empty() {
            return Err(ApiError::new(
                400,
                "required",
                "Required field 'resource.machineType' not specified",
            ));
        }
        let key: InstanceKey = (project.to_owned(), zone.to_owned(), name.clone());
        if self.instances.contains_key(&key) {
            let msg =
                format!("The resource 'projects/{project}/zones/{zone}/instances/{name}' already exists");
            return Err(ApiError::new(409, "alreadyExists", msg));
        }
        self.audit_insert(&key, rid.clone());
        let cpus = self.cfg.cpus_of(&machine_type);
        let region = region_of(zone).to_owned();
        let limits = self.faults.limits(project, &region, &self.cfg);
        let usage = self.usage.get(&(project.to_owned(), region.clone())).cloned().unwrap_or_default();
        let live = self.instances.len();
        let failure = if self.faults.stockout_zones.contains(zone) || live >= self.cfg.max_instances {
            Some(OpError {
                code: "ZONE_RESOURCE_POOL_EXHAUSTED".into(),
                message: format!(
                    "The zone 'projects/{project}/zones/{zone}' does not have enough resources available to fulfill the request.  Try a different zone, or try again later."
                ),
                http: 503,
            })
        } else if usage.cpus + cpus > limits.cpus {
            Some(quota_error("CPUS", limits.cpus, &region))
        } else if usage.instances + 1 > limits.instances {
            Some(quota_error("INSTANCES", limits.instances as f64, &region))
        } else {
            None
        };
        let id = self.rng.random::<u64>() >> 1;
        let total = Duration::from_millis(self.cfg.op_ms);
        let op = self.new_op(project, zone, "insert", &name, id, rid);
        self.run_op(&op, total);
        if let Some(err) = failure {
            self.operations.get_mut(&op).expect("just made").pending_error = Some(err);
            return Ok(op);
        }
        let inst = self.build_instance(id, machine_type, cpus, body);
        let never_boots = inst.never_boots;
        self.instances.insert(key.clone(), inst);
        let u = self.usage.entry((project.to_owned(), region)).or_default();
        u.cpus += cpus;
        u.instances += 1;
        let provision = Duration::from_millis(self.cfg.provision_ms);
        self.at(provision, Ev::InstStatus { key: key.clone(), id, to: Status::Staging });
        if !never_boots {
            let boot = provision + Duration::from_millis(self.cfg.stage_ms);
            self.at(boot, Ev::InstStatus { key, id, to: Status::Running });
        }
        Ok(op)
    }

    fn audit_insert(&mut self, key: &InstanceKey, rid: Option<String>) {
        let ids = self.inserts.entry(key.clone()).or_default();
        if ids.is_empty() {
            self.insert_order.push_back(key.clone());
        }
        if ids.len() < KEEP_INSERT_IDS {
            ids.push(rid.unwrap_or_default());
        }
        while self.insert_order.len() > self.cfg.max_operations {
            let old = self.insert_order.pop_front().expect("non-empty");
            self.inserts.remove(&old);
        }
    }

    fn build_instance(&mut self, id: u64, machine_type: String, cpus: f64, body: &Value) -> Instance {
        let labels: BTreeMap<String, String> = body
            .get("labels")
            .and_then(Value::as_object)
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned())).collect())
            .unwrap_or_default();
        let metadata: Vec<(String, Option<String>)> = body
            .pointer("/metadata/items")
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .map(|i| {
                        let k = i.get("key").and_then(Value::as_str).unwrap_or_default().to_owned();
                        (k, i.get("value").and_then(Value::as_str).map(str::to_owned))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let swarming = metadata
            .iter()
            .find(|(k, _)| k == "swarming-server")
            .and_then(|(_, v)| v.as_deref())
            .map(server_key);
        let given: Vec<Value> = body
            .get("networkInterfaces")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_else(|| vec![json!({})]);
        let mut nics = Vec::new();
        for nic in given {
            let nat = nic
                .pointer("/accessConfigs/0")
                .map(|ac| ac.get("name").and_then(Value::as_str).unwrap_or("External NAT").to_owned())
                .map(|name| (name, self.random_ip(35)));
            nics.push(Nic {
                network: nic
                    .get("network")
                    .and_then(Value::as_str)
                    .unwrap_or("global/networks/default")
                    .to_owned(),
                subnetwork: nic.get("subnetwork").and_then(Value::as_str).map(str::to_owned),
                ip: self.random_ip(10),
                nat,
            });
        }
        let mut rest = body.clone();
        if let Some(obj) = rest.as_object_mut() {
            for k in [
                "name",
                "machineType",
                "labels",
                "metadata",
                "networkInterfaces",
                "id",
                "status",
                "selfLink",
                "zone",
            ] {
                obj.remove(k);
            }
        }
        let never_boots = self.chance(self.faults.never_boot_rate);
        Instance {
            id,
            status: Status::Provisioning,
            created: self.now_utc(),
            machine_type,
            cpus,
            labels,
            metadata,
            nics,
            rest: rest.to_string().into_boxed_str(),
            never_boots,
            swarming,
            deleting: false,
            counted: true,
        }
    }

    /// `instances.delete`; returns the operation's name.
    pub fn delete(
        &mut self,
        project: &str,
        zone: &str,
        name: &str,
        rid: Option<String>,
    ) -> Result<String, ApiError> {
        self.check_zone(zone)?;
        if let Some(op) = self.replay(project, zone, &rid)? {
            return Ok(op);
        }
        let key: InstanceKey = (project.to_owned(), zone.to_owned(), name.to_owned());
        let Some(inst) = self.instances.get_mut(&key) else {
            return Err(not_found(project, zone, name));
        };
        let id = inst.id;
        let first = !inst.deleting;
        inst.deleting = true;
        if inst.status != Status::Terminated {
            inst.status = Status::Stopping;
        }
        let server = inst.swarming.clone();
        let stop = Duration::from_millis(self.cfg.stop_ms);
        let total = stop * 2;
        let op = self.new_op(project, zone, "delete", name, id, rid);
        self.run_op(&op, total);
        if first {
            self.at(stop, Ev::InstStatus { key: key.clone(), id, to: Status::Terminated });
            self.at(total, Ev::InstGone { key, id });
            if let Some(server) = server {
                self.bot_loses_instance(server, name, id);
            }
        }
        Ok(op)
    }

    fn bot_loses_instance(&mut self, server: String, bot: &str, session: u64) {
        let after = Duration::from_millis(self.cfg.bot_death_ms);
        self.at(after, Ev::BotDeath { server, bot: bot.to_owned(), session, terminated: false });
    }

    /// Preempts a running instance: STOPPING, then TERMINATED (it stays); its bot dies.
    pub fn preempt(&mut self, project: &str, zone: &str, name: &str) -> Result<(), ApiError> {
        let key: InstanceKey = (project.to_owned(), zone.to_owned(), name.to_owned());
        let Some(inst) = self.instances.get_mut(&key) else { return Err(not_found(project, zone, name)) };
        if inst.deleting || inst.status == Status::Terminated {
            return Ok(());
        }
        inst.status = Status::Stopping;
        let (id, server) = (inst.id, inst.swarming.clone());
        self.at(Duration::from_millis(self.cfg.stop_ms), Ev::InstStatus { key, id, to: Status::Terminated });
        if let Some(server) = server {
            self.bot_loses_instance(server, name, id);
        }
        Ok(())
    }

    /// `instances.get`.
    pub fn get(&self, project: &str, zone: &str, name: &str) -> Result<Value, ApiError> {
        self.check_zone(zone)?;
        let key: InstanceKey = (project.to_owned(), zone.to_owned(), name.to_owned());
        self.instances
            .get(&key)
            .map(|i| self.instance_json(&key, i))
            .ok_or_else(|| not_found(project, zone, name))
    }

    /// `instances.list`: one page of instances matching `filter`, after `token`.
    pub fn list(
        &self,
        project: &str,
        zone: &str,
        filter: &super::filter::Filter,
        max: usize,
        token: Option<&str>,
    ) -> Result<(Vec<Value>, Option<String>), ApiError> {
        self.check_zone(zone)?;
        let start: InstanceKey = (project.to_owned(), zone.to_owned(), token.unwrap_or_default().to_owned());
        let mut items = Vec::new();
        let mut next = None;
        let range = self.instances.range(start..).filter(|(k, _)| Some(k.2.as_str()) != token);
        for (k, i) in range.take_while(|(k, _)| k.0 == project && k.1 == zone) {
            if !filter.matches(&k.2, i) {
                continue;
            }
            if items.len() == max {
                next = items.last().and_then(|v: &Value| v["name"].as_str()).map(str::to_owned);
                break;
            }
            items.push(self.instance_json(k, i));
        }
        Ok((items, next))
    }

    fn instance_json(&self, key: &InstanceKey, i: &Instance) -> Value {
        let (project, zone, name) = key;
        let mut v: Value = serde_json::from_str(&i.rest).unwrap_or_else(|_| json!({}));
        let region = region_of(zone);
        let nics: Vec<Value> = i
            .nics
            .iter()
            .enumerate()
            .map(|(n, nic)| {
                let mut j = json!({
                    "kind": "compute#networkInterface",
                    "name": format!("nic{n}"),
                    "network": url(project, nic.network.trim_start_matches("global/")).replace(
                        &format!("projects/{project}/networks/"),
                        &format!("projects/{project}/global/networks/"),
                    ),
                    "networkIP": nic.ip,
                });
                if let Some(sub) = &nic.subnetwork {
                    j["subnetwork"] = json!(url(project, &format!("regions/{region}/subnetworks/{}", last(sub))));
                }
                if let Some((ac_name, ip)) = &nic.nat {
                    j["accessConfigs"] = json!([{
                        "kind": "compute#accessConfig", "type": "ONE_TO_ONE_NAT", "name": ac_name, "natIP": ip,
                        "networkTier": "PREMIUM"
                    }]);
                }
                j
            })
            .collect();
        let items: Vec<Value> = i
            .metadata
            .iter()
            .map(|(k, v)| match v {
                Some(v) => json!({"key": k, "value": v}),
                None => json!({"key": k}),
            })
            .collect();
        let obj = v.as_object_mut().expect("object");
        obj.insert("kind".into(), json!("compute#instance"));
        obj.insert("id".into(), json!(i.id.to_string()));
        obj.insert(
            "creationTimestamp".into(),
            json!(i.created.to_rfc3339_opts(SecondsFormat::Millis, false)),
        );
        obj.insert("name".into(), json!(name));
        obj.insert("zone".into(), json!(url(project, &format!("zones/{zone}"))));
        obj.insert(
            "machineType".into(),
            json!(url(project, &format!("zones/{zone}/machineTypes/{}", last(&i.machine_type)))),
        );
        obj.insert("status".into(), json!(i.status.name()));
        obj.insert("selfLink".into(), json!(url(project, &format!("zones/{zone}/instances/{name}"))));
        obj.insert("networkInterfaces".into(), json!(nics));
        obj.insert(
            "metadata".into(),
            json!({"kind": "compute#metadata", "fingerprint": "c2ltdWxhdG9y", "items": items}),
        );
        if !i.labels.is_empty() {
            obj.insert("labels".into(), json!(i.labels));
        }
        v
    }

    /// An operation's JSON.
    pub fn op_json(&self, name: &str) -> Option<Value> {
        let op = self.operations.get(name)?;
        let mut v = json!({
            "kind": "compute#operation",
            "id": op.id.to_string(),
            "name": op.name,
            "zone": url(&op.project, &format!("zones/{}", op.zone)),
            "operationType": op.kind,
            "targetLink": url(&op.project, &format!("zones/{}/instances/{}", op.zone, op.target)),
            "targetId": op.target_id.to_string(),
            "status": match op.status { OpStatus::Pending => "PENDING", OpStatus::Running => "RUNNING", OpStatus::Done => "DONE" },
            "user": "simulator@gce-backend",
            "progress": match op.status { OpStatus::Pending => 0, OpStatus::Running => 50, OpStatus::Done => 100 },
            "insertTime": op.insert_time.to_rfc3339_opts(SecondsFormat::Millis, false),
            "selfLink": url(&op.project, &format!("zones/{}/operations/{}", op.zone, op.name)),
        });
        if let Some(t) = op.start_time {
            v["startTime"] = json!(t.to_rfc3339_opts(SecondsFormat::Millis, false));
        }
        if let Some(t) = op.end_time {
            v["endTime"] = json!(t.to_rfc3339_opts(SecondsFormat::Millis, false));
        }
        if let Some(rid) = &op.request_id {
            v["clientOperationId"] = json!(rid);
        }
        if let Some(e) = &op.error {
            v["httpErrorStatusCode"] = json!(e.http);
            v["httpErrorMessage"] = json!(if e.http == 403 { "FORBIDDEN" } else { "SERVICE UNAVAILABLE" });
            v["error"] = json!({"errors": [{"code": e.code, "message": e.message}]});
        }
        Some(v)
    }

    /// The operation `name` of `project`/`zone`.
    pub fn operation(&self, project: &str, zone: &str, name: &str) -> Result<&Operation, ApiError> {
        self.operations.get(name).filter(|op| op.project == project && op.zone == zone).ok_or_else(|| {
            ApiError::new(
                404,
                "notFound",
                format!("The resource 'projects/{project}/zones/{zone}/operations/{name}' was not found"),
            )
        })
    }

    /// `zones.list` items.
    pub fn zones(&self, project: &str) -> Vec<Value> {
        self.cfg
            .zones
            .iter()
            .enumerate()
            .map(|(n, z)| {
                json!({
                    "kind": "compute#zone", "id": (2000 + n).to_string(), "name": z, "status": "UP",
                    "region": url(project, &format!("regions/{}", region_of(z))),
                    "selfLink": url(project, &format!("zones/{z}")),
                })
            })
            .collect()
    }

    /// `regions.list` items, with CPUS and INSTANCES quotas and their usage.
    pub fn regions(&self, project: &str) -> Vec<Value> {
        let regions: BTreeSet<&str> = self.cfg.zones.iter().map(|z| region_of(z)).collect();
        regions
            .into_iter()
            .enumerate()
            .map(|(n, r)| {
                let limits = self.faults.limits(project, r, &self.cfg);
                let usage = self.usage.get(&(project.to_owned(), r.to_owned())).cloned().unwrap_or_default();
                let zones: Vec<String> = self
                    .cfg
                    .zones
                    .iter()
                    .filter(|z| region_of(z) == r)
                    .map(|z| url(project, &format!("zones/{z}")))
                    .collect();
                json!({
                    "kind": "compute#region", "id": (1000 + n).to_string(), "name": r, "status": "UP",
                    "zones": zones, "selfLink": url(project, &format!("regions/{r}")),
                    "quotas": [
                        {"metric": "CPUS", "limit": limits.cpus, "usage": usage.cpus},
                        {"metric": "INSTANCES", "limit": limits.instances as f64, "usage": usage.instances as f64},
                    ],
                })
            })
            .collect()
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

fn push_event(b: &mut Bot, ts: DateTime<Utc>, kind: &'static str, message: String) {
    b.events.push_back(BotEvent { ts, kind, message });
    if b.events.len() > KEEP_BOT_EVENTS {
        b.events.pop_front();
    }
}

fn last(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
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

/// The state as `/sim/state` returns it: instances, bots, operations, insert audit.
pub fn state_json(w: &World) -> Value {
    let instances: Vec<Value> = w
        .instances
        .iter()
        .map(|((p, z, n), i)| {
            json!({"project": p, "zone": z, "name": n, "id": i.id.to_string(), "status": i.status.name(),
                   "labels": i.labels, "swarming": i.swarming, "neverBoots": i.never_boots, "deleting": i.deleting,
                   "created": ts(i.created)})
        })
        .collect();
    let bots: Vec<Value> = w
        .bots
        .iter()
        .flat_map(|(server, bots)| {
            bots.keys().map(move |id| {
                let mut v = w.bot_json(server, id).expect("listed");
                v["server"] = json!(server);
                v
            })
        })
        .collect();
    let mut ops: Vec<&Operation> = w.operations.values().collect();
    ops.sort_by(|a, b| a.name.cmp(&b.name));
    let operations: Vec<Value> = ops
        .iter()
        .map(|op| {
            json!({"name": op.name, "project": op.project, "zone": op.zone, "type": op.kind, "target": op.target,
                   "status": op.status, "error": op.error, "requestId": op.request_id})
        })
        .collect();
    let mut inserts: Vec<Value> = w
        .inserts
        .iter()
        .map(|((p, z, n), ids)| json!({"project": p, "zone": z, "name": n, "requestIds": ids}))
        .collect();
    inserts.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    json!({"now": ts(w.now_utc()), "instances": instances, "bots": bots, "operations": operations, "inserts": inserts})
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

#[cfg(test)]
mod tests {
    use super::*;

    fn body(name: &str) -> Value {
        json!({"name": name, "machineType": "zones/us-central1-b/machineTypes/e2-small",
               "metadata": {"items": [{"key": "swarming-server", "value": "https://s.example.com"}]},
               "networkInterfaces": [{"accessConfigs": [{"type": "ONE_TO_ONE_NAT"}]}]})
    }

    fn world(cfg: SimConfig) -> (World, Instant) {
        let t0 = Instant::now();
        (World::new(cfg, t0), t0)
    }

    #[test]
    fn holds_200000_instances_and_their_bots() {
        const N: usize = 200_000;
        let (mut w, t0) = world(SimConfig { max_operations: 10_000, ..SimConfig::default() });
        for n in 0..N {
            w.insert("p", "us-central1-b", None, &body(&format!("vm-{n}"))).unwrap();
        }
        w.advance(t0 + Duration::from_secs(60));
        assert_eq!(w.instances.len(), N);
        assert!(w.instances.values().all(|i| i.status == Status::Running));
        assert_eq!(w.bots["s.example.com"].len(), N, "every bot connected");
        assert!(w.operations.len() <= 10_000, "operations are capped");
        assert!(w.timeline.is_empty(), "nothing left scheduled");
        assert_eq!(w.usage[&("p".to_owned(), "us-central1".to_owned())].instances, N as u64);
    }

    #[test]
    fn every_store_is_capped() {
        let cfg = SimConfig { max_operations: 100, max_bots: 50, max_instances: 120, ..SimConfig::default() };
        let (mut w, t0) = world(cfg);
        for n in 0..150 {
            let rid = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, format!("{n}").as_bytes()).to_string();
            w.insert("p", "us-central1-b", Some(rid), &body(&format!("vm-{n}"))).unwrap();
        }
        assert!(w.operations.len() <= 100 && w.request_ids.len() <= 100 && w.inserts.len() <= 100);
        assert_eq!(w.instances.len(), 120, "inserts past max_instances fail as a stockout");
        w.advance(t0 + Duration::from_secs(10));
        let failed = w
            .operations
            .values()
            .filter(|op| op.error.as_ref().is_some_and(|e| e.code == "ZONE_RESOURCE_POOL_EXHAUSTED"));
        assert_eq!(failed.count(), 30);
        // Dead bots are dropped first when there are too many.
        let names: Vec<String> = w.instances.keys().map(|k| k.2.clone()).take(70).collect();
        for name in &names {
            w.kill_bot("s.example.com", name);
        }
        let last: Vec<String> = w.instances.keys().map(|k| k.2.clone()).skip(100).collect();
        for name in &last {
            w.delete("p", "us-central1-b", name, None).unwrap();
        }
        w.advance(t0 + Duration::from_secs(15));
        for n in 150..160 {
            w.insert("p", "us-central1-a", None, &body(&format!("vm-{n}"))).unwrap();
        }
        w.advance(t0 + Duration::from_secs(25));
        let bots = &w.bots["s.example.com"];
        assert!(bots.values().all(|b| b.dead_at.is_none()), "past the cap, dead bots are dropped");
        assert_eq!(bots.len(), 120 - 70 - 20 + 10, "live bots stay: their instances are capped instead");
        // A bot keeps at most KEEP_BOT_EVENTS events.
        let (mut w, t0) = world(SimConfig::default());
        w.insert("p", "us-central1-b", None, &body("vm-x")).unwrap();
        let mut t = t0;
        for _ in 0..30 {
            t += Duration::from_secs(5);
            w.advance(t);
            w.terminate_bot("s.example.com", "vm-x");
            w.delete_bot("s.example.com", "vm-x");
            let id = w.instances.values().next().unwrap().id;
            w.connect_bot("s.example.com".into(), ("p".into(), "us-central1-b".into(), "vm-x".into()), id);
        }
        assert!(w.bots["s.example.com"]["vm-x"].events.len() <= KEEP_BOT_EVENTS);
    }
}
