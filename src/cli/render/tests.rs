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
