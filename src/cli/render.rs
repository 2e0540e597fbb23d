//! Human tables of the API's answers (the CLI's default; `--json` prints the answer itself).

use serde_json::Value;

/// Aligned columns under a header.
fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let mut s = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}  "));
            }
        }
        s.trim_end().to_owned() + "\n"
    };
    let mut out = line(header.iter().map(|h| (*h).to_owned()).collect());
    for r in rows {
        out.push_str(&line(r));
    }
    out
}

fn s(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) if s.is_empty() => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The pause in force (the API decides which: `pause_in_force`), and whose.
fn paused(st: &Value) -> String {
    let p = &st["pause_in_force"];
    if p.is_null() {
        "-".into()
    } else if st["paused"].is_null() {
        "all".into()
    } else {
        format!("yes ({})", s(&p["by"]))
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
                s(&st["state"]),
                s(&e["amount"]),
                s(&c["created"]),
                s(&c["connected"]),
                s(&c["draining"]),
                paused(st),
                st["errors"].as_array().and_then(|e| e.first()).map_or("-".into(), |e| s(&e["code"])),
            ]
        })
        .collect();
    table(
        &["PREFIX", "SOURCE", "STATE", "AMOUNT", "CREATED", "CONNECTED", "DRAINING", "PAUSED", "LAST ERROR"],
        rows,
    )
}

/// One Config.
pub(super) fn config(v: &Value) -> String {
    let (c, st) = (&v["config"], &v["status"]);
    let n = &st["counts"];
    let mut out = format!(
        "{}  {} (source {}, revision {})\n  amount {}  created {}  connected {}  draining {}  dead {}  unhealthy {}\n  paused {}\n",
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
        paused(st),
    );
    if !st["delete_at"].is_null() {
        out.push_str(&format!("  deleted at {}\n", s(&st["delete_at"])));
    }
    let b = &st["breaker"];
    if !b.is_null() {
        out.push_str(&format!(
            "  breaker open since {}: {} (canaries failed {}, next {})\n",
            s(&b["since"]),
            s(&b["reason"]),
            s(&b["canaries"]),
            s(&b["next_canary"])
        ));
    }
    let r = &st["rollout"];
    if !r.is_null() {
        out.push_str(&format!(
            "  rolling update since {}: {} updated, {} outdated\n",
            s(&r["since"]),
            s(&r["updated"]),
            s(&r["outdated"])
        ));
    }
    for z in st["zones"].as_array().into_iter().flatten() {
        let backoff = if z["backoff"].is_null() {
            "-".to_owned()
        } else {
            format!("until {}", s(&z["backoff"]["until"]))
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
    for e in st["errors"].as_array().into_iter().flatten().take(5) {
        out.push_str(&format!(
            "  error {} {} ({}): {}\n",
            s(&e["time"]),
            s(&e["code"]),
            s(&e["stage"]),
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
                s(&e["deadline"]),
            ]
        })
        .collect();
    table(&["ID", "HOSTNAME", "STATE", "ZONE", "DEADLINE"], rows)
}

/// One VM.
pub(super) fn vm(v: &Value) -> String {
    let e = &v["vm"];
    let mut out = format!(
        "{}  {}  {}\n  zone {}  instance {} ({})\n  deadline {}  drained {}\n",
        s(&e["vm"]["id"]),
        s(&e["vm"]["hostname"]),
        s(&e["state"]),
        s(&e["vm"]["attributes"]["zone"]),
        s(&e["vm"]["instance"]["url"]),
        s(&v["instance_status"]),
        s(&e["deadline"]),
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
            ]
        })
        .collect();
    table(&["QUEUE", "PENDING", "DELAYED", "RUNNING", "DEAD", "DONE"], rows)
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

/// A plan: the totals, then what happens to each VM (what is replaced in the waves it takes),
/// the changed fields and whom each affects, the problems and the pause in force.
pub(super) fn plan(v: &Value) -> String {
    let list = |k: &str| -> Vec<String> { v[k].as_array().into_iter().flatten().map(s).collect() };
    let (create, drain, replace, keep) = (list("create"), list("drain"), list("replace"), list("keep"));
    let recycle: Vec<String> = v["recycle"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| match r["at"].as_str() {
            Some(at) => format!("{} (at {at})", s(&r["id"])),
            None => format!("{} (its lifetime has not started)", s(&r["id"])),
        })
        .collect();
    let mut out = format!(
        "{}: amount {}; create {}, drain {}, replace {}, recycle {}, keep {}\n",
        s(&v["prefix"]),
        s(&v["amount"]),
        create.len(),
        drain.len(),
        replace.len(),
        recycle.len(),
        keep.len()
    );
    let mut line = |what: String, ids: &[String]| {
        if !ids.is_empty() {
            out.push_str(&format!("  {what}: {}\n", ids.join(", ")));
        }
    };
    line(format!("create {}", create.len()), &create);
    line(format!("drain {} (each after its task)", drain.len()), &drain);
    if !replace.is_empty() {
        line(format!("replace {} {}", replace.len(), replacement(&v["replacement"])), &replace);
    }
    line(
        format!(
            "recycle {} (each kept until its lifetime ends, then made again with the Config's settings)",
            recycle.len()
        ),
        &recycle,
    );
    line(format!("keep {}", keep.len()), &keep);
    for c in v["changes"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  {}: {} -> {} (applies to {})\n",
            s(&c["field"]),
            c["from"],
            c["to"],
            s(&c["applies_to"])
        ));
    }
    for p in v["problems"].as_array().into_iter().flatten() {
        out.push_str(&format!("  problem: {}\n", s(p)));
    }
    if !v["paused"].is_null() {
        let p = &v["paused"];
        out.push_str(&format!(
            "  paused by {} ({}): nothing is created until it is resumed\n",
            s(&p["by"]),
            s(&p["reason"])
        ));
    }
    out
}

/// How a plan's replacement proceeds, in words: why, how many at a time, its surge.
fn replacement(r: &Value) -> String {
    let at_once = s(&r["at_once"]);
    let surge: Vec<String> = r["surge"].as_array().into_iter().flatten().map(s).collect();
    match r["by"].as_str() {
        Some("rolling_update") => {
            let first = match surge.is_empty() {
                true => String::new(),
                false => format!(
                    "{} made first from the new attributes and drained at the end; ",
                    surge.join(", ")
                ),
            };
            format!(
                "(rolling update: {first}at most {at_once} at a time, keeping at least {} bots connected; each drained after its task, then made again)",
                s(&r["min_connected"])
            )
        }
        Some("provider_change") => {
            format!(
                "(provider change: at most {at_once} at a time, each drained after its task, then made by the new provider)"
            )
        }
        _ => "(already drained: each made again once it is gone)".to_owned(),
    }
}

#[cfg(test)]
mod tests;
