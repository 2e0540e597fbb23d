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
