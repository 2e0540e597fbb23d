//! Unit tests of `api/reference.rs`.

use super::*;
use crate::api::error::ERRORS;

fn refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            if let Some(Value::String(r)) = o.get("$ref") {
                out.push(r.clone());
            }
            o.values().for_each(|v| refs(v, out));
        }
        Value::Array(a) => a.iter().for_each(|v| refs(v, out)),
        _ => {}
    }
}

#[test]
fn the_openapi_document_has_every_method_and_every_reference_resolves() {
    let doc = openapi(&Urls::new("https://gce.example.com/"));
    assert_eq!(doc["servers"][0]["url"], "https://gce.example.com/api/gce-backend/v1");
    let mut ops = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (verb, op) in item.as_object().unwrap() {
            ops.push(op["operationId"].as_str().unwrap().to_owned());
            let m = METHODS.iter().find(|m| m.name == op["operationId"]).unwrap();
            assert_eq!(
                (path.as_str(), verb.as_str()),
                (format!("/{}", m.axum_route().trim_start_matches('/')).as_str(), m.verb)
            );
        }
    }
    ops.sort();
    let mut names: Vec<String> = METHODS.iter().map(|m| m.name.to_owned()).collect();
    names.sort();
    assert_eq!(ops, names);
    let mut all = Vec::new();
    refs(&doc, &mut all);
    assert!(!all.is_empty());
    for r in all {
        let name = r.strip_prefix("#/components/schemas/").unwrap_or_else(|| panic!("{r}"));
        assert!(doc["components"]["schemas"].get(name).is_some(), "{r} does not resolve");
    }
}

#[test]
fn the_reference_lists_every_method_with_schemas_that_are_served() {
    let urls = Urls::new("http://x");
    let r = api_reference(&urls);
    assert_eq!(r["$schema"], "http://x/schemas/base/v1/api-reference.json");
    assert_eq!(manifest(&urls)["references"][0], "http://x/references/gce-backend/v1/api.json");
    let served = schemas();
    for e in r["entries"].as_array().unwrap() {
        for k in ["input", "output"] {
            if let Some(f) = e[k].as_str() {
                let file = f.strip_prefix("v1/").unwrap();
                assert!(served.contains_key(file), "{f}");
                assert_eq!(
                    schema_doc(&urls, file).unwrap()["$id"],
                    format!("http://x/schemas/gce-backend/v1/{file}")
                );
            }
        }
    }
    assert_eq!(r["entries"].as_array().unwrap().len(), METHODS.len());
    assert!(base_schema(&urls, "nope.json").is_none());
    // The reference and the manifest are what their own schemas say.
    for (doc, file) in [(r, "api-reference.json"), (manifest(&urls), "api-manifest.json")] {
        let schema = jsonschema::validator_for(&base_schema(&urls, file).unwrap()).unwrap();
        if let Err(e) = schema.validate(&doc) {
            panic!("{file}: {e}");
        }
    }
}

#[test]
fn each_schema_name_of_the_openapi_document_stands_for_one_type() {
    // Every `$defs` entry of every schema lands under its name in `components.schemas`: two types
    // of one name (a Config's counts and a queue's) would make one answer point at the other's.
    let mut seen: BTreeMap<String, Value> = BTreeMap::new();
    for (file, s) in schemas() {
        for (name, def) in s.get("$defs").and_then(Value::as_object).into_iter().flatten() {
            if let Some(before) = seen.insert(name.clone(), def.clone()) {
                assert_eq!(&before, def, "{file}: schema name {name} stands for two types");
            }
        }
    }
    assert!(seen.contains_key("QueueCounts") && seen.contains_key("Counts"), "{:?}", seen.keys());
}

#[test]
fn register_takes_no_bearer_token_and_every_other_method_does() {
    let doc = openapi(&Urls::new("http://localhost"));
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for (verb, op) in ops.as_object().unwrap() {
            let bearer = op["security"].as_array().is_some_and(|s| !s.is_empty());
            assert_eq!(bearer, op["operationId"] != "register", "{verb} {path}");
        }
    }
}

#[test]
fn query_parameters_are_typed_as_the_handlers_parse_them() {
    let doc = openapi(&Urls::new("http://localhost"));
    let param = |path: &str, name: &str| -> Value {
        let ps = doc["paths"][path]["get"]["parameters"].as_array().unwrap().clone();
        ps.into_iter().find(|p| p["name"] == name).unwrap_or_else(|| panic!("{path} {name}"))["schema"]
            .clone()
    };
    let limit = param("/configs/{prefix}/vms", "limit");
    assert_eq!((limit["type"].as_str(), limit["maximum"].as_u64()), (Some("integer"), Some(1000)));
    let states: Vec<String> =
        gce_backend_jobs::model::VmState::ALL.iter().map(|s| s.name().to_owned()).collect();
    assert_eq!(param("/configs/{prefix}/vms", "state")["enum"], json!(states));
    for s in &states {
        assert!(s.parse::<gce_backend_jobs::model::VmState>().is_ok(), "the API parses {s}");
    }
    assert_eq!(param("/status", "live")["type"], "boolean");
    // The month as `spend` reads it: YYYY-MM, 01 to 12.
    let month = jsonschema::validator_for(&param("/spend", "month")).unwrap();
    for (m, ok) in
        [("2026-11", true), ("2026-12", true), ("2026-13", false), ("2026-1", false), ("2026-00", false)]
    {
        assert_eq!(month.is_valid(&json!(m)), ok, "{m}");
        assert_eq!(gce_backend_jobs::spend::report::Month::parse(m).is_ok(), ok, "{m}");
    }
    assert_eq!(param("/configs", "continuationToken")["type"], "string");
    let tags = doc["paths"]["/queues/{queue}/pending"]["get"]["tags"].clone();
    assert_eq!(tags, json!(["queues"]));
}

#[test]
fn error_answers_are_typed_by_status_and_declared_per_method() {
    let doc = openapi(&Urls::new("http://localhost"));
    let statuses = |path: &str, verb: &str| -> Vec<String> {
        doc["paths"][path][verb]["responses"].as_object().unwrap().keys().cloned().collect()
    };
    // No catch-all: a client knows each error a method can answer.
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for (verb, op) in ops.as_object().unwrap() {
            let responses = op["responses"].as_object().unwrap();
            assert!(!responses.contains_key("default"), "{verb} {path}");
            for (status, r) in responses.iter().filter(|(s, _)| s.as_str() >= "400") {
                let code = &r["content"]["application/json"]["schema"]["properties"]["code"]["const"];
                let listed = ERRORS.iter().find(|e| e.0.to_string() == *status).unwrap();
                assert_eq!(code, listed.1, "{verb} {path} {status}");
                assert_eq!(r["description"], listed.2, "{verb} {path} {status}");
            }
        }
    }
    // register takes no token (no 401) but refuses a bad proof (403).
    assert_eq!(statuses("/register", "post"), ["200", "400", "403", "409", "413", "429", "500", "503"]);
    // A read of a list: no route parameter, so no 404; no body, so no 413.
    assert_eq!(statuses("/queues", "get"), ["200", "401", "403", "429", "500", "503"]);
    // A change by name with a body: all of them.
    let amount = statuses("/configs/{prefix}/amount", "put");
    assert_eq!(amount, ["200", "400", "401", "403", "404", "409", "413", "429", "500", "503"]);
}

#[test]
fn the_audit_trail_methods_are_documented_with_their_schema() {
    let doc = openapi(&Urls::new("http://x"));
    let op = &doc["paths"]["/configs/{prefix}/history"]["get"];
    assert_eq!(op["operationId"], "configHistory");
    assert_eq!(op["x-role"], "reader");
    let names: Vec<&str> =
        op["parameters"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["prefix", "continuationToken", "limit"]);
    let out = op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].as_str().unwrap();
    assert_eq!(out, "#/components/schemas/AuditList");
    let entry = &doc["components"]["schemas"]["AuditEntry"];
    for field in ["at", "actor", "action", "prefix", "before_revision", "after_revision", "detail"] {
        assert!(entry["properties"].get(field).is_some(), "{field}: {entry:#}");
    }
    let action = &doc["components"]["schemas"]["AuditAction"];
    assert!(action.to_string().contains("pause_all"), "{action:#}");
    assert_eq!(doc["paths"]["/history"]["get"]["x-role"], "admin");
}

#[test]
fn an_error_entry_declares_when_it_was_resolved() {
    let doc = openapi(&Urls::new("https://gce.example.com/"));
    let entry = &doc["components"]["schemas"]["ErrorEntry"];
    let resolved = &entry["properties"]["resolved"];
    assert_eq!(resolved["format"], "date-time", "{entry}");
    assert!(resolved["description"].as_str().is_some_and(|d| d.contains("resolved")), "{entry}");
    let required: Vec<&str> =
        entry["required"].as_array().unwrap().iter().filter_map(|r| r.as_str()).collect();
    assert!(!required.contains(&"resolved"), "absent while not resolved: {entry}");
}
