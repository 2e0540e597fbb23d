//! `Bots` over Swarming's pRPC (`swarming.v2.Bots`, JSON encoding).
//!
//! Only the servers the settings list (`[swarming] servers`) are called: any other is refused
//! before a request is made, whatever a record names. Real Swarming is called at the server's
//! origin, the simulator through an endpoint template such as
//! `http://127.0.0.1:<port>/swarming/{host}`; with Google credentials (`google_auth.rs`, scope
//! `userinfo.email`), a server listed as `https://` gets a Bearer token, one listed as `http://`
//! never does. Redirects are never followed; answers may come gzip-compressed.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use gce_backend_jobs::config::{Trust, check_endpoint};
use gce_backend_jobs::model::Bot;
use gce_backend_jobs::ports::bots::{BotError, BotErrorKind, BotEvent, Bots};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Page size of ListBots: what LUCI's own GCE provider asks.
const PAGE: u32 = 500;

/// A Swarming pRPC client.
#[derive(Debug, Clone)]
pub struct Swarming {
    http: reqwest::Client,
    /// The simulator's endpoint template (`{host}` stands for `host[:port]`); none: the real
    /// server at its origin.
    template: Option<String>,
    /// Tokens for servers listed as `https://` (none: no token is ever sent).
    tokens: Option<std::sync::Arc<super::google_auth::Tokens>>,
    trust: std::sync::Arc<Trust>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct BotInfo {
    bot_id: String,
    first_seen_ts: Option<DateTime<Utc>>,
    last_seen_ts: Option<DateTime<Utc>>,
    is_dead: bool,
    deleted: bool,
    termination_task_id: String,
    task_id: String,
}

impl From<BotInfo> for Bot {
    fn from(b: BotInfo) -> Bot {
        Bot {
            unknown: Default::default(),
            id: b.bot_id,
            first_seen: b.first_seen_ts,
            last_seen: b.last_seen_ts,
            is_dead: b.is_dead,
            deleted: b.deleted,
            termination_task_id: b.termination_task_id,
            task_id: b.task_id,
        }
    }
}

/// The gRPC code of an answer without `X-Prpc-Grpc-Code` (a proxy's), as LUCI's client maps it.
fn code_of_status(status: u16) -> u16 {
    match status {
        401 => 16,
        403 => 7,
        503 => 14,
        _ => 13,
    }
}

/// An error answer's text, after its HTTP status and reason phrase (`503 Service Unavailable:
/// …`) when it is not a 200. Each call is sent once (no retries): one call, one answer.
fn answered(status: u16, text: &str) -> String {
    if status == 200 {
        return text.to_owned();
    }
    match http::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason()) {
        Some(phrase) => format!("{status} {phrase}: {text}"),
        None => format!("{status}: {text}"),
    }
}

impl Swarming {
    /// A client calling the servers `trust` lists; `template` maps a server's `host[:port]`
    /// into a base URL (`{host}` is replaced), without one the server's origin; `tokens`
    /// authenticate calls to servers listed as `https://`.
    pub fn new(
        template: Option<&str>,
        trust: std::sync::Arc<Trust>,
        tokens: Option<std::sync::Arc<super::google_auth::Tokens>>,
    ) -> Result<Self, String> {
        super::install_crypto();
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(30))
            .redirect(reqwest::redirect::Policy::none())
            .gzip(true)
            .build()
            .map_err(|e| format!("http client: {e}"))?;
        if let Some(t) = template {
            check_endpoint("Swarming endpoint template", &t.replace("{host}", "h"))?;
            if !t.contains("{host}") {
                return Err(format!("Swarming endpoint template {t:?} must contain {{host}}"));
            }
        }
        Ok(Self { http, template: template.map(str::to_owned), tokens, trust })
    }

    /// The URL of `method` on `server`, if the settings list it (the host is a checked DNS name:
    /// nothing in it can change the path).
    /// Every method is of `swarming.v2.Bots` but `CountTasks` (`swarming.v2.Tasks`).
    fn url(&self, server: &str, method: &str) -> Result<(String, bool), BotError> {
        let service = if method == "CountTasks" { "Tasks" } else { "Bots" };
        let origin = self.trust.server(server).map_err(|e| BotError::new(BotErrorKind::Denied, e))?;
        let base = match &self.template {
            Some(t) => {
                let host =
                    origin.port.map_or_else(|| origin.host.clone(), |p| format!("{}:{p}", origin.host));
                t.replace("{host}", &host)
            }
            None => origin.to_string(),
        };
        Ok((format!("{base}/prpc/swarming.v2.{service}/{method}"), origin.scheme == "https"))
    }

    async fn call<T: DeserializeOwned>(
        &self,
        server: &str,
        method: &str,
        body: Value,
    ) -> Result<T, BotError> {
        let unavailable = |e: String| BotError::new(BotErrorKind::Unavailable, e);
        let (url, secure) = self.url(server, method)?;
        let mut req = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .body(body.to_string());
        if let Some(t) = self.tokens.as_ref().filter(|_| secure) {
            match t.token().await {
                Ok(token) => req = req.bearer_auth(token),
                // A transient failure (a metadata server not answering) is retried as an
                // unavailable server's; a broken key file is ours to mend.
                Err(e) => {
                    let kind = if e.transient { BotErrorKind::Unavailable } else { BotErrorKind::Denied };
                    return Err(BotError::new(kind, e.to_string()));
                }
            }
        }
        let resp = req.send().await.map_err(|e| unavailable(e.to_string()))?;
        let status = resp.status().as_u16();
        let code = match resp.headers().get("x-prpc-grpc-code").and_then(|v| v.to_str().ok()) {
            Some(c) => c.parse().unwrap_or(2),
            None if status == 200 => 13,
            None => code_of_status(status),
        };
        let text = resp.text().await.map_err(|e| unavailable(e.to_string()))?;
        if code != 0 {
            return Err(BotError::grpc(code, answered(status, text.trim())));
        }
        let json = text.strip_prefix(")]}'").unwrap_or(&text);
        serde_json::from_str(json)
            .map_err(|e| BotError::new(BotErrorKind::Unavailable, format!("malformed {method} answer: {e}")))
    }
}

#[async_trait]
impl Bots for Swarming {
    async fn get(&self, server: &str, id: &str) -> Result<Option<Bot>, BotError> {
        match self.call::<BotInfo>(server, "GetBot", json!({"botId": id})).await {
            Ok(b) => Ok(Some(b.into())),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn list(
        &self,
        server: &str,
        cursor: Option<String>,
    ) -> Result<(Vec<Bot>, Option<String>), BotError> {
        #[derive(Deserialize, Default)]
        #[serde(default)]
        struct Page {
            items: Vec<BotInfo>,
            cursor: Option<String>,
        }
        let page: Page = self
            .call(server, "ListBots", json!({"limit": PAGE, "cursor": cursor.unwrap_or_default()}))
            .await?;
        Ok((page.items.into_iter().map(Bot::from).collect(), page.cursor.filter(|c| !c.is_empty())))
    }

    async fn events(&self, server: &str, id: &str, start: DateTime<Utc>) -> Result<Vec<BotEvent>, BotError> {
        #[derive(Deserialize, Default)]
        #[serde(default, rename_all = "camelCase")]
        struct Event {
            ts: Option<DateTime<Utc>>,
            event_type: String,
        }
        #[derive(Deserialize, Default)]
        #[serde(default)]
        struct Events {
            items: Vec<Event>,
        }
        let start = start.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let ev: Events =
            self.call(server, "ListBotEvents", json!({"botId": id, "limit": 5, "start": start})).await?;
        Ok(ev
            .items
            .into_iter()
            .map(|e| BotEvent { ts: e.ts.unwrap_or_default(), event_type: e.event_type })
            .collect())
    }

    async fn terminate(&self, server: &str, id: &str) -> Result<(), BotError> {
        match self.call::<Value>(server, "TerminateBot", json!({"botId": id, "reason": "GCE Provider"})).await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn delete(&self, server: &str, id: &str) -> Result<bool, BotError> {
        match self.call::<Value>(server, "DeleteBot", json!({"botId": id})).await {
            Ok(_) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn count_pending(
        &self,
        server: &str,
        tags: &[String],
        start: DateTime<Utc>,
    ) -> Result<u32, BotError> {
        /// `TasksCount`: `count` is left out when 0.
        #[derive(Deserialize, Default)]
        #[serde(default)]
        struct Count {
            count: u32,
        }
        let start = start.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let body = json!({"start": start, "state": "QUERY_PENDING", "tags": tags});
        Ok(self.call::<Count>(server, "CountTasks", body).await?.count)
    }
}

#[cfg(test)]
mod tests;
