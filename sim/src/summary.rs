//! What `/sim/summary` answers: the world's counts (instances, bots, operations), calls, faults,
//! the instance seconds billed and operations made, overall and per Config, and the task totals.
//! Copied out of the world under its lock in O(zones + methods + Configs), encoded after.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::quota::Group;
use crate::swarming::ts;
use crate::world::{
    ApiCalls, Billing, BotState, ConfigUsage, Counts, InstanceCounts, OpStatus, Status, World,
};

/// What `/sim/summary` answers: counts only, copied in O(zones + methods) under the lock.
#[derive(Debug, Clone)]
pub struct Summary {
    now: DateTime<Utc>,
    counts: Counts,
    calls: BTreeMap<String, u64>,
    faults: Vec<String>,
    scheduled: usize,
    billing: Billing,
    made: BTreeMap<&'static str, u64>,
    by_config: BTreeMap<String, ConfigUsage>,
    tasks: [u64; 5],
    api: ApiCalls,
    quota: String,
}

impl Summary {
    /// The summary of `w`.
    pub fn of(w: &World) -> Self {
        Self {
            now: w.now_utc(),
            counts: w.counts().clone(),
            calls: w.calls.iter().map(|(m, by)| (m.clone(), by.values().sum())).collect(),
            faults: w.faults.active(),
            scheduled: w.scheduled(),
            billing: w.billing(),
            made: w.operations_made().clone(),
            by_config: w.usage_by_config().clone(),
            tasks: w.task_totals(),
            api: w.api_calls().clone(),
            quota: w.cfg.quota.source.clone(),
        }
    }

    /// `{"now", "instances": {"total", "PROVISIONING", ..., "TERMINATED", "deleting"}, "zones":
    /// {zone: {same}}, "bots": {"total", "alive", "terminating", "dead", "terminated",
    /// "deleted"}, "operations": {"total", "PENDING", "RUNNING", "DONE", "failed"}, "calls":
    /// {method: n}, "callsTotal", "faults": [name], "scheduled", "usage": {"runningSeconds",
    /// "suspendedSeconds", "stoppedSeconds"}, "actions": {"insert", "delete", "suspend", "resume",
    /// "stop", "start", "bulkInsert"}, "tasks": {"total", "PENDING", ..., "BOT_DIED", "CANCELED",
    /// "interrupted"}, "usageByConfig": {prefix: {"runningSeconds", "suspendedSeconds",
    /// "stoppedSeconds", "insert", "delete", "suspend", "resume", "stop", "start", "running",
    /// "suspended", "stopped"}}}` (the last three: its instances now, by the same classes). Usage sums every instance's seconds so far: billed as running
    /// (PROVISIONING, STAGING, RUNNING, STOPPING, SUSPENDING), SUSPENDED, and stopped
    /// (TERMINATED); actions count the operations made (not replays); interrupted = BOT_DIED.
    /// `usageByConfig` is the same per Config (the instance name's prefix: `ci-3-ab12` → `ci`).
    /// `actions` and each Config's also count `bulkInsert` operations (each instance a bulk
    /// made also counts as an `insert`). `"quota"` names the rate quotas in force (`none`,
    /// `gce-default`, a file); `"apiRequests": {"total", "byProject": {project: {"mutations",
    /// "reads", "lists", "operations"}}}` counts every Compute Engine call by quota group, taken
    /// or refused; `"rateLimited": {"total", "byMethod": {method: n}}` the calls refused by a rate
    /// quota (403 `rateLimitExceeded`).
    pub fn json(&self) -> Value {
        fn instances(c: &InstanceCounts) -> Value {
            let mut v = json!({"total": c.total, "deleting": c.deleting});
            for s in [
                Status::Provisioning,
                Status::Staging,
                Status::Running,
                Status::Stopping,
                Status::Terminated,
                Status::Suspending,
                Status::Suspended,
            ] {
                v[s.name()] = json!(c.by_status[s as usize]);
            }
            v
        }
        let c = &self.counts;
        let mut bots = json!({"total": c.bots.iter().sum::<u64>()});
        for s in BotState::ALL {
            bots[s.name()] = json!(c.bots[s as usize]);
        }
        let mut ops = json!({"total": c.operations.iter().sum::<u64>(), "failed": c.failed_operations});
        for s in [OpStatus::Pending, OpStatus::Running, OpStatus::Done] {
            ops[s.name()] = json!(c.operations[s as usize]);
        }
        let zones: serde_json::Map<String, Value> =
            c.zones.iter().map(|(z, n)| (z.clone(), instances(n))).collect();
        json!({"now": ts(self.now), "instances": instances(&c.instances), "zones": zones, "bots": bots,
               "operations": ops, "calls": self.calls, "callsTotal": self.calls.values().sum::<u64>(),
               "faults": self.faults, "scheduled": self.scheduled, "usage": self.usage(), "actions": actions(&self.made),
               "tasks": self.task_json(), "usageByConfig": self.by_config(), "quota": self.quota,
               "apiRequests": self.api_requests(), "rateLimited": self.rate_limited()})
    }

    fn api_requests(&self) -> Value {
        let by_project: serde_json::Map<String, Value> = self
            .api
            .requests
            .iter()
            .map(|(p, n)| {
                (p.clone(), Group::ALL.iter().map(|g| (g.name().to_owned(), json!(n[*g as usize]))).collect())
            })
            .collect();
        let total: u64 = self.api.requests.values().flatten().sum();
        json!({"total": total, "byProject": by_project})
    }

    fn rate_limited(&self) -> Value {
        json!({"total": self.api.rate_limited.values().sum::<u64>(), "byMethod": self.api.rate_limited})
    }

    fn usage(&self) -> Value {
        usage(&self.billing)
    }

    fn by_config(&self) -> Value {
        let one = |p: &str, c: &ConfigUsage| {
            let mut v = usage(&c.billing);
            // Its instances now: billed as running, suspended, stopped (as the seconds are).
            let n = self.counts.configs.get(p).copied().unwrap_or_default();
            let of = |s: &[Status]| s.iter().map(|s| n[*s as usize]).sum::<u64>();
            v["running"] = json!(of(&[
                Status::Provisioning,
                Status::Staging,
                Status::Running,
                Status::Stopping,
                Status::Suspending
            ]));
            v["suspended"] = json!(of(&[Status::Suspended]));
            v["stopped"] = json!(of(&[Status::Terminated]));
            for (k, n) in actions(&c.actions).as_object().into_iter().flatten() {
                v[k] = n.clone();
            }
            v
        };
        self.by_config.iter().map(|(p, c)| (p.clone(), one(p, c))).collect()
    }

    fn task_json(&self) -> Value {
        let mut v = crate::work::totals(self.tasks);
        v["interrupted"] = v["BOT_DIED"].clone();
        v
    }
}

fn usage(b: &Billing) -> Value {
    json!({"runningSeconds": b.running_s, "suspendedSeconds": b.suspended_s, "stoppedSeconds": b.stopped_s})
}

fn actions(made: &BTreeMap<&'static str, u64>) -> Value {
    let kinds = ["insert", "delete", "suspend", "resume", "stop", "start", "bulkInsert"];
    kinds.iter().map(|k| (k.to_string(), json!(made.get(k).copied().unwrap_or(0)))).collect()
}
