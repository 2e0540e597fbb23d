//! The API client the CLI uses: it reads the API reference from the deployment at run time
//! (seed 002 §4.6) and calls any method by name, so a new method needs no CLI change.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::causes;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The caller's mistake (unknown method, missing argument): exit code 2.
    #[error("{0}")]
    Usage(String),
    /// The API answered an error.
    #[error("{status} {code}: {message}{fields} (request {request_id})")]
    Api {
        /// HTTP status.
        status: u16,
        /// The error's code.
        code: String,
        /// Its message.
        message: String,
        /// Field errors (or a file's errors), one per line.
        fields: String,
        /// The request id.
        request_id: String,
    },
    /// The API could not be reached or answered something else than JSON.
    #[error("{0}")]
    Transport(String),
}

impl CallError {
    /// The HTTP status, for API errors.
    pub fn status(&self) -> Option<u16> {
        match self {
            CallError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// Where the API lies under a deployment's root.
const API_PATH: &str = "/api/gce-backend";

/// A client of one deployment.
#[derive(Debug)]
pub struct Client {
    root: String,
    token: Option<String>,
    http: reqwest::Client,
    reference: Option<Value>,
}

impl Client {
    /// A client of the deployment at `root` (no default: seed 002), with `token` if given.
    pub fn new(root: &str, token: Option<String>) -> Result<Self, CallError> {
        if !(root.starts_with("http://") || root.starts_with("https://")) {
            return Err(CallError::Usage(format!("root URL {root:?}: must be an http:// or https:// URL")));
        }
        if let Some(i) = root.find(API_PATH) {
            return Err(CallError::Usage(format!(
                "root URL {root:?} includes the API's path: give the deployment's root, {:?} (the API is under ROOT{API_PATH}/v1)",
                &root[..i]
            )));
        }
        crate::adapters::install_crypto();
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(60))
            .build()
            .map_err(|e| CallError::Transport(e.to_string()))?;
        Ok(Client { root: root.trim_end_matches('/').to_owned(), token, http, reference: None })
    }

    async fn fetch(&self, url: &str) -> Result<Value, CallError> {
        let res = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|e| CallError::Transport(format!("{url}: {}", causes(&e))))?;
        decode(res).await
    }

    /// The API reference, read once from `ROOT/references/manifest.json`.
    pub async fn reference(&mut self) -> Result<&Value, CallError> {
        if self.reference.is_none() {
            let manifest = self.fetch(&format!("{}/references/manifest.json", self.root)).await?;
            let url = manifest["references"]
                .as_array()
                .and_then(|refs| {
                    refs.iter().filter_map(Value::as_str).find(|u| u.ends_with("/gce-backend/v1/api.json"))
                })
                .ok_or_else(|| {
                    CallError::Transport(format!("{}: the manifest lists no gce-backend API", self.root))
                })?
                .to_owned();
            // The reference states its own root; fetch it under ours (a proxy may front it).
            let path = url.find("/references/").map_or(url.as_str(), |i| &url[i..]);
            self.reference = Some(self.fetch(&format!("{}{path}", self.root)).await?);
        }
        Ok(self.reference.as_ref().expect("just set"))
    }

    /// Calls method `name` with route and query `args` and an optional JSON `input`.
    pub async fn call(
        &mut self,
        name: &str,
        args: &BTreeMap<String, String>,
        input: Option<&Value>,
    ) -> Result<Value, CallError> {
        let reference = self.reference().await?;
        let entries = reference["entries"].as_array().cloned().unwrap_or_default();
        let entry = entries.iter().find(|e| e["name"] == name).ok_or_else(|| {
            let names: Vec<&str> = entries.iter().filter_map(|e| e["name"].as_str()).collect();
            CallError::Usage(format!("no API method {name:?} (methods: {})", names.join(", ")))
        })?;
        let mut path = entry["route"].as_str().unwrap_or("/").to_owned();
        let mut used = Vec::new();
        for arg in entry["args"].as_array().into_iter().flatten().filter_map(Value::as_str) {
            let v = args.get(arg).ok_or_else(|| CallError::Usage(format!("{name} needs {arg}=VALUE")))?;
            // `.` and `..` are dot segments: a URL drops them (even encoded as `%2E`), so the
            // call would reach another route; no Config or VM is named so.
            if v == "." || v == ".." {
                return Err(CallError::Usage(format!("{name}: {arg} {v:?} names nothing (a path of dots)")));
            }
            path = path.replace(&format!("<{arg}>"), &encode(v));
            used.push(arg);
        }
        let query: Vec<(&str, &str)> = entry["query"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter_map(|q| args.get(q).map(|v| (q, v.as_str())))
            .collect();
        let known = |k: &String| used.contains(&k.as_str()) || query.iter().any(|(q, _)| q == k);
        if let Some(k) = args.keys().find(|k| !known(k)) {
            return Err(CallError::Usage(format!("{name} takes no argument {k:?}")));
        }
        let has_input = entry.get("input").is_some();
        if input.is_some() && !has_input {
            return Err(CallError::Usage(format!("{name} takes no input")));
        }
        let url = format!("{}{API_PATH}/v1{path}", self.root);
        let method =
            reqwest::Method::from_bytes(entry["method"].as_str().unwrap_or("get").to_uppercase().as_bytes())
                .map_err(|e| CallError::Transport(e.to_string()))?;
        let mut req = self.http.request(method, &url).query(&query);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        if has_input {
            req = req.json(input.unwrap_or(&Value::Object(Default::default())));
        }
        let res = req.send().await.map_err(|e| CallError::Transport(format!("{url}: {}", causes(&e))))?;
        decode(res).await.map_err(|e| self.explain(e))
    }

    /// A 401 says what to do about it: no token was sent, or the one sent was refused.
    fn explain(&self, e: CallError) -> CallError {
        match e {
            CallError::Api { status: 401, code, message, fields, request_id } => {
                let hint = match self.token {
                    None => {
                        "no token was sent: set GCE_BACKEND_TOKEN to your API token (whoever runs the service makes one with `gce-backend token`)"
                    }
                    Some(_) => {
                        "the token in GCE_BACKEND_TOKEN was refused (unknown, expired or revoked): ask whoever runs the service for a new one (`gce-backend token`)"
                    }
                };
                CallError::Api {
                    status: 401,
                    code,
                    message: format!("{message}; {hint}"),
                    fields,
                    request_id,
                }
            }
            other => other,
        }
    }
}

/// Percent-encodes a route argument.
pub fn encode(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

async fn decode(res: reqwest::Response) -> Result<Value, CallError> {
    let status = res.status();
    let url = res.url().to_string();
    let text = res.text().await.map_err(|e| CallError::Transport(format!("{url}: {}", causes(&e))))?;
    let body: Value = serde_json::from_str(&text).map_err(|_| {
        CallError::Transport(format!(
            "{url}: {status}, not JSON: {}",
            text.chars().take(200).collect::<String>()
        ))
    })?;
    if status.is_success() {
        return Ok(body);
    }
    let s = |k: &str| body[k].as_str().unwrap_or_default().to_owned();
    let line =
        |a: &Value, b: &Value| format!("\n  {}: {}", a.as_str().unwrap_or("?"), b.as_str().unwrap_or("?"));
    // One broken rule is already the message; several are listed under it. A Config not found
    // because its file is not applied: that file's errors.
    let fields: String = body["fields"]
        .as_array()
        .filter(|f| f.len() > 1)
        .into_iter()
        .flatten()
        .map(|f| line(&f["field"], &f["rule"]))
        .chain(body["files"].as_array().into_iter().flatten().map(|f| line(&f["path"], &f["message"])))
        .collect();
    Err(CallError::Api {
        status: status.as_u16(),
        code: s("code"),
        message: s("message"),
        fields,
        request_id: s("requestId"),
    })
}

#[cfg(test)]
mod tests;
