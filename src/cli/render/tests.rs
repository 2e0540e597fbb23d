//! Unit tests of `cli/render.rs`.

use serde_json::json;

#[test]
fn tables_align_and_show_dashes_for_nothing() {
    let t = super::queues(&json!({"queues": [
        {"name": "create_vm", "counts": {"pending": 3, "delayed": 0, "running": 1, "dead": 0, "done": 12}},
        {"name": "x", "counts": {}},
    ]}));
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines[0], "QUEUE      PENDING  DELAYED  RUNNING  DEAD  DONE");
    assert_eq!(lines[1], "create_vm  3        0        1        0     12");
    assert_eq!(lines[2], "x          -        -        -        -     -");
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
