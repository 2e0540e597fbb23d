//! Compute Engine v1 REST beyond single instances, at the paths the official clients use:
//! `instances.bulkInsert` (zonal) and `regionInstances.bulkInsert` with `regionOperations.get`;
//! global `instanceTemplates` insert, get, delete, list with `globalOperations.get`. Answers are
//! encoded as `gce.rs` encodes operations; bodies are checked against Compute's schema as there.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::gce::{operation, time, url};
use crate::gce_call::{Params, call, call_body, copy_op};
use crate::handle::Sim;
use crate::schema::Body;
use crate::world::{Scope, Template};

pub(super) fn routes() -> Router<Sim> {
    let base = "/compute/v1/projects/{project}";
    Router::new()
        .route(&format!("{base}/zones/{{zone}}/instances/bulkInsert"), post(bulk_zonal))
        .route(&format!("{base}/regions/{{region}}/instances/bulkInsert"), post(bulk_regional))
        .route(&format!("{base}/regions/{{region}}/operations/{{op}}"), get(region_operation))
        .route(&format!("{base}/global/instanceTemplates"), post(insert_template).get(list_templates))
        .route(
            &format!("{base}/global/instanceTemplates/{{name}}"),
            get(get_template).delete(delete_template),
        )
        .route(&format!("{base}/global/operations/{{op}}"), get(global_operation))
}

/// A bulkInsert in `location` (a zone or a region): its operation, RUNNING.
async fn bulk(
    sim: Sim,
    method: &str,
    project: String,
    scope: Scope,
    location: String,
    q: Params,
    body: Bytes,
) -> Response {
    call_body(&sim, method, &project, Body::BulkInsert, &body, |sim, body| {
        let op = sim.with(|w| {
            let name = w.bulk_insert(&project, scope, &location, q.get("requestId").cloned(), body)?;
            copy_op(w, &name)
        })?;
        Ok(operation(&op))
    })
    .await
}

async fn bulk_zonal(
    State(sim): State<Sim>,
    Path((project, zone)): Path<(String, String)>,
    q: Params,
    body: Bytes,
) -> Response {
    bulk(sim, "compute.instances.bulkInsert", project, Scope::Zone, zone, q, body).await
}

async fn bulk_regional(
    State(sim): State<Sim>,
    Path((project, region)): Path<(String, String)>,
    q: Params,
    body: Bytes,
) -> Response {
    bulk(sim, "compute.regionInstances.bulkInsert", project, Scope::Region, region, q, body).await
}

async fn region_operation(
    State(sim): State<Sim>,
    Path((project, region, name)): Path<(String, String, String)>,
) -> Response {
    call(&sim, "compute.regionOperations.get", &project, |sim| {
        sim.with(|w| w.operation_in(&project, Scope::Region, &region, &name).cloned())
            .map(|op| operation(&op))
    })
    .await
}

async fn global_operation(State(sim): State<Sim>, Path((project, name)): Path<(String, String)>) -> Response {
    call(&sim, "compute.globalOperations.get", &project, |sim| {
        sim.with(|w| w.operation_in(&project, Scope::Global, "global", &name).cloned())
            .map(|op| operation(&op))
    })
    .await
}

async fn insert_template(
    State(sim): State<Sim>,
    Path(project): Path<String>,
    q: Params,
    body: Bytes,
) -> Response {
    let method = "compute.instanceTemplates.insert";
    call_body(&sim, method, &project, Body::InstanceTemplate, &body, |sim, body| {
        let op = sim.with(|w| {
            let name = w.insert_template(&project, q.get("requestId").cloned(), body)?;
            copy_op(w, &name)
        })?;
        Ok(operation(&op))
    })
    .await
}

async fn delete_template(
    State(sim): State<Sim>,
    Path((project, name)): Path<(String, String)>,
    q: Params,
) -> Response {
    call(&sim, "compute.instanceTemplates.delete", &project, |sim| {
        let op = sim.with(|w| {
            let op = w.delete_template(&project, &name, q.get("requestId").cloned())?;
            copy_op(w, &op)
        })?;
        Ok(operation(&op))
    })
    .await
}

async fn get_template(State(sim): State<Sim>, Path((project, name)): Path<(String, String)>) -> Response {
    call(&sim, "compute.instanceTemplates.get", &project, |sim| {
        sim.with(|w| w.template(&project, &name).map(|t| template(&project, &name, t)))
    })
    .await
}

async fn list_templates(State(sim): State<Sim>, Path(project): Path<String>) -> Response {
    call(&sim, "compute.instanceTemplates.list", &project, |sim| {
        let items: Vec<Value> =
            sim.with(|w| w.templates(&project).into_iter().map(|(n, t)| template(&project, n, t)).collect());
        let mut v = json!({"kind": "compute#instanceTemplateList", "id": format!("projects/{project}/global/instanceTemplates"),
                           "selfLink": url(&project, "global/instanceTemplates")});
        if !items.is_empty() {
            v["items"] = json!(items);
        }
        Ok(v)
    })
    .await
}

/// `compute#instanceTemplate`.
fn template(project: &str, name: &str, t: &Template) -> Value {
    let mut v = json!({
        "kind": "compute#instanceTemplate", "id": t.id.to_string(), "name": name,
        "creationTimestamp": time(t.created), "properties": t.properties,
        "selfLink": url(project, &format!("global/instanceTemplates/{name}")),
    });
    if let Some(d) = &t.description {
        v["description"] = json!(d);
    }
    v
}
