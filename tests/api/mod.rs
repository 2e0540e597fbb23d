//! The operator's API over HTTP on a private Redis and the simulator: a client that reads the
//! API reference as the CLI does and checks every answer against its published schema, the
//! tokens the tests use, and an API-only server over a test context.

use std::collections::HashMap;
use std::sync::LazyLock;

use gce_backend_jobs::Ctx;
use serde_json::{Value, json};

/// Every method × role × owner/non-owner × anonymous.
mod authz;
/// The CLI on the API.
mod cli;
/// What the dashboard's cockpit reads: who may change what, the last hour.
mod cockpit;
/// Errors as JSON; health and readiness.
mod errors;
/// Config files not applied and deletions held, where operators look.
mod files;
/// End-to-end flows: apply, amount, pause, plan, recycle, delete, retry a dead task.
mod flows;
/// Random bodies, routes and queries never give a 5xx.
mod fuzz;
/// The audit trail: who did what to a Config, read back over HTTP.
mod history;
/// The listener's limits: rates per token and address (429), `register`'s, its refusals
/// logged once a minute, `[http]` timeouts.
mod listen;
/// The OpenAPI document through a real validator.
mod openapi;
/// A VM registers with its identity token.
mod register;
/// Showback: tenants and Configs a caller may read, months, budgets.
mod spend;
/// Tasks name their Config and what the caller may do with them; whoami what a role may.
mod tasks;
/// Tokens that end: expiry, the tokens file read again on a change and on SIGHUP.
mod tokens;
/// Teams in their box: servers, files, projects, durations, tenants.
mod trust;

pub(crate) use crate::support::tokens::{
    ADMIN, METRICS, READER, TOKENS, WRITER, entry, tokens_text, write_tokens,
};

/// Serves the API alone over `ctx` (nothing else runs); returns its base URL.
pub(crate) async fn serve(ctx: Ctx) -> String {
    serve_with(ctx, &gce_backend::settings::Http::default()).await.0
}

/// [`serve`] with the `[http]` settings `http`; also returns its metrics.
pub(crate) async fn serve_with(
    ctx: Ctx,
    http: &gce_backend::settings::Http,
) -> (String, std::sync::Arc<gce_backend::metrics::Metrics>) {
    let dir = crate::support::temp_dir();
    let tokens =
        gce_backend::api::auth::Tokens::parse(&std::fs::read_to_string(write_tokens(&dir)).unwrap(), "t")
            .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let api = gce_backend::api::Api::new(ctx, &url, tokens).with_http(http);
    let metrics = api.metrics.clone();
    tokio::spawn(gce_backend::api::serve(api, listener, std::future::pending()));
    (url, metrics)
}

/// Each answer the OpenAPI document `doc` declares, by (operationId, status), as a validator
/// that resolves the document's `#/components/schemas/…` references.
type Answers = HashMap<(String, u16), jsonschema::Validator>;
fn openapi_answers(doc: &Value) -> Answers {
    let mut out = HashMap::new();
    let ops = doc["paths"].as_object().unwrap().values().flat_map(|p| p.as_object().unwrap().values());
    for op in ops {
        let id = op["operationId"].as_str().unwrap();
        for (status, answer) in op["responses"].as_object().unwrap() {
            let mut schema = answer["content"]["application/json"]["schema"].clone();
            schema["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
            schema["components"] = doc["components"].clone();
            let v = jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("{id} {status}: {e}"));
            out.insert((id.to_owned(), status.parse().unwrap()), v);
        }
    }
    out
}

/// The OpenAPI document the API serves, without its `servers` (they name the deployment's
/// root URL), and its answers' validators: built once for the whole test run, not once per
/// client ([`Client::new`] checks that the server serves this document).
static OPENAPI: LazyLock<(Value, Answers)> = LazyLock::new(|| {
    let urls = gce_backend::api::urls::Urls::new("http://localhost");
    let doc = without_servers(gce_backend::api::reference::openapi(&urls));
    let answers = openapi_answers(&doc);
    (doc, answers)
});

/// An OpenAPI document without its `servers`.
fn without_servers(mut doc: Value) -> Value {
    doc.as_object_mut().unwrap().remove("servers");
    doc
}

/// A Config body (JSON) for `prefix`, owned by `owner`, `min`..`max` VMs.
pub(crate) fn config(prefix: &str, owner: &[&str], min: u32, max: u32) -> Value {
    let yaml = crate::support::pool(prefix, min, "1d", "10m");
    let mut c = serde_json::to_value(gce_backend_jobs::config::Config::parse(&yaml, "t").unwrap()).unwrap();
    c["amount"] = json!({"min": min, "max": max});
    c["owner"] = json!(owner);
    c
}

/// A client that calls methods by name and checks each answer against its schema.
pub(crate) struct Client {
    pub(crate) root: String,
    http: reqwest::Client,
    entries: Vec<Value>,
    schemas: HashMap<String, jsonschema::Validator>,
}

impl Client {
    /// Reads the manifest, the reference and every output and error schema from `root`.
    pub(crate) async fn new(root: &str) -> Client {
        let http = reqwest::Client::new();
        let get = |url: String| {
            let http = http.clone();
            async move { http.get(&url).send().await.unwrap().json::<Value>().await.unwrap() }
        };
        let manifest = get(format!("{root}/references/manifest.json")).await;
        // The manifest states URLs under the deployment's root URL; read them under ours.
        let listed = manifest["references"][0].as_str().unwrap();
        assert!(listed.ends_with("/references/gce-backend/v1/api.json"), "{manifest}");
        let path = &listed[listed.find("/references/").unwrap()..];
        let reference = get(format!("{root}{path}")).await;
        assert_eq!(reference["metadata"], json!({"name": "api", "version": 1}));
        let entries = reference["entries"].as_array().unwrap().clone();
        let mut schemas = HashMap::new();
        let files = entries.iter().flat_map(|e| [e["output"].as_str(), e["input"].as_str()]).flatten();
        for file in files.chain(["v1/error-body.json"]) {
            if schemas.contains_key(file) {
                continue;
            }
            let schema = get(format!("{root}/schemas/gce-backend/{file}")).await;
            let v = jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("{file}: {e}"));
            schemas.insert(file.to_owned(), v);
        }
        // Answers are checked against the document built in this process: the one served.
        let doc = without_servers(get(format!("{root}/api/gce-backend/v1/openapi.json")).await);
        assert!(doc == OPENAPI.0, "the OpenAPI document served at {root} is the one the tests check against");
        Client { root: root.to_owned(), http, entries, schemas }
    }

    /// The reference's entry of `method`.
    pub(crate) fn entry(&self, method: &str) -> &Value {
        self.entries.iter().find(|e| e["name"] == method).unwrap_or_else(|| panic!("no method {method}"))
    }

    /// Every method name.
    pub(crate) fn methods(&self) -> Vec<String> {
        self.entries.iter().map(|e| e["name"].as_str().unwrap().to_owned()).collect()
    }

    /// Calls `method` with route/query `args` and `body` as `token`; checks the answer against
    /// the output schema (2xx) or the error schema (4xx/5xx, with a request id).
    pub(crate) async fn call(
        &self,
        token: Option<&str>,
        method: &str,
        args: &[(&str, &str)],
        body: Option<Value>,
    ) -> (u16, Value) {
        let e = self.entry(method);
        let mut path = e["route"].as_str().unwrap().to_owned();
        let mut query = Vec::new();
        for (k, v) in args {
            if path.contains(&format!("<{k}>")) {
                path = path.replace(&format!("<{k}>"), &gce_backend::cli::client::encode(v));
            } else {
                query.push((*k, *v));
            }
        }
        let url = format!("{}/api/gce-backend/v1{path}", self.root);
        let verb =
            reqwest::Method::from_bytes(e["method"].as_str().unwrap().to_uppercase().as_bytes()).unwrap();
        let mut req = self.http.request(verb, &url).query(&query);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.unwrap();
        let status = res.status().as_u16();
        let header_id = res.headers().get("x-request-id").map(|v| v.to_str().unwrap().to_owned());
        let text = res.text().await.unwrap();
        let v: Value = serde_json::from_str(&text)
            .unwrap_or_else(|_| panic!("{method} {url}: {status} not JSON: {text}"));
        let file = if status < 400 { e["output"].as_str().unwrap() } else { "v1/error-body.json" };
        if let Err(err) = self.schemas[file].validate(&v) {
            panic!("{method} answer {status} does not match {file}: {err}\n{v:#}");
        }
        if status >= 400 {
            assert_eq!(v["requestId"].as_str(), header_id.as_deref(), "{v}");
        }
        check_declared(method, status, &v);
        (status, v)
    }

    /// [`Client::call`] that must succeed.
    pub(crate) async fn ok(
        &self,
        token: &str,
        method: &str,
        args: &[(&str, &str)],
        body: Option<Value>,
    ) -> Value {
        let (status, v) = self.call(Some(token), method, args, body).await;
        assert!(status < 300, "{method} {args:?}: {status} {v:#}");
        v
    }
}

/// Checks that the OpenAPI document declares `status` for `method`, with a body like `v`.
fn check_declared(method: &str, status: u16, v: &Value) {
    let declared = OPENAPI.1.get(&(method.to_owned(), status)).unwrap_or_else(|| {
        panic!("{method} answered {status}, which the OpenAPI document does not declare: {v:#}")
    });
    if let Err(err) = declared.validate(v) {
        panic!("{method} answer {status} does not match the OpenAPI document: {err}\n{v:#}");
    }
}

/// Checks an answer to a request made by hand (`verb` `path` under the API's root, query and
/// all) against the OpenAPI document, when the route is one of its operations; says whether it
/// was.
pub(crate) fn check(verb: &str, path: &str, status: u16, v: &Value) -> bool {
    let path = path.split('?').next().unwrap_or_default();
    let path = path.strip_prefix("/api/gce-backend/v1").unwrap_or(path);
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let matches = |template: &str| {
        let t: Vec<&str> = template.trim_matches('/').split('/').collect();
        t.len() == segments.len() && t.iter().zip(&segments).all(|(t, s)| t.starts_with('{') || t == s)
    };
    let operation = OPENAPI.0["paths"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(template, _)| matches(template))
        .flat_map(|(_, ops)| ops.as_object().unwrap())
        .find(|(v, _)| v.eq_ignore_ascii_case(verb));
    let Some((_, op)) = operation else {
        return false;
    };
    check_declared(op["operationId"].as_str().unwrap(), status, v);
    true
}
