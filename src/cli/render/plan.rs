//! A plan as `configs plan` prints it: the totals, each VM's fate (the waves a replacement takes),
//! the changed fields and whom each affects, the problems and the pause in force.

use serde_json::Value;

use super::cells::s;

/// A plan: the totals, then what happens to each VM (what is replaced in the waves it takes),
/// the changed fields and whom each affects, the problems and the pause in force.
pub(crate) fn plan(v: &Value) -> String {
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
    out.push_str(&cost(&v["cost"], &v["amount"]));
    out
}

/// A plan's cost, in words: what the Config costs now and would at its amount, and whether its
/// tenant's budget lets its new VMs be made now (`apply` prints it too).
pub(crate) fn cost(c: &Value, amount: &Value) -> String {
    if c.is_null() {
        return String::new();
    }
    let usd = |v: &Value| gce_backend_jobs::config::Usd(v.as_f64().unwrap_or(0.0)).to_string();
    let mut out = match c["unpriced"].as_str() {
        Some(why) => format!("  cost: {}/h now; unpriced ({why})\n", usd(&c["now_per_hour"])),
        None => format!(
            "  cost: {}/h now; {}/h at amount {amount} running ({}/h a VM)\n",
            usd(&c["now_per_hour"]),
            usd(&c["planned_per_hour"]),
            usd(&c["per_vm"])
        ),
    };
    let b = &c["budget"];
    match b["holds"].as_bool() {
        Some(true) => out.push_str(&format!("  budget: holds it ({})\n", s(&b["said"]))),
        Some(false) => out.push_str(&format!(
            "  budget: held: {} of the new VMs may be made now, the rest when the tenant's cost leaves room ({})\n",
            s(&b["room"]),
            s(&b["said"])
        )),
        None => {}
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
