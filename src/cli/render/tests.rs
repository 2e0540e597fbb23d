//! Unit tests of `cli/render.rs`.

use serde_json::json;

#[test]
fn tables_align_and_show_dashes_for_nothing() {
    let t = super::queues(&json!({"queues": [
        {"name": "create_vm", "counts": {"pending": 3, "delayed": 0, "running": 1, "dead": 0, "done": 12,
            "retried": 4, "failed": 1, "expired": 0}},
        {"name": "x", "counts": {}},
    ]}));
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(
        lines[0],
        "QUEUE      PENDING  DELAYED  RUNNING  DEAD  DONE (EVER)  RETRIED (EVER)  FAILED (EVER)  LEASES LOST (EVER)"
    );
    assert_eq!(
        lines[1],
        "create_vm  3        0        1        0     12           4               1              0"
    );
    assert_eq!(
        lines[2],
        "x          -        -        -        -     -            -               -              -"
    );
}

#[test]
fn a_task_reads_as_its_state_key_config_error_and_runs() {
    let t = super::task(&json!({
        "task_id": "abc", "queue": "create_instance", "key": "linux-3", "state": "exception",
        "reason": "failed", "attempts": 2, "retries": 1, "created": "2026-12-07T08:00:00.123Z",
        "run_at": null, "resolved": "2026-12-07T08:01:00Z", "last_error": "503 Service Unavailable",
        "config": "linux", "may_retry": true,
        "runs": [
            {"run_id": 1, "worker_id": "w-1", "started": "2026-12-07T08:00:01Z", "resolved": "2026-12-07T08:00:02Z", "outcome": "failed"},
            {"run_id": 2, "worker_id": "w-2", "started": "2026-12-07T08:00:30Z", "resolved": null, "outcome": null},
        ],
    }));
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines[0], "abc of create_instance: exception (failed)", "{t}");
    assert_eq!(lines[1], "  key linux-3  Config linux  attempts 2  retries 1", "{t}");
    assert_eq!(lines[2], "  created 2026-12-07T08:00:00Z  runs at -  resolved 2026-12-07T08:01:00Z", "{t}");
    assert_eq!(lines[3], "  last error: 503 Service Unavailable", "{t}");
    assert_eq!(lines[4], "RUN  WORKER  STARTED               RESOLVED              OUTCOME", "{t}");
    assert_eq!(lines[6], "2    w-2     2026-12-07T08:00:30Z  -                     -", "{t}");
}

#[test]
fn the_configs_table_shows_failures_dead_tasks_the_pause_reason_and_a_readable_error() {
    let t = super::configs(&json!({"configs": [{
        "config": {"prefix": "linux"}, "amount": 3,
        "status": {"source": "api", "state": "active", "counts": {"created": 3, "connected": 2, "draining": 0},
            "task_failures": 7, "dead_tasks": 2, "paused": {"by": "bob", "reason": "image broken"},
            "pause_in_force": {"by": "bob", "reason": "image broken"},
            "errors": [
                {"stage": "create_instance", "code": "503", "message": "backend error", "resolved": null},
                {"stage": "create_instance", "code": "409", "message": "old", "resolved": "2026-01-01T00:00:00Z"},
            ]},
    }]}));
    let lines: Vec<&str> = t.lines().collect();
    // Counted since the Config was made, not now: labelled so.
    assert!(lines[0].contains("FAILURES (EVER)  DEAD (EVER)  PAUSED"), "{t}");
    assert!(lines[1].contains("7                2            yes (bob: image broken)"), "{t}");
    assert!(lines[1].ends_with("create_instance: 503 backend error"), "{t}");
}

#[test]
fn configs_get_marks_the_errors_already_resolved() {
    let t = super::config(&json!({"config": {"prefix": "linux"}, "amount": 1, "status": {
    "state": "active", "counts": {},
    "errors": [
        {"time": "2026-01-01T00:02:00Z", "stage": "destroy_instance", "code": "503",
         "message": "503 Service Unavailable: m (×4 within this attempt)"},
        {"time": "2026-01-01T00:01:00Z", "stage": "create_instance", "code": "409", "message": "old",
         "resolved": "2026-01-01T00:03:00.250Z"},
    ]}}));
    let errors: Vec<&str> = t.lines().filter(|l| l.starts_with("  error ")).collect();
    assert_eq!(
        errors,
        [
            "  error 2026-01-01T00:02:00Z 503 (destroy_instance): 503 Service Unavailable: m (×4 within this attempt)",
            "  error 2026-01-01T00:01:00Z 409 (create_instance, resolved 2026-01-01T00:03:00Z): old",
        ]
    );
}

#[test]
fn configs_get_says_its_failures_and_dead_tasks_are_counted_ever() {
    let t = super::config(
        &json!({"config": {"prefix": "linux"}, "status": {"task_failures": 7, "dead_tasks": 2}}),
    );
    assert!(t.contains("\n  task failures (ever) 7  dead tasks (ever) 2\n"), "{t}");
}

#[test]
fn bulk_operations_say_whose_tasks_they_were() {
    let tasks = [json!({"config": "linux"}), json!({"config": "linux"}), json!({"config": null})];
    assert_eq!(super::by_config(&tasks), "linux 2, no Config 1");
    let line = super::affected(&json!({"count": 3}), &tasks, "dead task(s) of create_vm dropped");
    assert_eq!(line, "3 dead task(s) of create_vm dropped (linux 2, no Config 1)");
    let t = super::global_pause(&json!({
        "pause": {"by": "ops", "at": "2026-11-26T00:00:00Z", "reason": "outage"},
        "configs": [{"config": {"prefix": "linux"}, "status": {"pause_in_force": {"by": "ops", "reason": "outage"}}}],
    }));
    assert_eq!(t.lines().next(), Some("every Config paused by ops at 2026-11-26T00:00:00Z: outage"));
    assert!(t.contains("linux   all (ops: outage)"), "{t}");
}

#[test]
fn the_history_table_shows_who_did_what_newest_first() {
    let t = super::history(&json!({"entries": [
        {"at": "2026-11-21T10:05:00Z", "actor": "alice", "action": "amount", "prefix": "web",
         "before_revision": "0123456789abcdef", "after_revision": "0123456789abcdef", "detail": "amount 1 → 3"},
        {"at": "2026-11-21T10:00:00Z", "actor": "file:web.yaml", "action": "create", "prefix": "web",
         "before_revision": null, "after_revision": "0123456789abcdef", "detail": ""},
    ]}));
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines[0], "AT                    ACTOR          ACTION  PREFIX  BEFORE    AFTER     DETAIL");
    assert_eq!(
        lines[1],
        "2026-11-21T10:05:00Z  alice          amount  web     01234567  01234567  amount 1 → 3"
    );
    assert_eq!(lines[2], "2026-11-21T10:00:00Z  file:web.yaml  create  web     -         01234567  -");
}

#[test]
fn a_plan_names_each_vm_and_the_waves_of_its_replacement() {
    let t = super::plan(&json!({
        "prefix": "web", "amount": 3, "create": [], "drain": [], "keep": [],
        "replace": ["web-0", "web-1", "web-2"], "recycle": [],
        "replacement": {"by": "rolling_update", "at_once": 1, "surge": ["web-3"], "min_connected": 3},
        "changes": [{"field": "attributes.machine_type", "from": "a", "to": "b",
                     "applies_to": "existing VMs, replaced now"}],
        "problems": [],
    }));
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines[0], "web: amount 3; create 0, drain 0, replace 3, recycle 0, keep 0");
    assert_eq!(
        lines[1],
        "  replace 3 (rolling update: web-3 made first from the new attributes and drained at the end; \
         at most 1 at a time, keeping at least 3 bots connected; each drained after its task, then made \
         again): web-0, web-1, web-2"
    );
    assert_eq!(lines[2], "  attributes.machine_type: \"a\" -> \"b\" (applies to existing VMs, replaced now)");
    let t = super::plan(&json!({
        "prefix": "web", "amount": 2, "create": ["web-2"], "drain": [], "keep": ["web-1"],
        "recycle": [{"id": "web-0", "at": "2026-11-27T00:00:00Z"}], "changes": [], "problems": ["no"],
    }));
    assert!(t.contains("  create 1: web-2\n") && t.contains("  keep 1: web-1\n"), "{t}");
    assert!(
        t.contains("then made again with the Config's settings): web-0 (at 2026-11-27T00:00:00Z)\n"),
        "{t}"
    );
    assert!(t.ends_with("  problem: no\n"), "{t}");
}

#[test]
fn a_config_says_its_spot_failover_and_what_counts_toward_one() {
    let spot = |failover: serde_json::Value| {
        json!({"config": {"prefix": "spot"}, "amount": 3, "status": {"state": "active", "counts": {},
            "spot": {"failover": failover, "preempted": 1, "refused": 0, "more_than": 3, "within": 600,
                "cooldown": 1800, "preempted_total": 9, "refused_total": 2, "failovers_total": 2}}})
    };
    let t = super::config(&spot(json!({"since": "2026-11-26T12:00:00Z", "until": "2026-11-26T12:30:00Z",
        "preempted": 3, "refused": 1})));
    assert!(
        t.contains("  Spot failover: standard VMs until 2026-11-26T12:30:00Z (3 preemptions, 1 refusals in 10m); 2 failovers so far\n"),
        "{t}"
    );
    let t = super::config(&spot(serde_json::Value::Null));
    assert!(
        t.contains("  Spot: 1 preemptions, 0 refusals in the last 10m (more than 3 make standard VMs for 30m); 2 failovers so far\n"),
        "{t}"
    );
    assert!(
        !super::config(&json!({"config": {}, "status": {}})).contains("Spot"),
        "none without spot_failover"
    );
}

#[test]
fn a_config_with_ranks_shows_each_rank_and_a_vm_its_machine_type() {
    let t = super::config(
        &json!({"config": {"prefix": "ranked"}, "amount": 3, "status": {"state": "active", "counts": {},
        "ranks": [
            {"rank": 0, "machine_type": "n2-standard-2", "vms": 1, "connected": 1, "placed": 4,
             "backoffs": [{"project": "p", "zone": "us-central1-a", "until": "2026-11-26T12:30:00Z", "failures": 1, "reason": "ZONE_RESOURCE_POOL_EXHAUSTED"}]},
            {"rank": 1, "machine_type": "n2d-standard-2", "vms": 2, "connected": 1, "placed": 2}]}}),
    );
    assert!(
        t.contains("  rank 0 n2-standard-2  vms 1  connected 1  placed 4  backoff us-central1-a until 2026-11-26T12:30:00Z\n"),
        "{t}"
    );
    assert!(t.contains("  rank 1 n2d-standard-2  vms 2  connected 1  placed 2  backoff -\n"), "{t}");
    let vm = |rank: serde_json::Value| {
        json!({"vms": [{"vm": {"id": "ranked-0", "hostname": "ranked-0-abcd", "rank": rank,
            "attributes": {"zone": "z", "machine_type": "zones/z/machineTypes/n2d-standard-2"}}, "state": "connected"}]})
    };
    let t = super::vms(&vm(json!(1)));
    assert!(t.contains("MACHINE TYPE") && t.contains("n2d-standard-2 (rank 1)"), "{t}");
    let t = super::vms(&vm(serde_json::Value::Null));
    assert!(t.contains("n2d-standard-2") && !t.contains("(rank"), "no rank: the type alone\n{t}");
}

#[test]
fn a_vm_list_names_the_ids_let_go_and_says_why() {
    let vms = |gaps: serde_json::Value| {
        json!({"vms": [{"vm": {"id": "pool-b-14", "hostname": "pool-b-14-abcd", "attributes": {"zone": "z"}}, "state": "connected"},
                       {"vm": {"id": "pool-b-16", "hostname": "pool-b-16-abcd", "attributes": {"zone": "z"}}, "state": "connected"}],
               "letGo": gaps})
    };
    let t = super::vms(&vms(json!(["pool-b-15"])));
    assert!(t.contains("let go (no VM by choice") && t.ends_with(": pool-b-15\n"), "{t}");
    let t = super::vms(&vms(json!([])));
    assert!(!t.contains("let go"), "no gap, no line\n{t}");
}
