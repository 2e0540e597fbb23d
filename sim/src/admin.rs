//! The admin API under `/sim/`: the whole state (and its JSON) and call counts for invariant
//! checks, fault settings, and actions (preempt an instance, kill a bot).

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};

use super::Sim;
use super::config::FaultsPatch;
use super::swarming::{bot, ts};
use super::world::{Operation, World};

pub(super) fn routes() -> Router<Sim> {
    Router::new()
        .route("/sim/state", get(state))
        .route("/sim/calls", get(calls))
        .route("/sim/config", get(config))
        .route("/sim/faults", get(faults).post(set_faults))
        .route("/sim/preempt", post(preempt))
        .route("/sim/kill-bot", post(kill_bot))
}

fn bad(msg: String) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({"error": msg}))).into_response()
}

async fn state(State(sim): State<Sim>) -> Response {
    Json(sim.with(|w| state_json(w))).into_response()
}

/// The state as `/sim/state` returns it: instances, bots (as `GetBot` answers them, with their
/// server), operations by name, and the insert audit by instance name.
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
                let mut v = bot(&w.bot(server, id).expect("listed"));
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
            let error = op.error.as_ref().map(|e| json!({"code": e.code, "message": e.message, "http": e.http}));
            json!({"name": op.name, "project": op.project, "zone": op.zone, "type": op.kind, "target": op.target,
                   "status": op.status.name(), "error": error, "requestId": op.request_id})
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

async fn calls(State(sim): State<Sim>) -> Response {
    Json(sim.with(|w| json!({"calls": w.calls}))).into_response()
}

async fn config(State(sim): State<Sim>) -> Response {
    Json(sim.with(|w| json!(w.cfg))).into_response()
}

async fn faults(State(sim): State<Sim>) -> Response {
    Json(sim.with(|w| json!(w.faults))).into_response()
}

async fn set_faults(State(sim): State<Sim>, body: axum::body::Bytes) -> Response {
    let patch: FaultsPatch = match serde_json::from_slice(&body) {
        Ok(p) => p,
        Err(e) => return bad(format!("faults: {e}")),
    };
    match sim.with(|w| w.faults.apply(patch).map(|()| json!(w.faults))) {
        Ok(v) => Json(v).into_response(),
        Err(e) => bad(e),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InstanceRef {
    project: String,
    zone: String,
    name: String,
}

async fn preempt(State(sim): State<Sim>, body: axum::body::Bytes) -> Response {
    let r: InstanceRef = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return bad(format!("preempt: {e} (expected project, zone, name)")),
    };
    match sim.with(|w| w.preempt(&r.project, &r.zone, &r.name)) {
        Ok(()) => Json(json!({"preempted": r.name})).into_response(),
        Err(e) => (StatusCode::NOT_FOUND, Json(json!({"error": e.message}))).into_response(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct BotRef {
    server: String,
    bot_id: String,
}

async fn kill_bot(State(sim): State<Sim>, body: axum::body::Bytes) -> Response {
    let r: BotRef = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return bad(format!("kill-bot: {e} (expected server, botId)")),
    };
    if sim.with(|w| w.kill_bot(&super::world::server_key(&r.server), &r.bot_id)) {
        Json(json!({"killed": r.bot_id})).into_response()
    } else {
        (StatusCode::NOT_FOUND, Json(json!({"error": format!("no bot {} on {}", r.bot_id, r.server)})))
            .into_response()
    }
}
