//! Unit tests of `filter.rs`.

use super::*;

#[test]
fn every_supported_form_parses() {
    for f in [
        r#"name = "vm-1""#,
        r#"labels.pool="p1""#,
        r#"(labels.pool = "p1") (name != "vm-2")"#,
        r#"labels.owner:* AND status = RUNNING"#,
        "name eq vm-.*",
        "",
    ] {
        Filter::parse(f).unwrap_or_else(|e| panic!("{f}: {e}"));
    }
    for bad in [r#"name = "x"#, "name", "zone = x", "name eq ("] {
        assert!(Filter::parse(bad).is_err(), "{bad}");
    }
}
