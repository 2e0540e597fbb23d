//! The admin API under `/sim/`: counts (`summary`), the state (whole, or paged) and call counts
//! for invariant checks, fault settings, and actions (preempt an instance, kill a bot, move the
//! clock ahead).
//!
//! Answers that can be big are copied out of the world under its lock as typed rows and encoded
//! after the lock is released, off the async workers.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

use axum::Json;
use axum::Router;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::config::FaultsPatch;
use crate::handle::Sim;
use crate::names::{server_key, valid_hostname};
pub use crate::summary::Summary;
use crate::swarming::{BotInfo, ts};
use crate::world::{InstanceEntry, OpError, OpStatus, Operation, Scope, Status, World};

/// Rows per `/sim/state` page when `limit` is not given.
pub const DEFAULT_PAGE: usize = 1000;
/// Most rows per `/sim/state` page.
pub const MAX_PAGE: usize = 10_000;

pub(super) fn routes() -> Router<Sim> {
    Router::new()
        .route("/sim/summary", get(summary))
        .route("/sim/state", get(state))
        .route("/sim/calls", get(calls))
        .route("/sim/config", get(config))
        .route("/sim/faults", get(faults).post(set_faults))
        .route("/sim/preempt", post(preempt))
        .route("/sim/kill-bot", post(kill_bot))
        .route("/sim/machines", post(add_machines))
        .route("/sim/clock", post(clock))
}

fn bad(msg: String) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({"error": msg}))).into_response()
}

/// Encodes `f()` off the async workers, and answers it as JSON.
async fn encoded(f: impl FnOnce() -> Vec<u8> + Send + 'static) -> Response {
    match tokio::task::spawn_blocking(f).await {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, Json(json!({"error": e.to_string()}))).into_response(),
    }
}

async fn summary(State(sim): State<Sim>) -> Response {
    let s = sim.with(|w| Summary::of(w));
    Json(s.json()).into_response()
}

/// An instance as `/sim/state` shows it.
#[derive(Debug, Clone)]
struct InstanceRow {
    project: String,
    zone: String,
    name: String,
    id: u64,
    status: Status,
    labels: BTreeMap<String, String>,
    swarming: Option<String>,
    never_boots: bool,
    deleting: bool,
    created: DateTime<Utc>,
}

impl InstanceRow {
    fn of(((project, zone, name), i): InstanceEntry<'_>) -> Self {
        Self {
            project: project.clone(),
            zone: zone.clone(),
            name: name.clone(),
            id: i.id,
            status: i.status,
            labels: i.labels.clone(),
            swarming: i.swarming.clone(),
            never_boots: i.never_boots,
            deleting: i.deleting,
            created: i.created,
        }
    }

    fn json(&self) -> Value {
        json!({"project": self.project, "zone": self.zone, "name": self.name, "id": self.id.to_string(),
               "status": self.status.name(), "labels": self.labels, "swarming": self.swarming,
               "neverBoots": self.never_boots, "deleting": self.deleting, "created": ts(self.created)})
    }

    /// The page token that continues after this row.
    fn token(&self) -> String {
        format!("i/{}/{}/{}", self.project, self.zone, self.name)
    }
}

/// A bot as `/sim/state` shows it: as `GetBot` answers it, with its server.
#[derive(Debug, Clone)]
struct BotRow {
    server: String,
    info: BotInfo,
}

impl BotRow {
    fn json(&self) -> Value {
        let mut v = self.info.json();
        v["server"] = json!(self.server);
        v
    }

    fn token(&self) -> String {
        format!("b/{}/{}", self.server, self.info.id())
    }
}

/// An operation as `/sim/state` shows it.
#[derive(Debug, Clone)]
struct OpRow {
    name: String,
    project: String,
    scope: Scope,
    location: String,
    group: Option<String>,
    kind: &'static str,
    target: String,
    status: OpStatus,
    error: Option<OpError>,
    request_id: Option<String>,
}

impl OpRow {
    fn of(op: &Operation) -> Self {
        Self {
            name: op.name.clone(),
            project: op.project.clone(),
            scope: op.scope,
            location: op.location.clone(),
            group: op.group.clone(),
            kind: op.kind,
            target: op.target.clone(),
            status: op.status,
            error: op.error.clone(),
            request_id: op.request_id.clone(),
        }
    }

    fn json(&self) -> Value {
        let error =
            self.error.as_ref().map(|e| json!({"code": e.code, "message": e.message, "http": e.http}));
        let mut v = json!({"name": self.name, "project": self.project, "type": self.kind,
               "target": self.target, "status": self.status.name(), "error": error, "requestId": self.request_id});
        match self.scope {
            Scope::Zone => v["zone"] = json!(self.location),
            Scope::Region => v["region"] = json!(self.location),
            Scope::Global => {}
        }
        if let Some(g) = &self.group {
            v["operationGroupId"] = json!(g);
        }
        v
    }
}

/// An insert audit entry: project, zone, instance name, and the requestIds of its inserts.
type InsertRow = (String, String, String, Vec<String>);

/// `/sim/state`, copied out of the world: the whole of it, or one page of instances then bots.
#[derive(Debug, Clone)]
pub struct Snapshot {
    now: DateTime<Utc>,
    instances: Vec<InstanceRow>,
    bots: Vec<BotRow>,
    /// Operations and the insert audit: in the whole state only.
    rest: Option<(Vec<OpRow>, Vec<InsertRow>)>,
    next: Option<String>,
}

/// Where a `/sim/state` page starts: after an instance, or after a bot.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Cursor {
    Start,
    Instance(String, String, String),
    Bot(String, String),
}

impl Cursor {
    fn parse(token: &str) -> Result<Self, String> {
        let bad = || format!("pageToken: not a token from nextPageToken: {token:?}");
        if token.is_empty() {
            return Ok(Cursor::Start);
        }
        let mut parts = token.split('/');
        let cursor = match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some("i"), Some(p), Some(z), Some(n)) => Cursor::Instance(p.into(), z.into(), n.into()),
            (Some("b"), Some(s), Some(id), None) => Cursor::Bot(s.into(), id.into()),
            _ => return Err(bad()),
        };
        if parts.next().is_some() { Err(bad()) } else { Ok(cursor) }
    }
}

impl Snapshot {
    /// The whole state of `w`: instances, bots, operations (by name) and the insert audit (by
    /// instance name). O(n): for small fleets; page big ones.
    pub fn full(w: &World) -> Self {
        let ops: Vec<OpRow> = w.operations.values().map(OpRow::of).collect();
        let inserts: Vec<_> =
            w.inserts.iter().map(|((p, z, n), ids)| (p.clone(), z.clone(), n.clone(), ids.clone())).collect();
        Self {
            now: w.now_utc(),
            instances: w.instances.iter().map(InstanceRow::of).collect(),
            bots: w
                .bots
                .iter()
                .flat_map(|(server, bots)| {
                    bots.iter().map(move |(id, b)| BotRow {
                        server: server.clone(),
                        info: BotInfo::of(&w.bot_view(id, b)),
                    })
                })
                .collect(),
            rest: Some((ops, inserts)),
            next: None,
        }
    }

    /// At most `limit` rows of `w` after `token` (instances by project, zone and name, then bots
    /// by server and id), and the token of the next page if there are more. O(limit + log n).
    pub fn page(w: &World, limit: usize, token: &str) -> Result<Self, String> {
        let cursor = Cursor::parse(token)?;
        let mut page =
            Self { now: w.now_utc(), instances: Vec::new(), bots: Vec::new(), rest: None, next: None };
        let full = |page: &Self| page.instances.len() + page.bots.len() >= limit;
        let last_token = |page: &Self| {
            page.bots.last().map(BotRow::token).or_else(|| page.instances.last().map(InstanceRow::token))
        };
        let (from_instance, from_bot) = match cursor {
            Cursor::Start => (Some(Bound::Unbounded), None),
            Cursor::Instance(p, z, n) => (Some(Bound::Excluded((p, z, n))), None),
            Cursor::Bot(s, id) => (None, Some((s, id))),
        };
        if let Some(from) = from_instance {
            for entry in w.instances.range((from, Bound::Unbounded)) {
                if full(&page) {
                    page.next = last_token(&page);
                    return Ok(page);
                }
                page.instances.push(InstanceRow::of(entry));
            }
        }
        let servers = match &from_bot {
            Some((s, _)) => w.bots.range::<str, _>((Bound::Included(s.as_str()), Bound::Unbounded)),
            None => w.bots.range::<str, _>(..),
        };
        for (server, bots) in servers {
            let after = match &from_bot {
                Some((s, id)) if s == server => Bound::Excluded(id.as_str()),
                _ => Bound::Unbounded,
            };
            for (id, b) in bots.range::<str, _>((after, Bound::Unbounded)) {
                if full(&page) {
                    page.next = last_token(&page);
                    return Ok(page);
                }
                page.bots.push(BotRow { server: server.clone(), info: BotInfo::of(&w.bot_view(id, b)) });
            }
        }
        Ok(page)
    }

    /// The JSON, written row by row (no tree of the whole state is built): `{"now", "instances",
    /// "bots", "operations", "inserts"}` for the whole state, `{"now", "instances", "bots",
    /// "nextPageToken"}` for a page (the token only when there are more).
    pub fn encode(mut self) -> Vec<u8> {
        fn list<T>(out: &mut Vec<u8>, key: &str, rows: &[T], json: impl Fn(&T) -> Value) {
            out.extend_from_slice(format!(",\"{key}\":[").as_bytes());
            for (n, r) in rows.iter().enumerate() {
                if n > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, &json(r)).expect("a JSON value encodes");
            }
            out.push(b']');
        }
        // Sorted here rather than under the world lock.
        if let Some((ops, inserts)) = &mut self.rest {
            ops.sort_by(|a, b| a.name.cmp(&b.name));
            inserts.sort_by(|a, b| (&a.2, &a.0, &a.1).cmp(&(&b.2, &b.0, &b.1)));
        }
        let mut out = Vec::with_capacity(64 + 400 * (self.instances.len() + self.bots.len()));
        out.extend_from_slice(format!("{{\"now\":\"{}\"", ts(self.now)).as_bytes());
        list(&mut out, "instances", &self.instances, InstanceRow::json);
        list(&mut out, "bots", &self.bots, BotRow::json);
        if let Some((ops, inserts)) = &self.rest {
            list(&mut out, "operations", ops, OpRow::json);
            list(
                &mut out,
                "inserts",
                inserts,
                |(p, z, n, ids)| json!({"project": p, "zone": z, "name": n, "requestIds": ids}),
            );
        }
        if let Some(next) = &self.next {
            out.extend_from_slice(format!(",\"nextPageToken\":{}", json!(next)).as_bytes());
        }
        out.push(b'}');
        out
    }
}

/// The whole state as `/sim/state` without parameters returns it (see [`Snapshot::full`]).
pub fn state_json(w: &World) -> Value {
    serde_json::from_slice(&Snapshot::full(w).encode()).expect("the state encodes as JSON")
}

/// `GET /sim/state`: the whole state, or with `limit` (1..=10000, default 1000) or `pageToken`
/// one page of instances then bots and its `nextPageToken`.
async fn state(State(sim): State<Sim>, Query(q): Query<HashMap<String, String>>) -> Response {
    let snapshot = if q.contains_key("limit") || q.contains_key("pageToken") {
        let limit = match q.get("limit").map(|l| l.parse::<usize>()) {
            None => DEFAULT_PAGE,
            Some(Ok(n)) if (1..=MAX_PAGE).contains(&n) => n,
            Some(_) => return bad(format!("limit: must be between 1 and {MAX_PAGE}")),
        };
        let token = q.get("pageToken").map(String::as_str).unwrap_or_default();
        match sim.with(|w| Snapshot::page(w, limit, token)) {
            Ok(s) => s,
            Err(e) => return bad(e),
        }
    } else {
        sim.with(|w| Snapshot::full(w))
    };
    encoded(move || snapshot.encode()).await
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

/// Most a clock move takes at once: a day.
const MAX_SKIP_MS: u64 = 86_400_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClockMove {
    advance_ms: Option<u64>,
    #[serde(default)]
    next_minute: bool,
}

/// Moves the simulator's clock ahead: `{"advance_ms": n}` (at most a day), or `{"next_minute":
/// true}` to the start of the next whole minute (a fresh rate-quota window). Everything due
/// meanwhile happens, in time order. Answers `{"now", "nowMs"}`.
async fn clock(State(sim): State<Sim>, body: axum::body::Bytes) -> Response {
    let m: ClockMove = match serde_json::from_slice(&body) {
        Ok(m) => m,
        Err(e) => return bad(format!("clock: {e} (expected advance_ms or next_minute)")),
    };
    let by = match (m.advance_ms, m.next_minute) {
        (Some(ms), false) if ms <= MAX_SKIP_MS => Some(ms),
        (None, true) => None,
        _ => {
            return bad(format!(
                "clock: give advance_ms (0 to {MAX_SKIP_MS}) or next_minute: true, one of them"
            ));
        }
    };
    Json(sim.with(|w| {
        let ms = by.unwrap_or_else(|| 60_000 - w.now_utc().timestamp_millis().rem_euclid(60_000) as u64);
        w.skip(std::time::Duration::from_millis(ms));
        json!({"now": ts(w.now_utc()), "nowMs": w.clock_ms(w.now())})
    }))
    .into_response()
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
    if sim.with(|w| w.kill_bot(&server_key(&r.server), &r.bot_id)) {
        Json(json!({"killed": r.bot_id})).into_response()
    } else {
        (StatusCode::NOT_FOUND, Json(json!({"error": format!("no bot {} on {}", r.bot_id, r.server)})))
            .into_response()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Machines {
    server: String,
    hostnames: Vec<String>,
}

/// Adds static machines (hosts outside Compute Engine) whose bots connect to `server`.
async fn add_machines(State(sim): State<Sim>, body: axum::body::Bytes) -> Response {
    let m: Machines = match serde_json::from_slice(&body) {
        Ok(m) => m,
        Err(e) => return bad(format!("machines: {e} (expected server, hostnames)")),
    };
    let bad_names: Vec<&String> = m.hostnames.iter().filter(|h| !valid_hostname(h)).collect();
    if !bad_names.is_empty() {
        return bad(format!("machines: not hostnames: {bad_names:?}"));
    }
    sim.with(|w| {
        m.hostnames.iter().for_each(|h| {
            w.add_machine(&m.server, h);
        })
    });
    Json(json!({"added": m.hostnames})).into_response()
}
