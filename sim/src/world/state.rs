//! The whole state as `/sim/state` returns it.

use super::*;

/// The state as `/sim/state` returns it: instances, bots, operations, insert audit.
pub fn state_json(w: &World) -> Value {
    let instances: Vec<Value> = w
        .instances
        .iter()
        .map(|((p, z, n), i)| {
            json!({"project": p, "zone": z, "name": n, "id": i.id.to_string(), "status": i.status.name(),
                   "labels": i.labels, "swarming": i.swarming, "neverBoots": i.never_boots, "deleting": i.deleting,
                   "created": ts(i.created)})
        })
        .collect();
    let bots: Vec<Value> = w
        .bots
        .iter()
        .flat_map(|(server, bots)| {
            bots.keys().map(move |id| {
                let mut v = w.bot_json(server, id).expect("listed");
                v["server"] = json!(server);
                v
            })
        })
        .collect();
    let mut ops: Vec<&Operation> = w.operations.values().collect();
    ops.sort_by(|a, b| a.name.cmp(&b.name));
    let operations: Vec<Value> = ops
        .iter()
        .map(|op| {
            json!({"name": op.name, "project": op.project, "zone": op.zone, "type": op.kind, "target": op.target,
                   "status": op.status, "error": op.error, "requestId": op.request_id})
        })
        .collect();
    let mut inserts: Vec<Value> = w
        .inserts
        .iter()
        .map(|((p, z, n), ids)| json!({"project": p, "zone": z, "name": n, "requestIds": ids}))
        .collect();
    inserts.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    json!({"now": ts(w.now_utc()), "instances": instances, "bots": bots, "operations": operations, "inserts": inserts})
}
