//! Stored records written by another build: a field this build does not know, at any level of
//! any stored type, survives decode → change → encode (a rolling upgrade or a rollback loses
//! nothing another build stored). Property tests: the unknown field's name, value and the
//! objects it is put in are drawn at random.

use gce_backend_jobs::model::{
    AuditEntry, Backoff, ConfigRecord, Counts, ErrorEntry, FileError, Observed, Pause, Sample, Vm,
};
use proptest::prelude::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

const T: &str = "2026-12-06T10:00:00Z";

/// Objects that are maps (their keys are data, not fields): nothing is put in them.
const MAPS: &[&str] = &["label", "dimensions", "values", "slots"];

/// Every object of `v` that is a struct, by path.
fn struct_paths(v: &Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        Value::Object(m) => {
            if path.last().is_none_or(|k| !MAPS.contains(&k.as_str())) {
                out.push(path.clone());
            }
            for (k, c) in m {
                path.push(k.clone());
                struct_paths(c, path, out);
                path.pop();
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                path.push(i.to_string());
                struct_paths(c, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

fn at<'a>(v: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |v, k| match v {
        Value::Object(m) => m.get_mut(k),
        Value::Array(a) => a.get_mut(k.parse::<usize>().ok()?),
        _ => None,
    })
}

/// A JSON value a newer build might store: any leaf, or a list or object of them.
fn any_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
        "[a-z ]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 1..3).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{1,6}", inner, 1..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Puts `name: value` in the struct objects of `sample` that `pick` selects (at least one), as a
/// newer build would write the record; decodes it with `decode`, applies `change`, encodes it
/// again, and checks that every field put in is still there, unchanged.
fn survives<T: Serialize + DeserializeOwned>(
    sample: &Value,
    name: &str,
    value: &Value,
    pick: &[bool],
    decode: impl Fn(&str) -> Result<T, String>,
    change: impl Fn(&mut T),
) -> Result<(), TestCaseError> {
    let mut paths = Vec::new();
    struct_paths(sample, &mut Vec::new(), &mut paths);
    let chosen: Vec<&Vec<String>> =
        paths.iter().enumerate().filter(|(i, _)| *i == 0 || pick[i % pick.len()]).map(|(_, p)| p).collect();
    let mut newer = sample.clone();
    for p in &chosen {
        if let Some(Value::Object(m)) = at(&mut newer, p) {
            m.insert(name.to_owned(), value.clone());
        }
    }
    let mut rec =
        decode(&newer.to_string()).map_err(|e| TestCaseError::fail(format!("does not decode: {e}")))?;
    change(&mut rec);
    let mut back = serde_json::to_value(&rec).unwrap();
    for p in &chosen {
        let kept = at(&mut back, p).and_then(|o| o.get(name)).cloned();
        prop_assert_eq!(kept.as_ref(), Some(value), "field {} at /{} lost", name, p.join("/"));
    }
    Ok(())
}

fn plain<T: DeserializeOwned>(raw: &str) -> Result<T, String> {
    serde_json::from_str(raw).map_err(|e| e.to_string())
}

fn attributes() -> Value {
    json!({
        "disk": [{"image": "projects/p/global/images/i", "size": 20, "type": "pd-ssd"}],
        "machine_type": "e2-standard-2",
        "metadata": [{"from_text": "k:v"}],
        "network_interface": [{"access_config": [{"type": "ONE_TO_ONE_NAT"}], "network": "default"}],
        "project": "p",
        "service_account": [{"email": "sa@p.iam.gserviceaccount.com", "scope": ["s"]}],
        "tag": ["t"],
        "zone": "us-central1-b",
        "scheduling": {"node_affinity": [{"key": "k", "operator": "IN", "values": ["v"]}]},
    })
}

fn vm() -> Value {
    json!({
        "id": "linux-3", "config": "linux", "index": 3, "hostname": "linux-3-ab12",
        "attributes": attributes(), "swarming": "https://swarm.example.com", "lifetime": 86400,
        "timeout": 600, "revision": "r1", "configured": T, "insert_sent": T,
        "instance": {"url": "https://compute/p/zones/z/instances/linux-3-ab12", "created": T,
                     "instance_id": "123", "internal_ip": "10.0.0.3", "external_ip": ""},
        "connected": T,
        "fault": {"kind": "bot_dead", "detail": "bot dead since then", "at": T},
        "parked": {"how": "suspend", "since": T, "turns": 1},
    })
}

fn config_record() -> Value {
    json!({
        "config": {
            "prefix": "linux",
            "amount": {"min": 2, "max": 4, "change": [{"start": {"day": "MONDAY", "time": "09:00"}, "length": 3600, "min": 3}]},
            "attributes": attributes(),
            "zones": [{"zone": "us-central1-b", "weight": 2}],
            "lifetime": 86400, "timeout": 600, "swarming": "https://swarm.example.com", "owner": ["team"],
            "breaker": {"after": 5, "within": 600, "canary_after": 5},
            "update": {"mode": "rolling", "max_surge": 1, "max_unavailable": 0},
            "demand": {"dimensions": {"pool": "ci"}, "per_bot": 1, "min_idle": 0, "idle_timeout": 300},
            "warm": {"suspended": 1, "stopped": 0},
            "spot_failover": {"more_than": 3, "within": 600, "cooldown": 1800},
        },
        "revision": "r1", "current_amount": 2, "source": "linux.yaml",
        "paused": {"by": "ops", "reason": "r", "at": T},
        "rollout": {"since": T, "updated": 1, "outdated": 1},
        "breaker": {"failed_in_a_row": 2, "since": T,
                    "open": {"since": T, "reason": "r", "canaries": 0, "next_canary": T}},
        "demand": {"at": T, "pending": 1, "busy": 1, "idle": 0, "idle_long": 0, "live": 1, "target": 2, "why": "w"},
        "spot": {"events": [{"key": "linux-1", "kind": "preempted", "at": T}],
                 "failover": {"since": T, "until": T, "preempted": 3, "refused": 0}},
        "resources": [{"revision": "r1", "name": "gce-backend-linux-r1", "since": T}],
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn a_vm_record_keeps_what_a_newer_build_stored(
        name in "zz_[a-z]{1,8}", value in any_value(), pick in prop::collection::vec(any::<bool>(), 1..8),
    ) {
        survives(&vm(), &name, &value, &pick, |raw| Vm::decode(raw).map_err(|e| e.to_string()), |v: &mut Vm| {
            v.drained = true;
            v.destroy_attempt += 1;
        })?;
    }

    #[test]
    fn a_config_record_keeps_what_a_newer_build_stored(
        name in "zz_[a-z]{1,8}", value in any_value(), pick in prop::collection::vec(any::<bool>(), 1..8),
    ) {
        survives(&config_record(), &name, &value, &pick, plain::<ConfigRecord>, |c: &mut ConfigRecord| {
            c.current_amount += 1;
            c.config.lifetime.0 += 60;
        })?;
    }

    #[test]
    fn status_records_keep_what_a_newer_build_stored(
        name in "zz_[a-z]{1,8}", value in any_value(), pick in prop::collection::vec(any::<bool>(), 1..8),
    ) {
        let bot = json!({"bot": {"id": "linux-3-ab12", "first_seen": T, "last_seen": T, "is_dead": false,
                                 "deleted": false, "termination_task_id": ""}, "at": T});
        survives(&bot, &name, &value, &pick, plain::<Observed>, |o: &mut Observed| o.bot.is_dead = true)?;
        let e = json!({"time": T, "stage": "create_instance", "code": "QUOTA_EXCEEDED", "message": "m",
                       "zone": "z", "operation": "o"});
        survives(&e, &name, &value, &pick, plain::<ErrorEntry>, |e: &mut ErrorEntry| e.resolved = Some(e.time))?;
        let a = json!({"at": T, "actor": "ops", "action": "update", "prefix": "linux", "before_revision": "a",
                       "after_revision": "b", "detail": "amount 3 → 5", "owner": ["team"]});
        survives(&a, &name, &value, &pick, plain::<AuditEntry>, |a: &mut AuditEntry| a.detail.push('!'))?;
        let c = json!({"configured": 3, "vms": 3, "created": 3, "running": 3, "connected": 2, "draining": 0, "at": T});
        survives(&c, &name, &value, &pick, plain::<Counts>, |c: &mut Counts| c.connected += 1)?;
        let b = json!({"project": "p", "zone": "z", "until": T, "failures": 1, "reason": "QUOTA_EXCEEDED"});
        survives(&b, &name, &value, &pick, plain::<Backoff>, |b: &mut Backoff| b.failures += 1)?;
        let p = json!({"by": "ops", "reason": "r", "at": T});
        survives(&p, &name, &value, &pick, plain::<Pause>, |p: &mut Pause| p.reason.push('!'))?;
        let s = json!({"at": T, "values": {"connected": 3}});
        survives(&s, &name, &value, &pick, plain::<Sample>, |s: &mut Sample| { s.values.insert("vms".into(), 3); })?;
        let f = json!({"path": "a.yaml", "prefix": "a", "since": T, "message": "m"});
        survives(&f, &name, &value, &pick, plain::<FileError>, |f: &mut FileError| f.message.push('!'))?;
    }

    #[test]
    fn a_payload_from_a_newer_build_is_read(name in "zz_[a-z]{1,8}", value in any_value()) {
        use gce_backend_jobs::tasks::*;
        let raw = json!({"id": "linux-3", "hostname": "linux-3-ab12", &name: value}).to_string();
        let t: TerminateBot = serde_json::from_str(&raw).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(t.hostname, "linux-3-ab12");
    }
}
