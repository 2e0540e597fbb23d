//! Swarming v2 pRPC (`swarming.v2.Bots`): GetBot, ListBots, ListBotEvents, TerminateBot,
//! DeleteBot, at `/swarming/<server host>/prpc/swarming.v2.Bots/<Method>`, JSON encoding, and the
//! protojson of bots and their events.
//!
//! Success: HTTP 200, `X-Prpc-Grpc-Code: 0`, body `)]}'` + newline + protojson (zero values
//! omitted). Failure: `X-Prpc-Grpc-Code: <code>`, the HTTP status of that code, a text body.
//! A server under a `swarming_servers` fault hangs (never answers) or answers malformed JSON.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::config::ServerFault;
use crate::handle::{HANG, Sim};
use crate::world::{Bot, BotEvent, BotView};

/// Seconds after which Swarming calls a silent bot dead (reported in ListBots).
const DEATH_TIMEOUT: i32 = 600;

pub(super) fn routes() -> Router<Sim> {
    Router::new().route("/swarming/{server}/prpc/swarming.v2.Bots/{method}", post(dispatch))
}

/// A gRPC status: code and message.
struct Status(u16, String);

fn http_of(code: u16) -> StatusCode {
    match code {
        0 => StatusCode::OK,
        1 => StatusCode::from_u16(499).expect("valid"),
        3 | 9 => StatusCode::BAD_REQUEST,
        4 => StatusCode::GATEWAY_TIMEOUT,
        5 => StatusCode::NOT_FOUND,
        6 => StatusCode::CONFLICT,
        7 => StatusCode::FORBIDDEN,
        8 => StatusCode::TOO_MANY_REQUESTS,
        12 => StatusCode::NOT_IMPLEMENTED,
        14 => StatusCode::SERVICE_UNAVAILABLE,
        16 => StatusCode::UNAUTHORIZED,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

fn ok(v: Value) -> Response {
    let body = format!(")]}}'\n{v}\n");
    (
        StatusCode::OK,
        [
            ("x-prpc-grpc-code", "0"),
            (header::CONTENT_TYPE.as_str(), "application/json"),
            ("x-content-type-options", "nosniff"),
        ],
        body,
    )
        .into_response()
}

fn fail(Status(code, message): Status) -> Response {
    let message = if code == 13 || code == 2 { "Internal server error".to_owned() } else { message };
    (
        http_of(code),
        [
            ("x-prpc-grpc-code", code.to_string()),
            (header::CONTENT_TYPE.as_str(), "text/plain; charset=utf-8".into()),
        ],
        format!("{message}\n"),
    )
        .into_response()
}

/// The answer of a broken server: after [`HANG`] (the world is not locked meanwhile), or at once a
/// success whose body is cut short.
async fn broken(fault: ServerFault) -> Response {
    match fault {
        ServerFault::Hang => {
            tokio::time::sleep(HANG).await;
            fail(Status(4, "deadline exceeded".into()))
        }
        ServerFault::Malformed => (
            StatusCode::OK,
            [("x-prpc-grpc-code", "0"), (header::CONTENT_TYPE.as_str(), "application/json")],
            ")]}'\n{\"items\": [{\"botId\": \"",
        )
            .into_response(),
    }
}

fn parse<T: DeserializeOwned + Default>(body: &Bytes) -> Result<T, Status> {
    if body.is_empty() {
        return Ok(T::default());
    }
    serde_json::from_slice(body).map_err(|e| Status(3, format!("bad request: {e}")))
}

fn time(s: &Option<String>, field: &str) -> Result<Option<DateTime<Utc>>, Status> {
    match s {
        None => Ok(None),
        Some(s) => DateTime::parse_from_rfc3339(s)
            .map(|t| Some(t.with_timezone(&Utc)))
            .map_err(|_| Status(3, format!("{field}: not an RFC 3339 timestamp: {s}"))),
    }
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

fn limit(n: i32) -> Result<usize, Status> {
    match n {
        0 => Ok(100),
        1..=1000 => Ok(n as usize),
        _ => Err(Status(3, format!("limit must be between 1 and 1000, got {n}"))),
    }
}

fn handle(sim: &Sim, server: &str, method: &str, body: &Bytes) -> Result<Value, Status> {
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
            Ok(sim.with(|w| {
                let (items, cursor) =
                    w.list_bots(server, limit, &r.cursor, r.is_dead.and_then(NullableBool::as_filter));
                bot_list(w.now_utc(), &items, cursor)
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
            if r.reason.chars().count() > 1000 {
                return Err(Status(3, "reason is too long (max 1000)".into()));
            }
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
    Path((server, method)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let name = format!("swarming.{method}");
    let json_body = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let resp = if !json_body {
        fail(Status(3, "the simulator speaks JSON pRPC only: send Content-Type: application/json".into()))
    } else if let Some(fault) = sim.with(|w| w.faults.server_fault(&server)) {
        broken(fault).await
    } else {
        match sim.enter(&name).await {
            Some(f) => fail(match f.status {
                429 => Status(8, "rate limited".into()),
                403 => Status(7, "permission denied (injected fault)".into()),
                _ => Status(14, "service unavailable".into()),
            }),
            None => match handle(&sim, &server, &method, &body) {
                Ok(v) => ok(v),
                Err(s) => fail(s),
            },
        }
    };
    sim.answer(&name, resp)
}

/// Swarming's timestamp form: `2024-05-06T07:08:09.123456Z`.
pub(crate) fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// A bot as `swarming.v2.BotInfo` shows it, copied out of the world (so it can be encoded
/// without the world locked).
#[derive(Debug, Clone)]
pub(crate) struct BotInfo {
    id: String,
    external_ip: String,
    first_seen: DateTime<Utc>,
    last_seen: DateTime<Utc>,
    zone: String,
    session: u64,
    task_id: Option<String>,
    dead: bool,
    deleted: bool,
    termination_task_id: Option<String>,
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
            zone: b.zone.clone(),
            session: b.session,
            task_id: v.task_id.clone(),
            dead: b.dead_at.is_some(),
            deleted: b.deleted,
            termination_task_id: b.termination_task_id.clone(),
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
            "firstSeenTs": ts(self.first_seen),
            "lastSeenTs": ts(self.last_seen),
            "dimensions": [
                {"key": "id", "value": [id]},
                {"key": "pool", "value": ["gce"]},
                {"key": "zone", "value": [self.zone]},
            ],
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
                json!({"ts": ts(e.ts), "eventType": e.kind, "message": e.message, "externalIp": b.external_ip,
                       "version": "simulated", "sessionId": format!("{:x}", b.session)})
            })
            .collect();
        v["items"] = json!(items);
    }
    v
}
