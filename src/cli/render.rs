//! Human tables of the API's answers (the CLI's default; `--json` prints the answer itself).

mod cells;
mod files;
mod plan;
mod task;

use serde_json::Value;

use crate::api::types::Page;
use cells::{resolved, s, secs, short, table, when};
pub(super) use plan::{cost as plan_cost, plan};
pub(super) use task::task;

/// The pause in force (the API decides which: `pause_in_force`), whose and why.
fn paused(st: &Value) -> String {
    let p = &st["pause_in_force"];
    if p.is_null() {
        return "-".into();
    }
    let which = if st["paused"].is_null() { "all" } else { "yes" };
    match p["reason"].as_str().filter(|r| !r.is_empty()) {
        Some(why) => format!("{which} ({}: {})", s(&p["by"]), short(why, 40)),
        None => format!("{which} ({})", s(&p["by"])),
    }
}

/// The newest error not yet resolved, readable: `<stage>: <code> <message>` (a bare `503` says
/// nothing on its own).
fn last_error(st: &Value) -> String {
    let open = st["errors"].as_array().into_iter().flatten().find(|e| e["resolved"].is_null());
    open.map_or("-".into(), |e| {
        short(&format!("{}: {} {}", s(&e["stage"]), s(&e["code"]), s(&e["message"])), 60)
    })
}

/// `configs history`: newest first; a revision is shown by its first 8 characters.
pub(super) fn history(v: &Value) -> String {
    let rev = |r: &Value| match r.as_str() {
        Some(r) if !r.is_empty() => r.chars().take(8).collect(),
        _ => "-".into(),
    };
    let rows = v["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            vec![
                when(&e["at"]),
                s(&e["actor"]),
                s(&e["action"]),
                s(&e["prefix"]),
                rev(&e["before_revision"]),
                rev(&e["after_revision"]),
                s(&e["detail"]),
            ]
        })
        .collect();
    table(&["AT", "ACTOR", "ACTION", "PREFIX", "BEFORE", "AFTER", "DETAIL"], rows)
}

/// A Spot pool's failover line (status `spot`, as the API decided it).
fn spot(sp: &Value) -> String {
    let f = &sp["failover"];
    let so_far = format!("{} failovers so far", s(&sp["failovers_total"]));
    match f.is_null() {
        false => format!(
            "  Spot failover: standard VMs until {} ({} preemptions, {} refusals in {}); {so_far}\n",
            when(&f["until"]),
            s(&f["preempted"]),
            s(&f["refused"]),
            secs(&sp["within"])
        ),
        true => format!(
            "  Spot: {} preemptions, {} refusals in the last {} (more than {} make standard VMs for {}); {so_far}\n",
            s(&sp["preempted"]),
            s(&sp["refused"]),
            secs(&sp["within"]),
            s(&sp["more_than"]),
            secs(&sp["cooldown"])
        ),
    }
}

/// `configs list`.
pub(super) fn configs(v: &Value) -> String {
    let rows = v["configs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            let (st, c) = (&e["status"], &e["status"]["counts"]);
            vec![
                s(&e["config"]["prefix"]),
                s(&st["source"]),
                files::state(e),
                s(&e["amount"]),
                s(&c["created"]),
                s(&c["connected"]),
                s(&c["draining"]),
                s(&st["task_failures"]),
                s(&st["dead_tasks"]),
                paused(st),
                last_error(st),
            ]
        })
        .collect();
    table(
        &[
            "PREFIX",
            "SOURCE",
            "STATE",
            "AMOUNT",
            "CREATED",
            "CONNECTED",
            "DRAINING",
            "FAILURES (EVER)",
            "DEAD (EVER)",
            "PAUSED",
            "LAST ERROR",
        ],
        rows,
    ) + &files::section(&v["files"])
}

/// One Config.
pub(super) fn config(v: &Value) -> String {
    let (c, st) = (&v["config"], &v["status"]);
    let n = &st["counts"];
    let mut out = format!(
        "{}  {} (source {}, revision {})\n  amount {}  created {}  connected {}  draining {}  bots dead {}  unhealthy {}\n  task failures (ever) {}  dead tasks (ever) {}\n  paused {}\n",
        s(&c["prefix"]),
        s(&st["state"]),
        s(&st["source"]),
        s(&st["revision"]),
        s(&v["amount"]),
        s(&n["created"]),
        s(&n["connected"]),
        s(&n["draining"]),
        s(&n["dead"]),
        s(&n["unhealthy"]),
        s(&st["task_failures"]),
        s(&st["dead_tasks"]),
        paused(st),
    );
    let a = &c["attributes"];
    out.push_str(&format!(
        "  project {}  zone {}  machine type {}\n",
        s(&a["project"]),
        s(&a["zone"]),
        s(&a["machine_type"])
    ));
    out.push_str(&files::lines(v));
    if !st["delete_at"].is_null() {
        // A deletion to come (the grace of a removed file), not one done.
        out.push_str(&format!("  deletes at {}\n", when(&st["delete_at"])));
    }
    let b = &st["breaker"];
    if !b.is_null() {
        out.push_str(&format!(
            "  breaker open since {}: {} (canaries failed {}, next {})\n",
            when(&b["since"]),
            s(&b["reason"]),
            s(&b["canaries"]),
            when(&b["next_canary"])
        ));
    }
    let r = &st["rollout"];
    if !r.is_null() {
        out.push_str(&format!(
            "  rolling update since {}: {} updated, {} outdated\n",
            when(&r["since"]),
            s(&r["updated"]),
            s(&r["outdated"])
        ));
    }
    if !c["warm"].is_null() {
        out.push_str(&format!(
            "  warm pool: {} kept warm (up to {} suspended, {} stopped)\n",
            s(&n["parked"]),
            s(&c["warm"]["suspended"]),
            s(&c["warm"]["stopped"])
        ));
    }
    let sp = &st["spot"];
    if !sp.is_null() {
        out.push_str(&spot(sp));
    }
    let d = &st["demand"];
    if !d.is_null() {
        out.push_str(&format!(
            "  demand: pending {}  busy {}  idle {}  target {} ({}), read {}\n",
            s(&d["pending"]),
            s(&d["busy"]),
            s(&d["idle"]),
            s(&d["target"]),
            s(&d["why"]),
            when(&d["at"])
        ));
    }
    for z in st["zones"].as_array().into_iter().flatten() {
        let backoff = if z["backoff"].is_null() {
            "-".to_owned()
        } else {
            format!("until {}", when(&z["backoff"]["until"]))
        };
        out.push_str(&format!(
            "  zone {} weight {}  vms {}  connected {}  draining {}  backoff {}\n",
            s(&z["zone"]),
            s(&z["weight"]),
            s(&z["vms"]),
            s(&z["connected"]),
            s(&z["draining"]),
            backoff
        ));
    }
    for r in st["ranks"].as_array().into_iter().flatten() {
        let backoffs: Vec<String> = r["backoffs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|b| format!("{} until {}", s(&b["zone"]), when(&b["until"])))
            .collect();
        out.push_str(&format!(
            "  rank {} {}  vms {}  connected {}  placed {}  backoff {}\n",
            s(&r["rank"]),
            s(&r["machine_type"]),
            s(&r["vms"]),
            s(&r["connected"]),
            s(&r["placed"]),
            if backoffs.is_empty() { "-".to_owned() } else { backoffs.join(", ") }
        ));
    }
    for e in st["errors"].as_array().into_iter().flatten().take(5) {
        out.push_str(&format!(
            "  error {} {} ({}{}): {}\n",
            when(&e["time"]),
            s(&e["code"]),
            s(&e["stage"]),
            resolved(e),
            s(&e["message"])
        ));
    }
    out
}

/// `vms list`.
pub(super) fn vms(v: &Value) -> String {
    let rows = v["vms"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            vec![
                s(&e["vm"]["id"]),
                s(&e["vm"]["hostname"]),
                s(&e["state"]),
                s(&e["vm"]["attributes"]["zone"]),
                machine(&e["vm"]),
                when(&e["deadline"]),
            ]
        })
        .collect();
    let mut out = table(&["ID", "HOSTNAME", "STATE", "ZONE", "MACHINE TYPE", "DEADLINE"], rows);
    let gaps: Vec<String> = v["letGo"].as_array().into_iter().flatten().map(s).collect();
    if !gaps.is_empty() {
        out.push_str(&format!(
            "let go (no VM by choice: the pool shrank and kept its busy VMs; taken first when it grows): {}\n",
            gaps.join(" ")
        ));
    }
    out
}

/// A VM's machine type by name, and its rank when it has one (`n2d-standard-2 (rank 1)`).
fn machine(vm: &Value) -> String {
    let t = s(&vm["attributes"]["machine_type"]);
    let name = t.rsplit('/').next().unwrap_or_default().to_owned();
    match vm["rank"].as_u64() {
        Some(r) => format!("{name} (rank {r})"),
        None => name,
    }
}

/// One VM.
pub(super) fn vm(v: &Value) -> String {
    let e = &v["vm"];
    let mut out = format!(
        "{}  {}  {}\n  zone {}  machine type {}  instance {} ({})\n  deadline {}  drained {}\n",
        s(&e["vm"]["id"]),
        s(&e["vm"]["hostname"]),
        s(&e["state"]),
        s(&e["vm"]["attributes"]["zone"]),
        machine(&e["vm"]),
        s(&e["vm"]["instance"]["url"]),
        s(&v["instance_status"]),
        when(&e["deadline"]),
        s(&e["vm"]["drained"]),
    );
    for t in v["tasks"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  task {} {} {} (attempts {})\n",
            s(&t["queue"]),
            s(&t["task_id"]),
            s(&t["state"]),
            s(&t["attempts"])
        ));
    }
    out
}

/// `queues list`.
pub(super) fn queues(v: &Value) -> String {
    let rows = v["queues"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|q| {
            let c = &q["counts"];
            vec![
                s(&q["name"]),
                s(&c["pending"]),
                s(&c["delayed"]),
                s(&c["running"]),
                s(&c["dead"]),
                s(&c["done"]),
                s(&c["retried"]),
                s(&c["failed"]),
                s(&c["expired"]),
            ]
        })
        .collect();
    table(
        // The first four now; the rest counted since the queue began, labelled so.
        &[
            "QUEUE",
            "PENDING",
            "DELAYED",
            "RUNNING",
            "DEAD",
            "DONE (EVER)",
            "RETRIED (EVER)",
            "FAILED (EVER)",
            "LEASES LOST (EVER)",
        ],
        rows,
    )
}

/// Tasks.
pub(super) fn tasks(v: &Value) -> String {
    let rows = v["tasks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            vec![
                s(&t["task_id"]),
                s(&t["key"]),
                s(&t["state"]),
                s(&t["reason"]),
                s(&t["attempts"]),
                s(&t["last_error"]),
            ]
        })
        .collect();
    table(&["TASK", "KEY", "STATE", "REASON", "ATTEMPTS", "LAST ERROR"], rows)
}

/// How many of `tasks` each Config has (`linux 3, builder 1, no Config 2`), most first; of the
/// first [`Page::LIMIT_MAX`] (the CLI's page) when there may be more.
pub(super) fn by_config(tasks: &[Value]) -> String {
    let mut n: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    for t in tasks {
        *n.entry(t["config"].as_str().unwrap_or("no Config").to_owned()).or_default() += 1;
    }
    let mut v: Vec<(String, usize)> = n.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let listed: Vec<String> = v.iter().map(|(c, k)| format!("{c} {k}")).collect();
    let of = if tasks.len() >= Page::LIMIT_MAX {
        format!("of the first {}: ", Page::LIMIT_MAX)
    } else {
        String::new()
    };
    format!("{of}{}", listed.join(", "))
}

/// What a bulk queue operation did (`v`: `{count}`), with whose the tasks `listed` before it
/// were: `<count> <did> (<by Config>)`.
pub(super) fn affected(v: &Value, listed: &[Value], did: &str) -> String {
    if listed.is_empty() {
        return format!("{} {did}", s(&v["count"]));
    }
    format!("{} {did} ({})", s(&v["count"]), by_config(listed))
}

/// A global pause or its lifting, and each Config after it: `{pause, configs}`.
pub(super) fn global_pause(v: &Value) -> String {
    let p = &v["pause"];
    let mut out = if p.is_null() {
        "global pause lifted: Configs without a pause of their own create again\n".to_owned()
    } else {
        format!("every Config paused by {} at {}: {}\n", s(&p["by"]), when(&p["at"]), s(&p["reason"]))
    };
    let rows: Vec<Vec<String>> = v["configs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| vec![s(&e["config"]["prefix"]), paused(&e["status"])])
        .collect();
    if !rows.is_empty() {
        out.push_str(&table(&["PREFIX", "PAUSED"], rows));
    }
    out
}

#[cfg(test)]
mod tests;
