//! The operator's commands over the API: `status`, `configs`, `vms`, `queues` and the generic
//! `api METHOD`, with human tables by default and `--json` for scripts (`status` prints JSON).
//! The root URL has no default (seed 002); `gce-backend run` prints it and, in the embedded
//! default, an admin token.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::{Value, json};

use super::call::Target;
use super::call::{
    call, client, config_file, confirm, every_page, fail, first_page, json_input, pages, queue_counts, show,
    usage,
};
use super::client::{CallError, Client};
use super::render;
use crate::api::types::Page;
use crate::out;

/// `gce-backend configs …`.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum ConfigsCmd {
    /// Every Config the token may read, with its counts.
    List,
    /// One Config and its status.
    Get {
        /// Its prefix.
        prefix: String,
    },
    /// Wait until a Config is settled (as many VMs connected as its amount, none draining, no
    /// rolling update under way), then print it; exit 1 if it is not within --timeout.
    Wait {
        /// Its prefix.
        prefix: String,
        /// Seconds to wait at most.
        #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..=86_400))]
        timeout: u64,
    },
    /// Create or replace a Config made over the API from a YAML/JSON file (`from_file` metadata
    /// is read here, relative to the file).
    Apply {
        /// The Config file.
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
    },
    /// Delete a Config made over the API (drained after the grace).
    Delete {
        /// Its prefix.
        prefix: String,
    },
    /// Set a Config's amount (clamped to its bounds).
    Amount {
        /// Its prefix.
        prefix: String,
        /// The amount.
        amount: u32,
    },
    /// Pause a Config, or every Config with --all.
    Pause {
        /// Its prefix (or --all).
        prefix: Option<String>,
        /// Every Config (admin).
        #[arg(long)]
        all: bool,
        /// Why.
        #[arg(long, default_value = "")]
        reason: String,
    },
    /// Resume a Config, or lift the global pause with --all.
    Resume {
        /// Its prefix (or --all).
        prefix: Option<String>,
        /// The global pause (admin).
        #[arg(long)]
        all: bool,
    },
    /// A Config's audit trail, newest first (who changed what, when, which revision), or the
    /// global one with --global (admin).
    History {
        /// Its prefix (or --global).
        prefix: Option<String>,
        /// The global trail: pauses of every Config, queue-wide retries and purges (admin).
        #[arg(long)]
        global: bool,
    },
    /// Convert a LUCI vms.cfg to YAML (a document per vms block), or YAML to vms.cfg with
    /// --to cfg; checks every Config as the importer does. Local: no API is called.
    Convert {
        /// The file: *.cfg is read as LUCI's vms.cfg, anything else as YAML; - is standard input
        /// (vms.cfg, or YAML with --to cfg).
        file: PathBuf,
        /// What to print.
        #[arg(long, value_enum, default_value = "yaml")]
        to: super::convert::To,
    },
    /// What a Config file or an amount would change, changing nothing.
    Plan {
        /// The Config file (its prefix is planned).
        #[arg(short = 'f', long = "file")]
        file: Option<PathBuf>,
        /// Its prefix, with --amount.
        prefix: Option<String>,
        /// An amount to plan.
        #[arg(long)]
        amount: Option<u32>,
    },
}

/// `gce-backend vms …`.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum VmsCmd {
    /// A Config's VMs.
    List {
        /// The Config's prefix.
        prefix: String,
        /// Only VMs in this state: creating, running, connected, warm, draining, unhealthy.
        #[arg(long)]
        state: Option<String>,
    },
    /// One VM with its instance, bot and tasks.
    Get {
        /// VM id (`<prefix>-<index>`).
        id: String,
    },
    /// Drain a VM so it is replaced.
    Recycle {
        /// VM id.
        id: String,
    },
}

/// `gce-backend queues …`.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum QueuesCmd {
    /// Every queue's counts.
    List,
    /// One queue's counts (pending, delayed, running, dead) and counters.
    Counts {
        /// Queue name.
        queue: String,
    },
    /// A queue's due tasks in the order workers take them, then its delayed ones.
    Pending {
        /// Queue name.
        queue: String,
        /// How many.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// One task's status: state, attempts, runs.
    Task {
        /// Queue name.
        queue: String,
        /// Task id.
        id: String,
    },
    /// A queue's dead tasks.
    Dead {
        /// Queue name.
        queue: String,
    },
    /// Put one dead task back, or every dead task of the queue with --all.
    Retry {
        /// Queue name.
        queue: String,
        /// Task id.
        task: Option<String>,
        /// Every dead task.
        #[arg(long)]
        all: bool,
    },
    /// Drop a queue's dead tasks, or its pending ones (due and delayed) with --pending (admin);
    /// asks first, unless --yes.
    Purge {
        /// Queue name.
        queue: String,
        /// Drop pending tasks instead of dead ones.
        #[arg(long)]
        pending: bool,
        /// Do not ask (needed when standard input is not a terminal).
        #[arg(long)]
        yes: bool,
    },
}

/// `gce-backend configs …`.
pub async fn configs(t: &Target, cmd: ConfigsCmd) -> anyhow::Result<()> {
    let mut c = match cmd {
        ConfigsCmd::Convert { file, to } => return super::convert::convert(&file, to),
        _ => client(t)?,
    };
    let v = match cmd {
        ConfigsCmd::Convert { .. } => unreachable!("handled above, before any client"),
        ConfigsCmd::List => {
            let (all, last) = pages(&mut c, "listConfigs", &[], "configs").await?;
            return show(t, &json!({"configs": all, "files": last["files"]}), render::configs);
        }
        ConfigsCmd::Get { prefix } => call(&mut c, "config", &[("prefix", &prefix)], None).await?,
        ConfigsCmd::Wait { prefix, timeout } => {
            let until = tokio::time::Instant::now() + std::time::Duration::from_secs(timeout);
            loop {
                let v = call(&mut c, "config", &[("prefix", &prefix)], None).await?;
                let (n, st) = (&v["status"]["counts"], &v["status"]);
                if n["connected"] == v["amount"] && n["draining"] == 0 && st["rollout"].is_null() {
                    break v;
                }
                if tokio::time::Instant::now() >= until {
                    return Err(anyhow::anyhow!(
                        "{prefix}: not settled after {timeout}s: {} of {} VMs connected, {} draining{}",
                        n["connected"],
                        v["amount"],
                        n["draining"],
                        if st["rollout"].is_null() { "" } else { ", a rolling update under way" }
                    ));
                }
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
        }
        ConfigsCmd::Apply { file } => {
            let body = config_file(&file)?;
            let prefix = body["prefix"].as_str().unwrap_or_default().to_owned();
            // What it will cost, asked before it is applied (a plan that cannot be made says
            // nothing here: the apply says why).
            let input = json!({"config": body.clone()});
            let plan = call(&mut c, "planConfig", &[("prefix", &prefix)], Some(input)).await.ok();
            let v = match call(&mut c, "updateConfig", &[("prefix", &prefix)], Some(body.clone())).await {
                Err(e) if e.downcast_ref::<CallError>().and_then(CallError::status) == Some(404) => {
                    call(&mut c, "createConfig", &[("prefix", &prefix)], Some(body)).await?
                }
                other => other?,
            };
            if let Some(p) = plan.filter(|_| !t.json) {
                show(t, &v, render::config)?;
                let cost = render::plan_cost(&p["cost"], &p["amount"]);
                if !cost.is_empty() {
                    out::line(cost.trim_end());
                }
                return Ok(());
            }
            v
        }
        ConfigsCmd::Delete { prefix } => call(&mut c, "deleteConfig", &[("prefix", &prefix)], None).await?,
        ConfigsCmd::Amount { prefix, amount } => {
            let v =
                call(&mut c, "updateAmount", &[("prefix", &prefix)], Some(json!({"amount": amount}))).await?;
            if !t.json && v["amount"] != json!(amount) {
                out::line(&clamped(amount, &v["config"]["amount"], &v["amount"]));
            }
            v
        }
        ConfigsCmd::Pause { prefix, all, reason } => match (prefix, all) {
            (None, true) => {
                let v = call(&mut c, "pauseAll", &[], Some(json!({"reason": reason}))).await?;
                return every_config_after(t, &mut c, v).await;
            }
            (Some(p), false) => {
                call(&mut c, "pauseConfig", &[("prefix", &p)], Some(json!({"reason": reason}))).await?
            }
            _ => return Err(usage("pause takes a prefix or --all")),
        },
        ConfigsCmd::Resume { prefix, all } => match (prefix, all) {
            (None, true) => {
                let v = call(&mut c, "resumeAll", &[], None).await?;
                return every_config_after(t, &mut c, v).await;
            }
            (Some(p), false) => call(&mut c, "resumeConfig", &[("prefix", &p)], None).await?,
            _ => return Err(usage("resume takes a prefix or --all")),
        },
        ConfigsCmd::History { prefix, global } => {
            let all = match (prefix, global) {
                (None, true) => every_page(&mut c, "history", &[], "entries").await?,
                (Some(p), false) => every_page(&mut c, "configHistory", &[("prefix", &p)], "entries").await?,
                _ => return Err(usage("history takes a prefix or --global")),
            };
            return show(t, &json!({"entries": all}), render::history);
        }
        ConfigsCmd::Plan { file, prefix, amount } => {
            let (prefix, input) = match (file, prefix, amount) {
                (Some(f), None, None) => {
                    let body = config_file(&f)?;
                    (body["prefix"].as_str().unwrap_or_default().to_owned(), json!({"config": body}))
                }
                (None, Some(p), Some(n)) => (p, json!({"amount": n})),
                _ => return Err(usage("plan takes -f FILE, or PREFIX --amount N")),
            };
            let v = call(&mut c, "planConfig", &[("prefix", &prefix)], Some(input)).await?;
            show(t, &v, render::plan)?;
            if let Some(n) = amount.filter(|n| !t.json && v["amount"] != json!(n)) {
                let config = call(&mut c, "config", &[("prefix", &prefix)], None).await?;
                out::line(&clamped(n, &config["config"]["amount"], &v["amount"]));
            }
            // A plan that could not be applied fails, as applying it would.
            return match v["problems"].as_array().map_or(0, Vec::len) {
                0 => Ok(()),
                n => Err(anyhow::anyhow!(
                    "{prefix}: applying this would be refused ({n} problem{}: see above)",
                    if n == 1 { "" } else { "s" }
                )),
            };
        }
    };
    show(t, &v, render::config)
}

/// Why an amount asked for is not the one a Config takes: its bounds (`bounds`, its `amount`).
fn clamped(asked: u32, bounds: &Value, made: &Value) -> String {
    format!(
        "asked {asked}; the Config's bounds (min {}, max {}, or an open window) make it {made}",
        bounds["min"], bounds["max"]
    )
}

/// After a global pause or resume (`v`, the API's answer): with `--json` that answer, else what
/// it did to each Config the caller may read (held or not, and by which pause).
async fn every_config_after(t: &Target, c: &mut Client, v: Value) -> anyhow::Result<()> {
    if t.json {
        out::json(&v);
        return Ok(());
    }
    let configs = every_page(c, "listConfigs", &[], "configs").await?;
    show(t, &json!({"pause": v["paused"], "configs": configs}), render::global_pause)
}

/// `gce-backend vms …`.
pub async fn vms(t: &Target, cmd: VmsCmd) -> anyhow::Result<()> {
    let mut c = client(t)?;
    match cmd {
        VmsCmd::List { prefix, state } => {
            let mut a = vec![("prefix", prefix.as_str())];
            if let Some(s) = &state {
                a.push(("state", s));
            }
            let (all, last) = pages(&mut c, "listVms", &a, "vms").await?;
            show(t, &json!({"vms": all, "letGo": last["letGo"]}), render::vms)
        }
        VmsCmd::Get { id } => show(t, &call(&mut c, "vm", &[("id", &id)], None).await?, render::vm),
        VmsCmd::Recycle { id } => {
            show(t, &call(&mut c, "recycleVm", &[("id", &id)], None).await?, render::vm)
        }
    }
}

/// `gce-backend queues …`.
pub async fn queues(t: &Target, cmd: QueuesCmd) -> anyhow::Result<()> {
    let mut c = client(t)?;
    let v = match cmd {
        QueuesCmd::List => return show(t, &call(&mut c, "listQueues", &[], None).await?, render::queues),
        QueuesCmd::Counts { queue } => {
            let counts = queue_counts(&mut c, &queue).await?;
            return show(t, &counts, |v| {
                let Some(m) = v.as_object() else { return String::new() };
                m.iter().map(|(k, n)| format!("{k}={n}")).collect::<Vec<_>>().join(" ")
            });
        }
        QueuesCmd::Pending { queue, limit } => {
            let limit = limit.clamp(1, Page::LIMIT_MAX).to_string();
            let v = call(&mut c, "pendingTasks", &[("queue", &queue), ("limit", &limit)], None).await?;
            return show(t, &v, render::tasks);
        }
        QueuesCmd::Task { queue, id } => {
            return show(
                t,
                &call(&mut c, "task", &[("queue", &queue), ("taskId", &id)], None).await?,
                render::task,
            );
        }
        QueuesCmd::Dead { queue } => {
            let limit = Page::LIMIT_MAX.to_string();
            return show(
                t,
                &call(&mut c, "deadTasks", &[("queue", &queue), ("limit", &limit)], None).await?,
                render::tasks,
            );
        }
        QueuesCmd::Retry { queue, task: Some(id), all: false } => {
            call(&mut c, "retryTask", &[("queue", &queue), ("taskId", &id)], None).await?
        }
        QueuesCmd::Retry { queue, task: None, all: true } => {
            // Whose the tasks were is for the table only (read before they are put back).
            let listed = if t.json { Vec::new() } else { first_page(&mut c, "deadTasks", &queue).await? };
            let v = call(&mut c, "retryDead", &[("queue", &queue)], None).await?;
            return show(t, &v, |v| {
                render::affected(v, &listed, &format!("dead task(s) of {queue} put back"))
            });
        }
        QueuesCmd::Retry { .. } => return Err(usage("retry takes a task id or --all")),
        QueuesCmd::Purge { queue, pending, yes } => {
            let (list, m, what, counted) = if pending {
                (
                    "pendingTasks",
                    "purgePending",
                    "pending (due and delayed)",
                    ["pending", "delayed"].as_slice(),
                )
            } else {
                ("deadTasks", "purgeDead", "dead", ["dead"].as_slice())
            };
            let counts = queue_counts(&mut c, &queue).await?;
            let n: u64 = counted.iter().filter_map(|k| counts[*k].as_u64()).sum();
            if n == 0 {
                out::line(&format!("queue {queue} has no {what} task: nothing to drop"));
                return Ok(());
            }
            let listed = first_page(&mut c, list, &queue).await?;
            let ask = format!("drop {n} {what} task(s) of queue {queue} ({})?", render::by_config(&listed));
            confirm(&ask, yes)?;
            let v = call(&mut c, m, &[("queue", &queue)], None).await?;
            return show(t, &v, |v| {
                render::affected(v, &listed, &format!("{what} task(s) of {queue} dropped"))
            });
        }
    };
    show(t, &v, |v| format!("{} task(s)", v["count"]))
}

/// `gce-backend status [PREFIX…] [--live]`: the API's `status`, as JSON.
pub async fn status(t: &Target, prefixes: &[String], live: bool) -> anyhow::Result<()> {
    let mut c = client(t)?;
    let joined = prefixes.join(",");
    let mut a = Vec::new();
    if !prefixes.is_empty() {
        a.push(("prefixes", joined.as_str()));
    }
    if live {
        a.push(("live", "true"));
    }
    out::json(&call(&mut c, "status", &a, None).await?);
    Ok(())
}

/// `gce-backend api METHOD [k=v…] [--input FILE]`: any method of the reference.
pub async fn api(
    t: &Target,
    method: &str,
    pairs: &[String],
    input: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let mut c = client(t)?;
    let mut a = BTreeMap::new();
    for p in pairs {
        let (k, v) = p.split_once('=').ok_or_else(|| usage(format!("{p:?}: arguments are NAME=VALUE")))?;
        a.insert(k.to_owned(), v.to_owned());
    }
    let body = match input {
        None => None,
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| usage(format!("--input {}: {e}", path.display())))?;
            let v: Value =
                json_input(&text).map_err(|e| usage(format!("--input {}: {e}", path.display())))?;
            Some(v)
        }
    };
    let v = c.call(method, &a, body.as_ref()).await.map_err(fail)?;
    out::json(&v);
    Ok(())
}
