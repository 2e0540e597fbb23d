//! The admin API's work routes: tasks (`/sim/tasks`), bot groups (`/sim/bot_groups`) and traces
//! (`/sim/trace`). Bad requests get a 400 naming what is wrong, and change nothing.

use std::collections::HashMap;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::config::BotGroups;
use crate::dims;
use crate::handle::Sim;
use crate::prpc::ts;
use crate::trace;
use crate::world::{NewTask, TaskState, World};

pub(super) fn routes() -> Router<Sim> {
    Router::new()
        .route("/sim/tasks", get(tasks).post(add_tasks))
        .route("/sim/bot_groups", get(bot_groups).post(set_bot_groups))
        .route("/sim/trace", post(play_trace))
}

fn bad(msg: String) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({"error": msg}))).into_response()
}

/// A task of `POST /sim/tasks`: `{"dimensions": {...}, "duration_ms": n, "id"?: "..."}`.
fn new_task(v: &Value, what: &str) -> Result<NewTask, String> {
    let obj = v.as_object().ok_or_else(|| format!("{what}: expected an object"))?;
    if let Some(k) = obj.keys().find(|k| !["id", "dimensions", "duration_ms"].contains(&k.as_str())) {
        return Err(format!("{what}.{k}: unknown field (use id, dimensions, duration_ms)"));
    }
    let id = match obj.get("id") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(_) => return Err(format!("{what}.id: expected a non-empty string")),
    };
    let d = obj.get("dimensions").ok_or_else(|| format!("{what}.dimensions: missing"))?;
    let dimensions = dims::parse(d, &format!("{what}.dimensions"))?;
    let ms = obj
        .get("duration_ms")
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("{what}.duration_ms: expected milliseconds (an integer >= 0)"))?;
    Ok(NewTask { id, dimensions, duration: Duration::from_millis(ms) })
}

/// `POST /sim/tasks`: one task, or `{"tasks": [...]}`; answers `{"ids": [...]}`.
async fn add_tasks(State(sim): State<Sim>, body: Bytes) -> Response {
    let v: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return bad(format!("tasks: not JSON: {e}")),
    };
    let parsed: Result<Vec<NewTask>, String> = match v.get("tasks") {
        Some(Value::Array(list)) => {
            list.iter().enumerate().map(|(n, t)| new_task(t, &format!("tasks[{n}]"))).collect()
        }
        Some(_) => Err("tasks: expected a list".into()),
        None => new_task(&v, "task").map(|t| vec![t]),
    };
    let list = match parsed {
        Ok(l) => l,
        Err(e) => return bad(e),
    };
    let added = sim.with(|w| {
        w.check_task_ids(list.iter().filter_map(|t| t.id.as_deref()))?;
        list.into_iter().map(|t| w.add_task(t)).collect::<Result<Vec<_>, _>>()
    });
    match added {
        Ok(ids) => Json(json!({"ids": ids})).into_response(),
        Err(e) => bad(e),
    }
}

/// `GET /sim/tasks`: every task, oldest first, and the totals by state.
async fn tasks(State(sim): State<Sim>) -> Response {
    Json(sim.with(|w| tasks_json(w))).into_response()
}

/// `{"now", "nowMs", "totals": {"total", "PENDING", ...}, "tasks": [{"id", "state", "dimensions",
/// "durationMs", "created", "createdMs", "started", "startedMs", "ended", "endedMs", "bot":
/// {"server", "id"}}]}` (times absent until they happen; ms on the simulator's clock).
pub fn tasks_json(w: &World) -> Value {
    let at = |v: &mut Value, key: &str, t: Option<tokio::time::Instant>| {
        if let Some(t) = t {
            v[key] = json!(ts(w.utc(t)));
            v[format!("{key}Ms")] = json!(w.clock_ms(t));
        }
    };
    let items: Vec<Value> = w
        .tasks()
        .iter()
        .map(|t| {
            let mut v = json!({"id": t.id, "state": t.state.name(), "dimensions": t.dimensions,
                               "durationMs": t.duration.as_millis() as u64});
            at(&mut v, "created", Some(t.created));
            at(&mut v, "started", t.started);
            at(&mut v, "ended", t.ended);
            if let Some((server, id)) = &t.bot {
                v["bot"] = json!({"server": server, "id": id});
            }
            v
        })
        .collect();
    json!({"now": ts(w.now_utc()), "nowMs": w.clock_ms(w.now()), "totals": totals(w.task_totals()), "tasks": items})
}

/// Task totals: `{"total", "PENDING", "RUNNING", "COMPLETED", "BOT_DIED", "CANCELED"}`.
pub fn totals(t: [u64; 5]) -> Value {
    let mut v = json!({"total": t.iter().sum::<u64>()});
    for s in TaskState::ALL {
        v[s.name()] = json!(t[s as usize]);
    }
    v
}

async fn bot_groups(State(sim): State<Sim>) -> Response {
    Json(sim.with(|w| json!(w.bot_groups()))).into_response()
}

/// `POST /sim/bot_groups`: replaces the groups; answers them.
async fn set_bot_groups(State(sim): State<Sim>, body: Bytes) -> Response {
    let groups = match serde_json::from_slice(&body).map_err(|e| format!("bot groups: not JSON: {e}")) {
        Ok(v) => match BotGroups::parse(&v) {
            Ok(g) => g,
            Err(e) => return bad(e),
        },
        Err(e) => return bad(e),
    };
    Json(sim.with(|w| {
        w.set_bot_groups(groups);
        json!(w.bot_groups())
    }))
    .into_response()
}

/// `POST /sim/trace?speed=S`: schedules every task of the JSONL body at `at_s / S` from now,
/// running `duration_s / S`; answers `{"scheduled": n, "lastAt", "lastAtMs"}` (the last arrival).
async fn play_trace(
    State(sim): State<Sim>,
    Query(q): Query<HashMap<String, String>>,
    body: Bytes,
) -> Response {
    let speed = match q.get("speed").map(|s| s.parse::<f64>()) {
        None => 1.0,
        Some(Ok(s)) if s.is_finite() && s > 0.0 => s,
        Some(_) => return bad("speed: expected a number > 0".into()),
    };
    let Ok(text) = std::str::from_utf8(&body) else { return bad("trace: not UTF-8".into()) };
    let list = match trace::parse(text) {
        Ok(l) => l,
        Err(e) => return bad(format!("trace: {e}")),
    };
    // A century at most (as the timeline schedules), so no time overflows.
    let far = Duration::from_secs(100 * 365 * 86_400);
    let secs = |s: f64| Duration::try_from_secs_f64(s / speed).unwrap_or(far).min(far);
    Json(sim.with(|w| {
        let now = w.now();
        let mut last = None;
        for t in &list {
            let after = secs(t.at_s);
            last = last.max(Some(after));
            w.schedule_task(
                after,
                NewTask { id: None, dimensions: t.dimensions.clone(), duration: secs(t.duration_s) },
            );
        }
        let mut v = json!({"scheduled": list.len()});
        if let Some(after) = last {
            v["lastAt"] = json!(ts(w.utc(now + after)));
            v["lastAtMs"] = json!(w.clock_ms(now + after));
        }
        v
    }))
    .into_response()
}
