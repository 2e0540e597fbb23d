//! The world's records: instances and their network interfaces, operations, quota usage and
//! regions, Swarming bots and their events, and Compute Engine's error answers. Only the world's
//! methods change them (`World` in `mod.rs`, and its methods per API beside it).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use crate::config::QuotaLimits;
use crate::dims::Dims;

use super::records::BulkOutcome;

/// Events kept per bot (oldest dropped).
pub(super) const KEEP_BOT_EVENTS: usize = 20;

/// `projects/<p>/zones/<z>/instances/<name>`.
pub type InstanceKey = (String, String, String);

/// `(key, instance)`: an instance with its `projects/<p>/zones/<z>/instances/<name>`.
pub type InstanceEntry<'a> = (&'a InstanceKey, &'a Instance);

/// Instance status, as Compute Engine names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    /// Resources are being allocated.
    Provisioning,
    /// Booting.
    Staging,
    /// Running.
    Running,
    /// Stopping (also while being deleted).
    Stopping,
    /// Stopped (preempted, stopped, or about to be deleted).
    Terminated,
    /// Being suspended.
    Suspending,
    /// Suspended (memory saved; no CPUs billed).
    Suspended,
}

impl Status {
    /// Compute Engine's name of the status (`RUNNING`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Status::Provisioning => "PROVISIONING",
            Status::Staging => "STAGING",
            Status::Running => "RUNNING",
            Status::Stopping => "STOPPING",
            Status::Terminated => "TERMINATED",
            Status::Suspending => "SUSPENDING",
            Status::Suspended => "SUSPENDED",
        }
    }
}

/// One network interface.
#[derive(Debug, Clone)]
pub struct Nic {
    /// Network as given (`global/networks/default` when none was).
    pub(crate) network: String,
    /// Subnetwork as given.
    pub(crate) subnetwork: Option<String>,
    /// Internal address.
    pub(crate) ip: String,
    /// External access config: its name and address.
    pub(crate) nat: Option<(String, String)>,
}

/// A Compute Engine instance.
#[derive(Debug, Clone)]
pub struct Instance {
    /// Unique per incarnation.
    pub id: u64,
    /// Status.
    pub status: Status,
    /// Insert time.
    pub(crate) created: DateTime<Utc>,
    /// Machine type as given (a name or URL).
    pub(crate) machine_type: String,
    pub(super) cpus: f64,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Metadata items as given: key and value (absent when none was).
    pub(crate) metadata: Vec<(String, Option<String>)>,
    /// Network interfaces.
    pub(crate) nics: Vec<Nic>,
    /// Other fields of the insert body (disks, tags, service accounts, scheduling, ...), echoed:
    /// a JSON object.
    pub(crate) rest: Box<str>,
    /// Fault: stays in STAGING for ever.
    pub never_boots: bool,
    /// A Spot or preemptible instance (`spot_preempt_rate` applies).
    pub spot: bool,
    /// Its boot disk's image (`broken_images` applies).
    pub image: String,
    /// Swarming server its bot connects to (from metadata `swarming-server`).
    pub swarming: Option<String>,
    /// Being deleted.
    pub(crate) deleting: bool,
    /// Counted in its region's quota usage.
    pub(super) counted: bool,
    /// Its CPUs counted in its region's quota usage (not while suspended or stopped).
    pub(super) cpus_held: bool,
    /// Stopped by `instances.stop`: keeps its instance quota while TERMINATED.
    pub(super) stopped: bool,
    /// Being resumed: its bot comes back when it runs again.
    pub(super) resuming: bool,
}

/// An operation error (the first of `error.errors[]`).
#[derive(Debug, Clone)]
pub struct OpError {
    /// E.g. `QUOTA_EXCEEDED`.
    pub code: String,
    /// Message.
    pub message: String,
    /// `httpErrorStatusCode`.
    pub http: u16,
}

/// Operation status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum OpStatus {
    /// Queued.
    Pending,
    /// Working.
    Running,
    /// Finished (maybe with an error).
    Done,
}

impl OpStatus {
    /// Compute Engine's name of the status (`PENDING`, ...).
    pub fn name(self) -> &'static str {
        match self {
            OpStatus::Pending => "PENDING",
            OpStatus::Running => "RUNNING",
            OpStatus::Done => "DONE",
        }
    }
}

/// Where an operation is: in a zone, a region, or global.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `zoneOperations` (instances and their actions, a zonal bulkInsert).
    Zone,
    /// `regionOperations` (a regional bulkInsert).
    Region,
    /// `globalOperations` (instance templates).
    Global,
}

/// An operation: zonal, regional or global.
#[derive(Debug, Clone)]
pub struct Operation {
    /// Unique id.
    pub(crate) id: u64,
    /// Operation name.
    pub name: String,
    /// Project.
    pub(crate) project: String,
    /// Zonal, regional or global.
    pub(crate) scope: Scope,
    /// Its zone or region (`global` for a global one).
    pub(crate) location: String,
    /// `insert`, `delete`, `suspend`, ..., `bulkInsert`.
    pub kind: &'static str,
    /// Instance (or template) name; a bulkInsert's first instance (for the Config it counts
    /// under; it has no target).
    pub target: String,
    /// Id of the instance incarnation it acts on.
    pub(crate) target_id: u64,
    /// Status.
    pub status: OpStatus,
    /// Creation time.
    pub(crate) insert_time: DateTime<Utc>,
    /// When it became RUNNING.
    pub(crate) start_time: Option<DateTime<Utc>>,
    /// When it became DONE.
    pub(crate) end_time: Option<DateTime<Utc>>,
    /// Error, set when DONE.
    pub error: Option<OpError>,
    pub(super) pending_error: Option<OpError>,
    /// The requestId it was made with.
    pub(crate) request_id: Option<String>,
    /// `operationGroupId`: a bulkInsert's, shared by the inserts it made.
    pub(crate) group: Option<String>,
    /// A bulkInsert's outcome per zone.
    pub(crate) bulk: Option<Box<BulkOutcome>>,
}

/// Usage of one (project, region).
#[derive(Debug, Clone, Default)]
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

/// A region of a project: its zones, quota limits and usage.
#[derive(Debug, Clone)]
pub struct Region<'a> {
    /// Region name.
    pub name: &'a str,
    /// Its zones, in configuration order.
    pub zones: Vec<&'a str>,
    /// CPUS and INSTANCES limits.
    pub limits: QuotaLimits,
    /// Their usage.
    pub usage: Usage,
}

impl ApiError {
    pub(super) fn new(status: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self { status, reason, message: message.into() }
    }
}

/// A bot lifecycle event.
#[derive(Debug, Clone)]
pub struct BotEvent {
    /// When.
    pub(crate) ts: DateTime<Utc>,
    /// Swarming's event type (`bot_connected`, ...).
    pub(crate) kind: &'static str,
    /// Message.
    pub(crate) message: String,
}

/// A Swarming bot.
#[derive(Debug, Clone)]
pub struct Bot {
    /// The instance id it runs on (its session).
    pub session: u64,
    /// First connection of this session.
    pub(crate) first_seen: DateTime<Utc>,
    pub(super) connected_at: Instant,
    /// Dead since.
    pub dead_at: Option<DateTime<Utc>>,
    /// Deleted from the server.
    pub deleted: bool,
    /// The pending TerminateBot task id.
    pub(super) termination: Option<String>,
    /// Set when it died because of TerminateBot.
    pub termination_task_id: Option<String>,
    /// External address.
    pub(crate) external_ip: String,
    /// Zone of its instance.
    pub(crate) zone: String,
    /// Lifecycle events, oldest first (at most [`KEEP_BOT_EVENTS`]).
    pub(crate) events: VecDeque<BotEvent>,
    /// Its dimensions (its group's, `id`, and the defaults `pool`, `zone`).
    pub(crate) dims: Dims,
    /// The task it runs (an index into the world's tasks).
    pub(super) task: Option<usize>,
    /// Silent since (its instance stopped, went or was suspended): last seen then.
    pub(super) silent_at: Option<DateTime<Utc>>,
    /// Which silence it is in (its death is scheduled for that one only).
    pub(super) silence: u64,
}

/// A bot as `GetBot` answers it: its record, with what depends on the time.
#[derive(Debug, Clone)]
pub struct BotView<'a> {
    /// Bot id.
    pub id: &'a str,
    /// The record.
    pub bot: &'a Bot,
    /// Last contact: now, or its death.
    pub last_seen: DateTime<Utc>,
    /// The task it runs now, if any.
    pub task_id: Option<String>,
}

/// Appends an event to a bot's, dropping the oldest beyond [`KEEP_BOT_EVENTS`].
pub(super) fn push_event(b: &mut Bot, ts: DateTime<Utc>, kind: &'static str, message: String) {
    b.events.push_back(BotEvent { ts, kind, message });
    if b.events.len() > KEEP_BOT_EVENTS {
        b.events.pop_front();
    }
}

/// A task's state, as Swarming names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TaskState {
    /// Waiting for a bot.
    Pending,
    /// A bot runs it.
    Running,
    /// Ran to its end.
    Completed,
    /// Its bot died (its instance stopped, went, was preempted or suspended) while running it.
    BotDied,
    /// Canceled before it ran.
    Canceled,
}

impl TaskState {
    /// Every state, in the order of the task totals.
    pub const ALL: [TaskState; 5] = [
        TaskState::Pending,
        TaskState::Running,
        TaskState::Completed,
        TaskState::BotDied,
        TaskState::Canceled,
    ];

    /// Swarming's name (`PENDING`, ...).
    pub fn name(self) -> &'static str {
        match self {
            TaskState::Pending => "PENDING",
            TaskState::Running => "RUNNING",
            TaskState::Completed => "COMPLETED",
            TaskState::BotDied => "BOT_DIED",
            TaskState::Canceled => "CANCELED",
        }
    }
}

/// A task to add: its id (made up when none), dimensions and how long it runs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct NewTask {
    /// Its id, if given.
    pub id: Option<String>,
    /// What a bot must have.
    pub dimensions: Dims,
    /// How long it runs.
    pub duration: Duration,
}

/// A Swarming task.
#[derive(Debug, Clone)]
pub struct Task {
    /// Its id.
    pub id: String,
    /// What a bot must have (also its tags, `key:value` each).
    pub dimensions: Dims,
    /// How long it runs.
    pub duration: Duration,
    /// State.
    pub state: TaskState,
    /// Created (arrived).
    pub created: Instant,
    /// Started on a bot.
    pub started: Option<Instant>,
    /// Ended (completed, bot died, canceled).
    pub ended: Option<Instant>,
    /// The bot that ran it: server and bot id.
    pub bot: Option<(String, String)>,
}

/// A bot: server and id.
pub(super) type BotRef = (String, String);

/// The task queue and the idle bots.
#[derive(Debug, Default)]
pub(super) struct Queue {
    /// Every task, by index (ids in `by_id`).
    pub(super) tasks: Vec<Task>,
    pub(super) by_id: HashMap<String, usize>,
    /// Pending tasks, oldest first.
    pub(super) pending: BTreeSet<usize>,
    /// Idle bots by each `key:value` they have.
    pub(super) idle: HashMap<(String, String), BTreeSet<BotRef>>,
    /// Tasks by state, in the order of [`TaskState::ALL`].
    pub(super) totals: [u64; 5],
}

/// Seconds instances spent, summed over all of them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Billing {
    /// PROVISIONING, STAGING, RUNNING, STOPPING, SUSPENDING: billed as running.
    pub running_s: f64,
    /// SUSPENDED.
    pub suspended_s: f64,
    /// TERMINATED (stopped or preempted, not yet deleted).
    pub stopped_s: f64,
}

impl Billing {
    /// Adds `dt` seconds of the instances counted by status in `by_status`.
    pub(super) fn add(&mut self, by_status: &[u64; 7], dt: f64) {
        let n = |s: Status| by_status[s as usize] as f64;
        let running = n(Status::Provisioning)
            + n(Status::Staging)
            + n(Status::Running)
            + n(Status::Stopping)
            + n(Status::Suspending);
        self.running_s += running * dt;
        self.suspended_s += n(Status::Suspended) * dt;
        self.stopped_s += n(Status::Terminated) * dt;
    }
}

/// One Config's instance seconds and operations made.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfigUsage {
    /// Seconds billed, by class.
    pub billing: Billing,
    /// Operations made, by kind (`insert`, `delete`, `suspend`, `resume`, `stop`, `start`).
    pub actions: BTreeMap<&'static str, u64>,
}

/// What `ListBots` filters on besides the cursor.
#[derive(Debug, Clone, Default)]
pub struct BotFilter {
    /// Dimensions (`key` and `a|b` values).
    pub dims: crate::dims::Filter,
    /// Dead or alive only.
    pub is_dead: Option<bool>,
    /// Busy (running a task) or idle only.
    pub is_busy: Option<bool>,
}

/// What `CountBots` answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BotCount {
    /// Every bot matching (dead ones too).
    pub count: u64,
    /// Running a task.
    pub busy: u64,
    /// Dead.
    pub dead: u64,
}
