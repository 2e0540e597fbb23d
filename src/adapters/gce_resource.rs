//! The Compute Engine Instance resource of an [`InstanceSpec`], and the instance templates and
//! bulk inserts made of them: the one place that knows Compute's wire format for what the
//! service creates (the official client decodes it).

use gce_backend_jobs::ports::compute::{BulkSpec, InstanceSpec, TemplateSpec};
use serde_json::{Value, json};

/// Compute's Instance resource (its JSON) for `spec`.
pub fn resource(spec: &InstanceSpec) -> Value {
    let a = &spec.attributes;
    let disks: Vec<Value> = a
        .disk
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let mut init = json!({});
            if d.size > 0 {
                init["diskSizeGb"] = json!(d.size.to_string());
            }
            if !d.image.is_empty() {
                init["sourceImage"] = json!(d.image);
            }
            if !d.kind.is_empty() {
                init["diskType"] = json!(d.kind);
            }
            if let Some(iops) = d.provisioned_iops {
                init["provisionedIops"] = json!(iops.to_string());
            }
            if let Some(t) = d.provisioned_throughput {
                init["provisionedThroughput"] = json!(t.to_string());
            }
            let mut disk = json!({"autoDelete": true, "boot": i == 0, "initializeParams": init});
            if d.kind.ends_with("/local-ssd") {
                disk["type"] = json!("SCRATCH");
            }
            if !d.interface.is_empty() {
                disk["interface"] = json!(d.interface);
            }
            disk
        })
        .collect();
    let items: Vec<Value> = spec.metadata.iter().map(|(k, v)| json!({"key": k, "value": v})).collect();
    let nics: Vec<Value> = a
        .network_interface
        .iter()
        .map(|n| {
            let mut nic = json!({"network": n.network});
            if !n.subnetwork.is_empty() {
                nic["subnetwork"] = json!(n.subnetwork);
            }
            if !n.stack_type.is_empty() {
                nic["stackType"] = json!(n.stack_type);
            }
            let acs: Vec<Value> =
                n.access_config.iter().map(|ac| json!({"type": ac.kind, "name": "External NAT"})).collect();
            if !acs.is_empty() {
                nic["accessConfigs"] = json!(acs);
            }
            nic
        })
        .collect();
    let mut body = json!({
        "name": spec.name,
        "machineType": a.machine_type,
        "disks": disks,
        "metadata": {"items": items},
        "networkInterfaces": nics,
        "labels": spec.labels,
    });
    if !a.service_account.is_empty() {
        body["serviceAccounts"] = json!(
            a.service_account
                .iter()
                .map(|s| json!({"email": s.email, "scopes": s.scope}))
                .collect::<Vec<_>>()
        );
    }
    if !a.tag.is_empty() {
        body["tags"] = json!({"items": a.tag});
    }
    if !a.min_cpu_platform.is_empty() {
        body["minCpuPlatform"] = json!(a.min_cpu_platform);
    }
    let affinities = a.scheduling.as_ref().map(|s| s.node_affinity.as_slice()).unwrap_or_default();
    if !affinities.is_empty()
        || a.enable_confidential_compute
        || a.terminate_on_maintenance
        || a.preemptible()
    {
        let mut sched = json!({});
        if !affinities.is_empty() {
            sched["nodeAffinities"] = json!(
                affinities
                    .iter()
                    .map(|n| json!({"key": n.key, "operator": n.operator, "values": n.values}))
                    .collect::<Vec<_>>()
            );
        }
        if a.enable_confidential_compute || a.terminate_on_maintenance || a.preemptible() {
            sched["onHostMaintenance"] = json!("TERMINATE");
        }
        // Spot and preemptible instances cannot restart by themselves.
        if a.provisioning_model == "SPOT" {
            sched["provisioningModel"] = json!("SPOT");
        }
        if a.preemptible {
            sched["preemptible"] = json!(true);
        }
        if a.preemptible() {
            sched["automaticRestart"] = json!(false);
        }
        if !a.instance_termination_action.is_empty() {
            sched["instanceTerminationAction"] = json!(a.instance_termination_action);
        }
        body["scheduling"] = sched;
    }
    if a.disable_integrity_monitoring || a.enable_secure_boot || a.disable_vtpm {
        body["shieldedInstanceConfig"] = json!({
            "enableIntegrityMonitoring": !a.disable_integrity_monitoring,
            "enableSecureBoot": a.enable_secure_boot,
            "enableVtpm": !a.disable_vtpm,
        });
    }
    if a.enable_confidential_compute {
        body["confidentialInstanceConfig"] = json!({"enableConfidentialCompute": true});
    }
    body
}

/// The last segment of a resource path (`zones/z/machineTypes/e2-small` → `e2-small`).
fn short(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Compute's `InstanceProperties` (its JSON) of `spec`: the instance as [`resource`] has it,
/// with no name, and with machine and disk types by name (zone-free, as templates and bulks
/// want them).
pub fn properties(spec: &InstanceSpec) -> Value {
    let mut properties = resource(spec);
    if let Value::Object(o) = &mut properties {
        o.remove("name");
    }
    properties["machineType"] = json!(short(&spec.attributes.machine_type));
    if let Some(disks) = properties["disks"].as_array_mut() {
        for d in disks {
            if let Some(kind) = d["initializeParams"]["diskType"].as_str().map(str::to_owned) {
                d["initializeParams"]["diskType"] = json!(short(&kind));
            }
        }
    }
    properties
}

/// Compute's `InstanceTemplate` (its JSON) of `spec`: its name, description and properties.
pub fn template(spec: &TemplateSpec) -> Value {
    json!({"name": spec.name, "description": spec.description, "properties": properties(&spec.instance)})
}

/// The JSON Merge Patch (RFC 7396) that makes `to` of `from`: what differs, objects patched key
/// by key, anything else replaced whole. `None` when a field of `from` would have to go (a
/// `null`, which the client's types cannot carry).
fn patch(from: &Value, to: &Value) -> Option<Value> {
    let (Value::Object(f), Value::Object(t)) = (from, to) else { return Some(to.clone()) };
    if f.keys().any(|k| !t.contains_key(k)) {
        return None;
    }
    let mut out = serde_json::Map::new();
    for (k, tv) in t {
        match f.get(k) {
            Some(fv) if fv == tv => {}
            Some(fv) if fv.is_object() && tv.is_object() => {
                out.insert(k.clone(), patch(fv, tv)?);
            }
            _ => {
                out.insert(k.clone(), tv.clone());
            }
        }
    }
    Some(Value::Object(out))
}

/// Compute's `BulkInsertInstanceResource` (its JSON) making `spec.names`: one
/// `perInstanceProperties` entry per name, and `minCount` 1, so what can be made is made and the
/// rest is told apart by name. With a template, it is the source and `instanceProperties` holds
/// only what differs from it (the batch label, say); without one, or when a difference is a
/// field to remove, `instanceProperties` is the whole instance ([`properties`]) and no template
/// is named.
pub fn bulk(spec: &BulkSpec) -> Value {
    let whole = properties(&spec.instance);
    let each: serde_json::Map<String, Value> = spec.names.iter().map(|n| (n.clone(), json!({}))).collect();
    let mut body = json!({
        "count": spec.names.len().to_string(),
        "minCount": "1",
        "perInstanceProperties": each,
    });
    let from = spec.template.as_ref().and_then(|t| Some((&t.name, patch(&properties(&t.instance), &whole)?)));
    match from {
        Some((name, differs)) => {
            body["sourceInstanceTemplate"] = json!(format!("global/instanceTemplates/{name}"));
            body["instanceProperties"] = differs;
        }
        None => body["instanceProperties"] = whole,
    }
    body
}

#[cfg(test)]
mod tests;
