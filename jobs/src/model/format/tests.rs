//! Tests of `model::format`.

use super::*;
use crate::model::{ConfigRecord, Vm};

#[test]
fn a_newer_format_is_left_alone_and_only_bytes_that_are_no_record_are_corrupt() {
    assert!(decode::<Vm>(r#"{"id":"a-0","config":"a","index":0,"hostname":"a-0-x","attributes":{},"swarming":"","lifetime":1,"timeout":1,"revision":"r","configured":"2026-01-01T00:00:00Z"}"#).is_ok(), "a record from before formats is format 1");
    let newer = r#"{"id":"a-0","format":2,"placement":{"new":"rule"}}"#;
    assert_eq!(decode::<Vm>(newer).unwrap_err(), Undecoded::Newer(2), "even where it does not decode here");
    let rec = ConfigRecord { format: Format(FORMAT + 1), ..Default::default() };
    let raw = serde_json::to_string(&rec).unwrap();
    assert_eq!(decode::<ConfigRecord>(&raw).unwrap_err(), Undecoded::Newer(FORMAT + 1));
    assert!(matches!(decode::<Vm>("not json"), Err(Undecoded::Corrupt(_))));
    assert!(matches!(decode::<Vm>(r#"{"format":1,"id":3}"#), Err(Undecoded::Corrupt(_))));
    assert_eq!(
        serde_json::to_value(Vm::default()).unwrap()["format"],
        FORMAT,
        "a new record says its format"
    );
}
