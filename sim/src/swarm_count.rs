//! The counts of Swarming v2 pRPC: `Tasks/CountTasks` (`TasksCountRequest` → `TasksCount`) and
//! `Bots/CountBots` (`BotsCountRequest` → `BotsCount`), and the dimension filters `ListBots`
//! shares. Zero values are omitted from the answers, as protojson does.

use axum::body::Bytes;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::dims::Filter;
use crate::handle::Sim;
use crate::prpc::{Status, parse, time, ts};
use crate::world::TaskState;

/// A `StringPair` (`{key, value}`) of a dimension filter; the value may hold `a|b`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct StringPair {
    key: String,
    value: String,
}

/// The filter of `dimensions` pairs, or INVALID_ARGUMENT.
pub(crate) fn dims_filter(pairs: &[StringPair]) -> Result<Filter, Status> {
    Filter::pairs(pairs.iter().map(|p| (p.key.as_str(), p.value.as_str())))
        .map_err(|e| Status(3, format!("invalid dimensions: {e}")))
}

/// A `StateQuery`: its name or number.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum StateQuery {
    Name(String),
    Number(i32),
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct TasksCountRequest {
    start: Option<String>,
    end: Option<String>,
    state: Option<StateQuery>,
    tags: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct BotsCountRequest {
    dimensions: Vec<StringPair>,
}

/// The task states a `StateQuery` selects (`None`: all), or INVALID_ARGUMENT.
fn states(q: Option<StateQuery>) -> Result<Option<Vec<TaskState>>, Status> {
    use TaskState::*;
    let name = match q {
        None => return Ok(Some(vec![Pending])),
        Some(StateQuery::Name(n)) => n,
        Some(StateQuery::Number(n)) => match n {
            0 => "QUERY_PENDING".into(),
            1 => "QUERY_RUNNING".into(),
            2 => "QUERY_PENDING_RUNNING".into(),
            3 => "QUERY_COMPLETED".into(),
            4 => "QUERY_COMPLETED_SUCCESS".into(),
            5 => "QUERY_COMPLETED_FAILURE".into(),
            8 => "QUERY_BOT_DIED".into(),
            9 => "QUERY_CANCELED".into(),
            10 => "QUERY_ALL".into(),
            _ => format!("{n}"),
        },
    };
    Ok(Some(match name.as_str() {
        "QUERY_PENDING" => vec![Pending],
        "QUERY_RUNNING" => vec![Running],
        "QUERY_PENDING_RUNNING" => vec![Pending, Running],
        "QUERY_COMPLETED" | "QUERY_COMPLETED_SUCCESS" => vec![Completed],
        "QUERY_COMPLETED_FAILURE"
        | "QUERY_EXPIRED"
        | "QUERY_TIMED_OUT"
        | "QUERY_DEDUPED"
        | "QUERY_KILLED"
        | "QUERY_NO_RESOURCE"
        | "QUERY_CLIENT_ERROR" => vec![],
        "QUERY_BOT_DIED" => vec![BotDied],
        "QUERY_CANCELED" => vec![Canceled],
        "QUERY_ALL" => return Ok(None),
        other => return Err(Status(3, format!("invalid state: {other}"))),
    }))
}

/// `Tasks/CountTasks`: `{"count", "now"}`, `count` absent when 0.
pub(crate) fn count_tasks(sim: &Sim, body: &Bytes) -> Result<Value, Status> {
    let r: TasksCountRequest = parse(body)?;
    let start = time(&r.start, "start")?.ok_or_else(|| Status(3, "start timestamp is required".into()))?;
    let end = time(&r.end, "end")?;
    let states = states(r.state)?;
    let tags = Filter::tags(&r.tags).map_err(|e| Status(3, format!("invalid tags: {e}")))?;
    sim.with(|w| {
        let now = w.now_utc();
        let end = end.unwrap_or(now + chrono::Duration::milliseconds(1));
        if start >= end {
            return Err(Status(3, "invalid time range: start time must be before the end time".into()));
        }
        let n = w.count_tasks(start, end, states.as_deref(), &tags);
        let mut v = json!({"now": ts(now)});
        if n > 0 {
            v["count"] = json!(n);
        }
        Ok(v)
    })
}

/// `Bots/CountBots`: `{"now", "count", "busy", "dead", "quarantined", "maintenance"}`, zeros
/// absent (the simulator has no quarantined or maintenance bots).
pub(crate) fn count_bots(sim: &Sim, server: &str, body: &Bytes) -> Result<Value, Status> {
    let r: BotsCountRequest = parse(body)?;
    let filter = dims_filter(&r.dimensions)?;
    Ok(sim.with(|w| {
        let c = w.count_bots(server, &filter);
        let mut v = json!({"now": ts(w.now_utc())});
        for (k, n) in [("count", c.count), ("busy", c.busy), ("dead", c.dead)] {
            if n > 0 {
                v[k] = json!(n);
            }
        }
        v
    }))
}
