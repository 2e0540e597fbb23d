//! Compute Engine v1 REST, at the paths the official client uses: instances insert, get, delete,
//! list, suspend, resume, stop, start; zoneOperations get and wait; zones.list; diskTypes.list; regions.list; and the JSON each
//! answers with. Each call goes through `gce_call.rs` (quotas, faults, the schema check of a body,
//! errors).

use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::SecondsFormat;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::gce_call::{Params, call, call_body, copy_op, error, refused};
use crate::handle::Sim;
use crate::names::region_of;
use crate::schema::Body;
use crate::world::filter::Filter;
use crate::world::{ApiError, InstanceEntry, OpStatus, Operation, Region, Scope, World};

pub(super) fn routes() -> Router<Sim> {
    let base = "/compute/v1/projects/{project}";
    Router::new()
        .route(&format!("{base}/zones/{{zone}}/instances"), post(insert).get(list))
        .route(&format!("{base}/zones/{{zone}}/instances/{{name}}"), get(get_instance).delete(delete))
        .route(&format!("{base}/zones/{{zone}}/instances/{{name}}/{{action}}"), post(action))
        .route(&format!("{base}/zones/{{zone}}/operations/{{op}}"), get(get_operation))
        .route(&format!("{base}/zones/{{zone}}/operations/{{op}}/wait"), post(wait))
        .route(&format!("{base}/zones"), get(zones))
        .route(&format!("{base}/zones/{{zone}}/diskTypes"), get(disk_types))
        .route(&format!("{base}/regions"), get(regions))
}

async fn insert(
    State(sim): State<Sim>,
    Path((project, zone)): Path<(String, String)>,
    q: Params,
    body: Bytes,
) -> Response {
    call_body(&sim, "compute.instances.insert", &project, Body::Instance, &body, |sim, body| {
        let op = sim.with(|w| {
            let name = w.insert(&project, &zone, q.get("requestId").cloned(), body)?;
            copy_op(w, &name)
        })?;
        Ok(operation(&op))
    })
    .await
}

async fn delete(
    State(sim): State<Sim>,
    Path((project, zone, name)): Path<(String, String, String)>,
    q: Params,
) -> Response {
    call(&sim, "compute.instances.delete", &project, |sim| {
        let op = sim.with(|w| {
            let op_name = w.delete(&project, &zone, &name, q.get("requestId").cloned())?;
            copy_op(w, &op_name)
        })?;
        Ok(operation(&op))
    })
    .await
}

/// `instances.suspend`, `resume`, `stop`, `start`: a zonal operation, as insert answers.
async fn action(
    State(sim): State<Sim>,
    Path((project, zone, name, action)): Path<(String, String, String, String)>,
    q: Params,
) -> Response {
    type Action = fn(&mut World, &str, &str, &str, Option<String>) -> Result<String, ApiError>;
    let (method, f): (&str, Action) = match action.as_str() {
        "suspend" => ("compute.instances.suspend", World::suspend),
        "resume" => ("compute.instances.resume", World::resume),
        "stop" => ("compute.instances.stop", World::stop),
        "start" => ("compute.instances.start", World::start),
        _ => {
            let message = format!("The requested URL /instances/{name}/{action} was not found");
            return error(ApiError { status: 404, reason: "notFound", message });
        }
    };
    call(&sim, method, &project, |sim| {
        let op = sim.with(|w| {
            let op_name = f(w, &project, &zone, &name, q.get("requestId").cloned())?;
            copy_op(w, &op_name)
        })?;
        Ok(operation(&op))
    })
    .await
}

async fn get_instance(
    State(sim): State<Sim>,
    Path((project, zone, name)): Path<(String, String, String)>,
) -> Response {
    call(&sim, "compute.instances.get", &project, |sim| {
        sim.with(|w| w.get(&project, &zone, &name).map(instance))
    })
    .await
}

async fn list(State(sim): State<Sim>, Path((project, zone)): Path<(String, String)>, q: Params) -> Response {
    call(&sim, "compute.instances.list", &project, |sim| {
        let invalid = |field: &str, msg: String| ApiError {
            status: 400,
            reason: "invalid",
            message: format!("Invalid value for field '{field}': {msg}"),
        };
        let filter = Filter::parse(q.get("filter").map(String::as_str).unwrap_or_default())
            .map_err(|e| invalid("filter", e))?;
        let max = match q.get("maxResults").filter(|m| !m.is_empty()) {
            None => 500,
            Some(m) => match m.parse::<usize>() {
                Ok(0) => 500,
                Ok(m) if m <= 500 => m,
                _ => return Err(invalid("maxResults", format!("'{m}'. Must be between 0 and 500"))),
            },
        };
        let token = q.get("pageToken").filter(|t| !t.is_empty()).map(String::as_str);
        sim.with(|w| {
            let (items, next) = w.list(&project, &zone, &filter, max, token)?;
            Ok(instance_list(&project, &zone, &items, next))
        })
    })
    .await
}

async fn get_operation(
    State(sim): State<Sim>,
    Path((project, zone, name)): Path<(String, String, String)>,
) -> Response {
    call(&sim, "compute.zoneOperations.get", &project, |sim| {
        sim.with(|w| w.operation(&project, &zone, &name).cloned()).map(|op| operation(&op))
    })
    .await
}

/// Blocks until the operation is DONE or `wait_max_ms` passed, then answers it.
async fn wait(
    State(sim): State<Sim>,
    Path((project, zone, name)): Path<(String, String, String)>,
) -> Response {
    let method = "compute.zoneOperations.wait";
    if let Err(r) = sim.enter(method, Some(&project)).await {
        return sim.answer(method, refused(r));
    }
    let deadline = Instant::now() + Duration::from_millis(sim.with(|w| w.cfg.wait_max_ms));
    loop {
        let state = sim.with(|w| w.operation(&project, &zone, &name).map(|op| op.status));
        match state {
            Err(e) => return sim.answer(method, error(e)),
            Ok(OpStatus::Done) => break,
            Ok(_) if Instant::now() >= deadline => break,
            Ok(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    let resp = match sim.with(|w| copy_op(w, &name)) {
        Ok(op) => Json(operation(&op)).into_response(),
        Err(e) => error(e),
    };
    sim.answer(method, resp)
}

async fn zones(State(sim): State<Sim>, Path(project): Path<String>) -> Response {
    call(&sim, "compute.zones.list", &project, |sim| Ok(sim.with(|w| zone_list(&project, &w.cfg.zones))))
        .await
}

/// Disk types every zone offers.
const DISK_TYPES: &[&str] = &[
    "pd-standard",
    "pd-balanced",
    "pd-ssd",
    "pd-extreme",
    "local-ssd",
    "hyperdisk-balanced",
    "hyperdisk-extreme",
    "hyperdisk-throughput",
];

async fn disk_types(State(sim): State<Sim>, Path((project, zone)): Path<(String, String)>) -> Response {
    call(&sim, "compute.diskTypes.list", &project, |sim| {
        if !sim.with(|w| w.cfg.zones.contains(&zone)) {
            let message = format!("The resource 'projects/{project}/zones/{zone}' was not found");
            return Err(ApiError { status: 404, reason: "notFound", message });
        }
        let items: Vec<Value> = DISK_TYPES
            .iter()
            .map(|t| {
                json!({"kind": "compute#diskType", "name": t, "zone": url(&project, &format!("zones/{zone}")),
                       "selfLink": url(&project, &format!("zones/{zone}/diskTypes/{t}"))})
            })
            .collect();
        let link = url(&project, &format!("zones/{zone}/diskTypes"));
        Ok(json!({"kind": "compute#diskTypeList", "items": items, "selfLink": link}))
    })
    .await
}

async fn regions(State(sim): State<Sim>, Path(project): Path<String>) -> Response {
    call(&sim, "compute.regions.list", &project, |sim| {
        Ok(sim.with(|w| region_list(&project, &w.regions(&project))))
    })
    .await
}

/// `https://www.googleapis.com/compute/v1/projects/<p>/<rest>`.
pub(crate) fn url(project: &str, rest: &str) -> String {
    format!("https://www.googleapis.com/compute/v1/projects/{project}/{rest}")
}

/// The last segment of a path or URL.
fn last(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Compute Engine's timestamp form: `2024-05-06T07:08:09.123+00:00`.
pub(crate) fn time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, false)
}

/// `compute#instance`: the insert body's other fields, overlaid with the simulator's own.
fn instance((key, i): InstanceEntry<'_>) -> Value {
    let (project, zone, name) = key;
    let mut v: Value = serde_json::from_str(&i.rest).unwrap_or_else(|_| json!({}));
    let region = region_of(zone);
    let nics: Vec<Value> = i
        .nics
        .iter()
        .enumerate()
        .map(|(n, nic)| {
            let mut j = json!({
                "kind": "compute#networkInterface",
                "name": format!("nic{n}"),
                "network": url(project, nic.network.trim_start_matches("global/")).replace(
                    &format!("projects/{project}/networks/"),
                    &format!("projects/{project}/global/networks/"),
                ),
                "networkIP": nic.ip,
            });
            if let Some(sub) = &nic.subnetwork {
                j["subnetwork"] = json!(url(project, &format!("regions/{region}/subnetworks/{}", last(sub))));
            }
            if let Some((ac_name, ip)) = &nic.nat {
                j["accessConfigs"] = json!([{
                    "kind": "compute#accessConfig", "type": "ONE_TO_ONE_NAT", "name": ac_name, "natIP": ip,
                    "networkTier": "PREMIUM"
                }]);
            }
            j
        })
        .collect();
    let items: Vec<Value> = i
        .metadata
        .iter()
        .map(|(k, v)| match v {
            Some(v) => json!({"key": k, "value": v}),
            None => json!({"key": k}),
        })
        .collect();
    let obj = v.as_object_mut().expect("object");
    obj.insert("kind".into(), json!("compute#instance"));
    obj.insert("id".into(), json!(i.id.to_string()));
    obj.insert("creationTimestamp".into(), json!(time(i.created)));
    obj.insert("name".into(), json!(name));
    obj.insert("zone".into(), json!(url(project, &format!("zones/{zone}"))));
    obj.insert(
        "machineType".into(),
        json!(url(project, &format!("zones/{zone}/machineTypes/{}", last(&i.machine_type)))),
    );
    obj.insert("status".into(), json!(i.status.name()));
    obj.insert("selfLink".into(), json!(url(project, &format!("zones/{zone}/instances/{name}"))));
    obj.insert("networkInterfaces".into(), json!(nics));
    obj.insert(
        "metadata".into(),
        json!({"kind": "compute#metadata", "fingerprint": "c2ltdWxhdG9y", "items": items}),
    );
    if !i.labels.is_empty() {
        obj.insert("labels".into(), json!(i.labels));
    }
    v
}

/// `compute#instanceList`: `items` and `nextPageToken` only when there are.
fn instance_list(project: &str, zone: &str, items: &[InstanceEntry<'_>], next: Option<String>) -> Value {
    let mut v = json!({"kind": "compute#instanceList", "id": format!("projects/{project}/zones/{zone}/instances"),
                       "selfLink": url(project, &format!("zones/{zone}/instances"))});
    if !items.is_empty() {
        v["items"] = items.iter().copied().map(instance).collect();
    }
    if let Some(next) = next {
        v["nextPageToken"] = json!(next);
    }
    v
}

/// `compute#operation`: its zone or region (none when global), the target (none for a
/// bulkInsert, which has its `instancesBulkInsertOperationMetadata`), times,
/// `clientOperationId`, `operationGroupId` and the error only when set.
pub(crate) fn operation(op: &Operation) -> Value {
    let (scope_key, at) = match op.scope {
        Scope::Zone => (Some("zone"), format!("zones/{}", op.location)),
        Scope::Region => (Some("region"), format!("regions/{}", op.location)),
        Scope::Global => (None, "global".to_owned()),
    };
    let mut v = json!({
        "kind": "compute#operation",
        "id": op.id.to_string(),
        "name": op.name,
        "operationType": op.kind,
        "status": op.status.name(),
        "user": "simulator@gce-backend",
        "progress": match op.status { OpStatus::Pending => 0, OpStatus::Running => 50, OpStatus::Done => 100 },
        "insertTime": time(op.insert_time),
        "selfLink": url(&op.project, &format!("{at}/operations/{}", op.name)),
    });
    if let Some(k) = scope_key {
        v[k] = json!(url(&op.project, &at));
    }
    match &op.bulk {
        None => {
            let target = match op.scope {
                Scope::Global => format!("global/instanceTemplates/{}", op.target),
                _ => format!("{at}/instances/{}", op.target),
            };
            v["targetLink"] = json!(url(&op.project, &target));
            v["targetId"] = json!(op.target_id.to_string());
        }
        Some(b) => {
            let status = match op.status {
                OpStatus::Done => "DONE",
                _ if b.rolled_back => "ROLLING_BACK",
                _ => "CREATING",
            };
            let per: serde_json::Map<String, Value> = b
                .zones
                .iter()
                .map(|(z, n)| {
                    let counts = json!({"status": status, "targetVmCount": n.target, "createdVmCount": n.created,
                                        "failedToCreateVmCount": n.failed, "deletedVmCount": n.deleted});
                    (format!("zones/{z}"), counts)
                })
                .collect();
            v["instancesBulkInsertOperationMetadata"] = json!({"perLocationStatus": per});
        }
    }
    if let Some(t) = op.start_time {
        v["startTime"] = json!(time(t));
    }
    if let Some(t) = op.end_time {
        v["endTime"] = json!(time(t));
    }
    if let Some(rid) = &op.request_id {
        v["clientOperationId"] = json!(rid);
    }
    if let Some(g) = &op.group {
        v["operationGroupId"] = json!(g);
    }
    if let Some(e) = &op.error {
        v["httpErrorStatusCode"] = json!(e.http);
        v["httpErrorMessage"] = json!(match e.http {
            400 => "BAD REQUEST",
            403 => "FORBIDDEN",
            404 => "NOT FOUND",
            409 => "CONFLICT",
            _ => "SERVICE UNAVAILABLE",
        });
        v["error"] = json!({"errors": [{"code": e.code, "message": e.message}]});
    }
    v
}

/// `compute#zoneList` of the served zones, in configuration order.
fn zone_list(project: &str, zones: &[String]) -> Value {
    let items: Vec<Value> = zones
        .iter()
        .enumerate()
        .map(|(n, z)| {
            json!({
                "kind": "compute#zone", "id": (2000 + n).to_string(), "name": z, "status": "UP",
                "region": url(project, &format!("regions/{}", region_of(z))),
                "selfLink": url(project, &format!("zones/{z}")),
            })
        })
        .collect();
    json!({"kind": "compute#zoneList", "items": items, "selfLink": url(project, "zones")})
}

/// `compute#regionList`, with CPUS and INSTANCES quotas and their usage.
fn region_list(project: &str, regions: &[Region<'_>]) -> Value {
    let items: Vec<Value> = regions
        .iter()
        .enumerate()
        .map(|(n, r)| {
            let zones: Vec<String> = r.zones.iter().map(|z| url(project, &format!("zones/{z}"))).collect();
            json!({
                "kind": "compute#region", "id": (1000 + n).to_string(), "name": r.name, "status": "UP",
                "zones": zones, "selfLink": url(project, &format!("regions/{}", r.name)),
                "quotas": [
                    {"metric": "CPUS", "limit": r.limits.cpus, "usage": r.usage.cpus},
                    {"metric": "INSTANCES", "limit": r.limits.instances as f64, "usage": r.usage.instances as f64},
                ],
            })
        })
        .collect();
    json!({"kind": "compute#regionList", "items": items, "selfLink": url(project, "regions")})
}
