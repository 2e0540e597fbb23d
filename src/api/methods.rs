//! The API's one list of methods: name, HTTP verb, route, query parameters, input and output
//! types, the role it needs and what it does. The router, the API reference, the OpenAPI
//! document and the CLI all come from this table.

use axum::Router;
use axum::routing::{MethodFilter, on};
use schemars::JsonSchema;

use super::auth::Role;
use super::state::Api;
use super::types::*;
use super::{configs, queues, register, series, spend, status, ui, vms};
use gce_backend_jobs::model::{Plan, PlanInput};

/// A JSON schema: its file name under `schemas/gce-backend/v1/` and the schema.
pub type SchemaFn = fn() -> (String, serde_json::Value);

/// One API method.
#[derive(Debug, Clone, Copy)]
pub struct Method {
    /// Its name (`listConfigs`).
    pub name: &'static str,
    /// `get`, `post`, `put` or `delete`.
    pub verb: &'static str,
    /// Route under `ROOT/api/gce-backend/v1`, with `<param>` placeholders.
    pub route: &'static str,
    /// Query parameters it reads.
    pub query: &'static [&'static str],
    /// Its input's schema, if it takes a body.
    pub input: Option<SchemaFn>,
    /// Its output's schema.
    pub output: SchemaFn,
    /// The least role that may call it.
    pub role: Role,
    /// One line on what it does.
    pub title: &'static str,
}

impl Method {
    /// The route's parameters, in order.
    pub fn params(&self) -> Vec<&'static str> {
        self.route.split('/').filter_map(|s| s.strip_prefix('<')?.strip_suffix('>')).collect()
    }

    /// The route as axum writes it (`{param}`).
    pub fn axum_route(&self) -> String {
        self.route.replace('<', "{").replace('>', "}")
    }

    /// Whether it changes what is stored (every method but a read or a dry run): its 2xx waits
    /// for the replicas.
    pub fn writes(&self) -> bool {
        self.verb != "get" && !DRY_RUNS.contains(&self.name)
    }

    /// Its verb as a filter.
    fn filter(&self) -> MethodFilter {
        match self.verb {
            "get" => MethodFilter::GET,
            "post" => MethodFilter::POST,
            "put" => MethodFilter::PUT,
            _ => MethodFilter::DELETE,
        }
    }
}

/// The methods that take a body but store nothing.
const DRY_RUNS: [&str; 1] = ["planConfig"];

/// The schema of `T`, named after it (`config-entry.json`).
pub fn schema<T: JsonSchema>() -> (String, serde_json::Value) {
    let name = T::schema_name();
    let mut file = String::new();
    for (i, c) in name.chars().filter(char::is_ascii_alphanumeric).enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            file.push('-');
        }
        file.push(c.to_ascii_lowercase());
    }
    (format!("{file}.json"), serde_json::to_value(schemars::schema_for!(T)).unwrap_or_default())
}

macro_rules! methods {
    (@in) => { None };
    (@in $t:ty) => { Some(schema::<$t> as SchemaFn) };
    ($( $name:literal: $verb:ident $route:literal [$($q:literal),*] $(in $input:ty)? => $output:ty,
        $role:ident, $handler:path, $title:literal; )+) => {
        /// Every method of the API.
        pub const METHODS: &[Method] = &[$(Method {
            name: $name,
            verb: stringify!($verb),
            route: $route,
            query: &[$($q),*],
            input: methods!(@in $($input)?),
            output: schema::<$output>,
            role: Role::$role,
            title: $title,
        }),+];

        /// The API's routes, each behind its role check (`wrap` adds it).
        pub(super) fn routes(wrap: impl Fn(&Method, axum::routing::MethodRouter<Api>) -> axum::routing::MethodRouter<Api>) -> Router<Api> {
            let mut r = Router::new();
            let mut i = 0;
            $(
                let m = &METHODS[i];
                r = r.route(&m.axum_route(), wrap(m, on(m.filter(), $handler)));
                i += 1;
            )+
            let _ = i;
            r
        }
    };
}

methods! {
    "listConfigs": get "/configs" ["continuationToken", "limit"] => ConfigList,
        Reader, configs::list, "List the Configs the caller may read, with their status (paged), and the Config files not applied that it may read.";
    "config": get "/configs/<prefix>" [] => ConfigEntry,
        Reader, configs::get, "One Config with its status: counts, errors, backoff, revision, source, pause, its file's errors. A Config whose file is not applied is a 404 whose `files` say why.";
    "createConfig": post "/configs/<prefix>" [] in gce_backend_jobs::config::Config => ConfigEntry,
        Writer, configs::create, "Create a Config owned by the API (same validation as files).";
    "updateConfig": put "/configs/<prefix>" [] in gce_backend_jobs::config::Config => ConfigEntry,
        Writer, configs::update, "Replace a Config owned by the API (files own theirs).";
    "deleteConfig": delete "/configs/<prefix>" [] => ConfigEntry,
        Writer, configs::delete, "Delete an API Config: drained after the same grace as a removed file.";
    "updateAmount": put "/configs/<prefix>/amount" [] in AmountInput => ConfigEntry,
        Writer, configs::amount, "Set the amount (clamped to the Config's bounds; kept until they change).";
    "pauseConfig": post "/configs/<prefix>/pause" [] in PauseInput => ConfigEntry,
        Writer, configs::pause, "Pause a Config: creation and replacement stop, deletion goes on.";
    "resumeConfig": post "/configs/<prefix>/resume" [] => ConfigEntry,
        Writer, configs::resume, "Resume a paused Config.";
    "configHistory": get "/configs/<prefix>/history" ["continuationToken", "limit"] => AuditList,
        Reader, configs::history, "A Config's audit trail, newest first (paged): who applied, deleted, paused, resumed, set the amount, recycled a VM or retried a task, when, with its revision before and after. Kept after the Config is deleted.";
    "planConfig": post "/configs/<prefix>/plan" [] in PlanInput => Plan,
        Writer, configs::plan, "Dry run: the VMs a Config body or amount would create, drain, replace (how), recycle and keep; why it would be refused.";
    "pauseAll": post "/pause" [] in PauseInput => GlobalPause,
        Admin, configs::pause_all, "Pause every Config.";
    "resumeAll": post "/resume" [] => GlobalPause,
        Admin, configs::resume_all, "Lift the global pause.";
    "history": get "/history" ["continuationToken", "limit"] => AuditList,
        Admin, configs::global_history, "The global audit trail, newest first (paged): pauses of every Config, queue-wide retries and purges, retries of tasks of no one Config.";
    "globalPause": get "/pause" [] => GlobalPause,
        Reader, configs::global_pause, "Whether every Config is paused, by whom and why.";
    "status": get "/status" ["prefixes", "live"] => gce_backend_jobs::fleet::status::Report,
        Reader, status::status, "What `gce-backend status` prints: the readable Configs' status (prefixes: comma separated; live=true counts now), the global pause, the Config files not applied the caller may read; for admins also rate limits.";
    "spend": get "/spend" ["tenant", "month"] => gce_backend_jobs::spend::report::SpendReport,
        Reader, spend::spend, "Showback (`gce-backend spend`): per tenant and per readable Config (deleted ones included), VM-hours and dollars by billed state in a month (month=YYYY-MM, default this month, UTC) and the month before, the cost per hour now, the tenant's budget and the share of it used, and the price book's source and date (tenant: one tenant).";
    "configSeries": get "/configs/<prefix>/series" [] => ConfigSeries,
        Reader, series::config, "A Config's last hour for the dashboard's charts: VMs created, bots connected and the amount, one point a minute.";
    "listVms": get "/configs/<prefix>/vms" ["state", "continuationToken", "limit"] => VmList,
        Reader, vms::list, "A Config's VMs (paged; state: creating, running, connected, warm, draining, unhealthy).";
    "vm": get "/vms/<id>" [] => VmDetail,
        Reader, vms::get, "One VM: its record, instance, last bot observation and its tasks.";
    "recycleVm": post "/vms/<id>/recycle" [] => VmDetail,
        Writer, vms::recycle, "Drain a VM so it is replaced.";
    "listQueues": get "/queues" [] => QueueList,
        Reader, queues::list, "Every queue with its counts.";
    "queueSeries": get "/queues/series" [] => QueueSeriesList,
        Reader, series::queues, "Every queue's last hour for the dashboard's charts: retries, failures (since the point before) and tasks waiting, one point a minute.";
    "pendingTasks": get "/queues/<queue>/pending" ["continuationToken", "limit"] => TaskList,
        Reader, queues::pending, "A queue's pending and delayed tasks (paged), each with its Config and whether the caller may retry it.";
    "deadTasks": get "/queues/<queue>/dead" ["continuationToken", "limit"] => TaskList,
        Reader, queues::dead, "A queue's dead tasks (paged), each with its Config and whether the caller may retry it.";
    "task": get "/queues/<queue>/tasks/<taskId>" [] => TaskEntry,
        Reader, queues::task, "One task's status (seed 003 shape: runs, state, reason, …), its Config and whether the caller may retry it.";
    "retryTask": post "/queues/<queue>/tasks/<taskId>/retry" [] => Affected,
        Writer, queues::retry_task, "Put one dead task back.";
    "retryDead": post "/queues/<queue>/dead/retry" [] => Affected,
        Admin, queues::retry_dead, "Put every dead task of a queue back.";
    "purgeDead": delete "/queues/<queue>/dead" [] => Affected,
        Admin, queues::purge_dead, "Drop every dead task of a queue.";
    "purgePending": delete "/queues/<queue>/pending" [] => Affected,
        Admin, queues::purge_pending, "Drop every pending task of a queue (the cron pushes again what is wanted).";
    "register": post "/register" [] in gce_backend_jobs::operate::register::RegisterInput
        => gce_backend_jobs::operate::register::Registration,
        Anyone, register::register, "A VM registers with its identity proof (no token; any refusal is one 403).";
    "whoami": get "/whoami" [] => WhoAmI,
        Reader, ui::whoami, "The caller's token: its name, role, groups and what the role lets it do (`may`: read, write, admin).";
}
