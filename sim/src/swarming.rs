//! Swarming v2 pRPC: `swarming.v2.Bots` GetBot, ListBots, CountBots, ListBotEvents,
//! TerminateBot, DeleteBot and `swarming.v2.Tasks` CountTasks, at
//! `/swarming/<server host>/prpc/swarming.v2.<Service>/<Method>`, JSON encoding, and the protojson
//! of bots and their events. The counts are in `swarm_count.rs`, pRPC's encoding in `prpc.rs`.
//!
//! Success: HTTP 200, `X-Prpc-Grpc-Code: 0`, body `)]}'` + newline + protojson (zero values
//! omitted), gzip-compressed past 1 KiB for a caller that accepts gzip. Failure:
//! `X-Prpc-Grpc-Code: <code>`, the HTTP status of that code, a text body (a generic one for 5xx).
//! ListBots cursors are opaque (`cursor.rs`); limits, cursors and TerminateBot's reason are
//! checked as Swarming's `rpcs` package does, with its messages.
//! A server under a `swarming_servers` fault hangs (never answers) or answers malformed JSON.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, header};
use axum::response::Response;
use axum::routing::post;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::cursor;
use crate::dims::Dims;
use crate::handle::{Refused, Sim};
pub(crate) use crate::prpc::ts;
use crate::prpc::{Status, accepts_gzip, broken, fail, ok, parse, stored, time};
use crate::swarm_count as count;
use crate::world::{Bot, BotEvent, BotFilter, BotView};

/// Seconds after which Swarming calls a silent bot dead (reported in ListBots).
const DEATH_TIMEOUT: i32 = 600;
/// A listing's page size when the request gives none (Swarming's `defaultPageSize`).
const DEFAULT_PAGE: i32 = 100;
/// The largest page size a listing accepts (Swarming's `maxPageSize`).
const MAX_PAGE: i32 = 1000;
/// The longest TerminateBot reason, in bytes (Swarming's `maxReasonLength`).
const MAX_REASON: usize = 1000;

pub(super) fn routes() -> Router<Sim> {
    Router::new().route("/swarming/{server}/prpc/{service}/{method}", post(dispatch))
}

/// A `ListBots` filter value: protojson NullableBool.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(untagged)]
enum NullableBool {
    /// `"NULL"`, `"FALSE"`, `"TRUE"`.
    Name(NullableName),
    /// 0, 1, 2.
    Number(u8),
}

/// Names of NullableBool.
#[derive(Debug, Clone, Copy, Deserialize)]
#[allow(clippy::upper_case_acronyms)]
enum NullableName {
    /// No filter.
    NULL,
    /// False.
    FALSE,
    /// True.
    TRUE,
}

impl NullableBool {
    /// As a filter.
    fn as_filter(self) -> Option<bool> {
        match self {
            NullableBool::Name(NullableName::TRUE) | NullableBool::Number(2) => Some(true),
            NullableBool::Name(NullableName::FALSE) | NullableBool::Number(1) => Some(false),
            _ => None,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct BotRequest {
    #[serde(alias = "bot_id")]
    bot_id: String,
    reason: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct BotsRequest {
    limit: i32,
    cursor: String,
    #[serde(alias = "is_dead")]
    is_dead: Option<NullableBool>,
    #[serde(alias = "is_busy")]
    is_busy: Option<NullableBool>,
    dimensions: Vec<count::StringPair>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct BotEventsRequest {
    #[serde(alias = "bot_id")]
    bot_id: String,
    limit: i32,
    start: Option<String>,
    end: Option<String>,
}

fn require_id(id: &str) -> Result<(), Status> {
    if id.is_empty() { Err(Status(3, "bot_id is required".into())) } else { Ok(()) }
}

/// A listing's page size (0: the default), or INVALID_ARGUMENT as Swarming words it.
fn limit(n: i32) -> Result<usize, Status> {
    match n {
        0 => Ok(DEFAULT_PAGE as usize),
        1..=MAX_PAGE => Ok(n as usize),
        ..0 => Err(Status(3, format!("invalid limit: must be positive, got {n}"))),
        _ => Err(Status(3, format!("invalid limit: must be less or equal to {MAX_PAGE}, got {n}"))),
    }
}

/// TerminateBot's reason checked as Swarming does: at most [`MAX_REASON`] bytes of UTF-8, not
/// characters (Swarming counts it after turning line breaks into spaces, which keeps the count).
fn check_reason(reason: &str) -> Result<(), Status> {
    let n = reason.len();
    if n > MAX_REASON {
        return Err(Status(3, format!("reason is too long: {n} > {MAX_REASON}")));
    }
    Ok(())
}

fn handle(sim: &Sim, server: &str, service: &str, method: &str, body: &Bytes) -> Result<Value, Status> {
    match (service, method) {
        ("swarming.v2.Tasks", "CountTasks") => count::count_tasks(sim, body),
        ("swarming.v2.Bots", "CountBots") => count::count_bots(sim, server, body),
        ("swarming.v2.Bots", _) => bots(sim, server, method, body),
        _ => Err(Status(12, format!("method {service}/{method} is not implemented"))),
    }
}

fn bots(sim: &Sim, server: &str, method: &str, body: &Bytes) -> Result<Value, Status> {
    match method {
        "GetBot" => {
            let r: BotRequest = parse(body)?;
            require_id(&r.bot_id)?;
            sim.with(|w| w.bot(server, &r.bot_id).map(|b| bot(&b)))
                .ok_or_else(|| Status(5, format!("no such bot: {}", r.bot_id)))
        }
        "ListBots" => {
            let r: BotsRequest = parse(body)?;
            let limit = limit(r.limit)?;
            let after = match r.cursor.as_str() {
                "" => String::new(),
                c => cursor::open_bots(server, c).ok_or_else(|| Status(3, "bad pagination cursor".into()))?,
            };
            let filter = BotFilter {
                dims: count::dims_filter(&r.dimensions)?,
                is_dead: r.is_dead.and_then(NullableBool::as_filter),
                is_busy: r.is_busy.and_then(NullableBool::as_filter),
            };
            Ok(sim.with(|w| {
                let (items, last) = w.list_bots(server, limit, &after, &filter);
                bot_list(w.now_utc(), &items, last.map(|id| cursor::seal_bots(server, &id)))
            }))
        }
        "ListBotEvents" => {
            let r: BotEventsRequest = parse(body)?;
            require_id(&r.bot_id)?;
            let (start, end) = (time(&r.start, "start")?, time(&r.end, "end")?);
            let limit = limit(r.limit)?;
            Ok(sim.with(|w| event_list(w.now_utc(), w.bot_events(server, &r.bot_id, limit, start, end))))
        }
        "TerminateBot" => {
            let r: BotRequest = parse(body)?;
            require_id(&r.bot_id)?;
            check_reason(&r.reason)?;
            Ok(json!({"taskId": sim.with(|w| w.terminate_bot(server, &r.bot_id))}))
        }
        "DeleteBot" => {
            let r: BotRequest = parse(body)?;
            require_id(&r.bot_id)?;
            if sim.with(|w| w.delete_bot(server, &r.bot_id)) {
                Ok(json!({"deleted": true}))
            } else {
                Err(Status(5, format!("\"{}\" not found", r.bot_id)))
            }
        }
        _ => Err(Status(12, format!("method swarming.v2.Bots/{method} is not implemented"))),
    }
}

async fn dispatch(
    State(sim): State<Sim>,
    Path((server, service, method)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let name = format!("swarming.{method}");
    let gzip = match accepts_gzip(&headers) {
        Ok(g) => g,
        Err(s) => return sim.answer(&name, fail(s)),
    };
    let json_body = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let resp = if !json_body {
        fail(Status(3, "the simulator speaks JSON pRPC only: send Content-Type: application/json".into()))
    } else if let Some(fault) = sim.with(|w| w.faults.server_fault(&server)) {
        broken(fault).await
    } else {
        match sim.enter(&name, None).await {
            Err(Refused::Fault(f)) => fail(match f.status {
                429 => Status(8, "rate limited".into()),
                403 => Status(7, "permission denied (injected fault)".into()),
                _ => Status(14, "service unavailable".into()),
            }),
            Err(Refused::Quota(_)) => fail(Status(8, "rate limited".into())),
            Ok(()) => match handle(&sim, &server, &service, &method, &body) {
                Ok(v) => ok(v, gzip),
                Err(s) => fail(s),
            },
        }
    };
    sim.answer(&name, resp)
}

/// A bot as `swarming.v2.BotInfo` shows it, copied out of the world (so it can be encoded
/// without the world locked).
#[derive(Debug, Clone)]
pub(crate) struct BotInfo {
    id: String,
    external_ip: String,
    first_seen: DateTime<Utc>,
    last_seen: DateTime<Utc>,
    session: u64,
    task_id: Option<String>,
    dead: bool,
    deleted: bool,
    termination_task_id: Option<String>,
    dims: Dims,
}

impl BotInfo {
    /// A copy of what `GetBot` shows of `v`.
    pub(crate) fn of(v: &BotView<'_>) -> Self {
        let b = v.bot;
        Self {
            id: v.id.to_owned(),
            external_ip: b.external_ip.clone(),
            first_seen: b.first_seen,
            last_seen: v.last_seen,
            session: b.session,
            task_id: v.task_id.clone(),
            dead: b.dead_at.is_some(),
            deleted: b.deleted,
            termination_task_id: b.termination_task_id.clone(),
            dims: b.dims.clone(),
        }
    }

    /// The bot's id.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// `swarming.v2.BotInfo`; `taskId`, `isDead`, `deleted`, `terminationTaskId` only when set.
    pub(crate) fn json(&self) -> Value {
        let id = &self.id;
        let mut j = json!({
            "botId": id,
            "externalIp": self.external_ip,
            "firstSeenTs": ts(stored(self.first_seen)),
            "lastSeenTs": ts(stored(self.last_seen)),
            "dimensions": self.dims.iter().map(|(k, v)| json!({"key": k, "value": v})).collect::<Vec<_>>(),
            "version": "simulated",
            "sessionId": format!("{:x}", self.session),
            "authenticatedAs": format!("bot:{id}"),
        });
        if let Some(t) = &self.task_id {
            j["taskId"] = json!(t);
        }
        if self.dead {
            j["isDead"] = json!(true);
        }
        if self.deleted {
            j["deleted"] = json!(true);
        }
        if let Some(t) = &self.termination_task_id {
            j["terminationTaskId"] = json!(t);
        }
        j
    }
}

/// `swarming.v2.BotInfo` of `v`.
pub(crate) fn bot(v: &BotView<'_>) -> Value {
    BotInfo::of(v).json()
}

/// `swarming.v2.BotInfoListResponse`: `items` and `cursor` only when there are.
fn bot_list(now: DateTime<Utc>, items: &[BotView<'_>], cursor: Option<String>) -> Value {
    let mut v = json!({"now": ts(now), "deathTimeout": DEATH_TIMEOUT});
    if !items.is_empty() {
        v["items"] = items.iter().map(bot).collect();
    }
    if let Some(c) = cursor {
        v["cursor"] = json!(c);
    }
    v
}

/// `swarming.v2.BotEventsResponse`: `items` only when there are.
fn event_list(now: DateTime<Utc>, events: Option<(&Bot, Vec<&BotEvent>)>) -> Value {
    let mut v = json!({"now": ts(now)});
    if let Some((b, events)) = events.filter(|(_, e)| !e.is_empty()) {
        let items: Vec<Value> = events
            .iter()
            .map(|e| {
                json!({"ts": ts(stored(e.ts)), "eventType": e.kind, "message": e.message, "externalIp": b.external_ip,
                       "version": "simulated", "sessionId": format!("{:x}", b.session)})
            })
            .collect();
        v["items"] = json!(items);
    }
    v
}
