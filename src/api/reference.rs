//! What the API says about itself (seed 002): the manifest, the API reference, the base
//! schemas, every input/output schema and an OpenAPI 3.1 document, all made from the one method
//! table and the types' derived schemas.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::error::{ErrorBody, described};
use super::methods::{METHODS, Method, schema};
use super::urls::{SERVICE, Urls, VERSION};

/// Every input and output schema, by file name (with the error's), made once.
pub fn schemas() -> &'static BTreeMap<String, Value> {
    static ALL: std::sync::LazyLock<BTreeMap<String, Value>> = std::sync::LazyLock::new(make_schemas);
    &ALL
}

fn make_schemas() -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for m in METHODS {
        for (name, s) in m.input.iter().map(|f| f()).chain([(m.output)()]) {
            out.insert(name, s);
        }
    }
    let (name, s) = schema::<ErrorBody>();
    out.insert(name, s);
    // Each type of provider: the Config fields it reads.
    for kind in gce_backend_jobs::config::providers::Kind::ALL {
        out.insert(format!("provider-{}.json", kind.name()), kind.schema());
    }
    out
}

/// One schema as served: with its `$id`.
pub fn schema_doc(urls: &Urls, file: &str) -> Option<Value> {
    let mut s = schemas().get(file)?.clone();
    s["$id"] = json!(urls.schema(&format!("{SERVICE}/{VERSION}/{file}")));
    Some(s)
}

/// `ROOT/references/manifest.json`.
pub fn manifest(urls: &Urls) -> Value {
    json!({
        "$schema": urls.schema("base/v1/api-manifest.json"),
        "references": [urls.reference(&format!("{SERVICE}/{VERSION}/api.json"))],
    })
}

/// `ROOT/references/gce-backend/v1/api.json`.
pub fn api_reference(urls: &Urls) -> Value {
    let entries: Vec<Value> = METHODS
        .iter()
        .map(|m| {
            let mut e = json!({
                "type": "function",
                "name": m.name,
                "title": m.title,
                "method": m.verb,
                "route": m.route,
                "args": m.params(),
                "query": m.query,
                "output": format!("{VERSION}/{}", (m.output)().0),
                "role": m.role,
            });
            if let Some(input) = m.input {
                e["input"] = json!(format!("{VERSION}/{}", input().0));
            }
            e
        })
        .collect();
    json!({
        "$schema": urls.schema("base/v1/api-reference.json"),
        "metadata": {"name": "api", "version": 1},
        "serviceName": SERVICE,
        "apiVersion": VERSION,
        "title": "gce-backend operator API",
        "description": "Configs, VMs and queues of a gce-backend deployment. Authenticate with `Authorization: Bearer <token>`.",
        "rootUrl": urls.root(),
        "entries": entries,
    })
}

/// `ROOT/schemas/base/v1/<file>`: the schemas of the manifest and of API references.
pub fn base_schema(urls: &Urls, file: &str) -> Option<Value> {
    let id = urls.schema(&format!("base/v1/{file}"));
    Some(match file {
        "api-manifest.json" => json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": id,
            "title": "API manifest",
            "type": "object",
            "required": ["$schema", "references"],
            "properties": {
                "$schema": {"type": "string", "format": "uri"},
                "references": {"type": "array", "items": {"type": "string", "format": "uri"}, "uniqueItems": true},
            },
            "additionalProperties": false,
        }),
        "api-reference.json" => json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": id,
            "metadata": {"name": "api", "version": 1},
            "title": "API reference",
            "type": "object",
            "required": ["$schema", "metadata", "serviceName", "apiVersion", "entries"],
            "properties": {
                "$schema": {"type": "string", "format": "uri"},
                "metadata": {
                    "type": "object",
                    "required": ["name", "version"],
                    "properties": {"name": {"const": "api"}, "version": {"const": 1}},
                },
                "serviceName": {"type": "string"},
                "apiVersion": {"type": "string"},
                "title": {"type": "string"},
                "description": {"type": "string"},
                "rootUrl": {"type": "string"},
                "entries": {"type": "array", "items": {
                    "type": "object",
                    "required": ["type", "name", "method", "route", "args", "query", "output", "role"],
                    "properties": {
                        "type": {"const": "function"},
                        "name": {"type": "string", "pattern": "^[a-z][a-zA-Z0-9]*$"},
                        "title": {"type": "string"},
                        "method": {"enum": ["get", "post", "put", "delete"]},
                        "route": {"type": "string", "pattern": "^/"},
                        "args": {"type": "array", "items": {"type": "string"}},
                        "query": {"type": "array", "items": {"type": "string"}},
                        "input": {"type": "string"},
                        "output": {"type": "string"},
                        // The least role of a method (`anyone`: no token; `metrics` is a token's
                        // role, for ROOT/metrics, no method's).
                        "role": {"enum": ["anyone", "reader", "writer", "admin"]},
                    },
                    "additionalProperties": false,
                }},
            },
            "additionalProperties": false,
        }),
        _ => return None,
    })
}

/// Rewrites `#/$defs/X` references to `#/components/schemas/X`, moving the definitions into
/// `defs`.
fn lift(mut s: Value, defs: &mut serde_json::Map<String, Value>) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(o) => {
                if let Some(Value::String(r)) = o.get_mut("$ref")
                    && let Some(name) = r.strip_prefix("#/$defs/")
                {
                    *r = format!("#/components/schemas/{name}");
                }
                o.values_mut().for_each(walk);
            }
            Value::Array(a) => a.iter_mut().for_each(walk),
            _ => {}
        }
    }
    if let Some(Value::Object(inner)) = s.as_object_mut().and_then(|o| o.remove("$defs")) {
        for (k, mut v) in inner {
            walk(&mut v);
            defs.insert(k, v);
        }
    }
    if let Some(o) = s.as_object_mut() {
        o.remove("$schema");
    }
    walk(&mut s);
    s
}

/// The schema of query parameter `name`, as the handlers parse it.
fn query_schema(name: &str) -> Value {
    use super::types::Page;
    match name {
        "limit" => {
            json!({"type": "integer", "minimum": 1, "maximum": Page::LIMIT_MAX, "default": Page::LIMIT_DEFAULT})
        }
        "live" => json!({"type": "boolean", "default": false}),
        "state" => json!({"type": "string", "enum": gce_backend_jobs::model::VmState::ALL.map(|s| s.name())}),
        "prefixes" => {
            json!({"type": "string", "description": "Config prefixes, comma-separated (none: every Config)"})
        }
        "month" => json!({
            "type": "string",
            "pattern": "^[0-9]{4}-(0[1-9]|1[0-2])$",
            "description": "A calendar month (UTC), YYYY-MM (default: this month)",
        }),
        "tenant" => {
            json!({"type": "string", "description": "A tenant: an owner group of the settings' [tenants], or *"})
        }
        _ => json!({"type": "string"}),
    }
}

/// The error statuses `m` may answer: every method may meet a rate limit, a failure or a slow
/// datastore, and be refused; a token can be missing; a parameter, query or body can be wrong;
/// a named thing can be missing; a change can conflict; a body can be too large.
fn error_statuses(m: &Method) -> Vec<u16> {
    let mut out = vec![403, 429, 500, 503];
    if !m.params().is_empty() || !m.query.is_empty() || m.input.is_some() {
        out.push(400);
    }
    if m.role != super::auth::Role::Anyone {
        out.push(401);
    }
    if !m.params().is_empty() {
        out.push(404);
    }
    if m.verb != "get" {
        out.push(409);
    }
    if m.input.is_some() {
        out.push(413);
    }
    out.sort_unstable();
    out
}

/// `ROOT/api/gce-backend/v1/openapi.json`.
pub fn openapi(urls: &Urls) -> Value {
    let mut defs = serde_json::Map::new();
    let mut named = |f: (String, Value)| -> String {
        let title = f.1.get("title").and_then(Value::as_str).unwrap_or(&f.0).to_owned();
        let s = lift(f.1, &mut defs);
        defs.insert(title.clone(), s);
        format!("#/components/schemas/{title}")
    };
    let error = named(schema::<ErrorBody>());
    let mut paths = serde_json::Map::new();
    for m in METHODS {
        let mut params: Vec<Value> = m
            .params()
            .iter()
            .map(|p| json!({"name": p, "in": "path", "required": true, "schema": {"type": "string"}}))
            .collect();
        params.extend(
            m.query
                .iter()
                .map(|q| json!({"name": q, "in": "query", "required": false, "schema": query_schema(q)})),
        );
        let ok = if m.name == "createConfig" { "201" } else { "200" };
        let mut responses = serde_json::Map::new();
        responses.insert(
            ok.into(),
            json!({"description": "OK", "content": {"application/json": {"schema": {"$ref": named((m.output)())}}}}),
        );
        for status in error_statuses(m) {
            let (code, what) = described(status);
            let schema = json!({"$ref": error, "properties": {"code": {"const": code}}});
            responses.insert(
                status.to_string(),
                json!({"description": what, "content": {"application/json": {"schema": schema}}}),
            );
        }
        let mut op = json!({
            "operationId": m.name,
            // The method table has one line per method: the summary (a description would repeat it).
            "summary": m.title,
            "tags": [m.route.trim_start_matches('/').split('/').next().unwrap_or_default()],
            "parameters": params,
            // `register` takes no token: the VM's identity proof is its credential.
            "security": if m.role == super::auth::Role::Anyone { json!([]) } else { json!([{"bearer": []}]) },
            "x-role": m.role,
            "responses": responses,
        });
        if let Some(input) = m.input {
            op["requestBody"] = json!({"required": true, "content": {"application/json": {"schema": {"$ref": named(input())}}}});
        }
        let path = format!("/{}", m.axum_route().trim_start_matches('/'));
        paths.entry(path).or_insert_with(|| json!({}))[m.verb] = op;
    }
    json!({
        "openapi": "3.1.0",
        "info": {"title": "gce-backend operator API", "version": "1"},
        "servers": [{"url": urls.api("")}],
        "paths": paths,
        "components": {
            "schemas": defs,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    })
}

#[cfg(test)]
mod tests;
