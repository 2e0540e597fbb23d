//! Unit tests of `engine/record.rs`.

use super::*;

#[test]
fn records_written_by_lua_decode() {
    let json = r#"{"k":"vm-1","s":"running","a":1,"m":5,"c":1763712000000,"d":0,"due":1763712000000,
        "tok":"w:1","runs":[{"n":1,"w":"w","g":"h","s":1763712000001}]}"#;
    let rec: Rec = serde_json::from_str(json).unwrap();
    let st = rec.status("7", "q", Some(1763712030000));
    assert_eq!(st.state, "running");
    assert_eq!(st.retries, 4);
    assert_eq!(st.runs[0].worker_group, "h");
    assert_eq!(st.taken_until.unwrap().timestamp_millis(), 1763712030000);
    let empty_runs = r#"{"k":"k","s":"pending","a":0,"m":1,"c":1,"d":0,"due":1,"runs":{}}"#;
    assert!(serde_json::from_str::<Rec>(empty_runs).unwrap().runs.is_empty());
}

#[test]
fn corrupt_text_is_clipped_on_a_character_boundary() {
    assert_eq!(clip("abc", 3), "abc");
    assert_eq!(clip("abcd", 3), "abc...");
    // 'é' is two bytes: a cut inside it backs off to before it.
    assert_eq!(clip("aé", 2), "a...");
    assert_eq!(raw_key(r#"{"k":"vm-1","s":1}"#).as_deref(), Some("vm-1"));
    assert_eq!(raw_key("{not json"), None);
    assert_eq!(raw_key("[1,2]"), None);
    assert!(decode(r#"{"k":"vm-1"}"#).is_none(), "a record lacking fields is corrupt");
    let st = corrupt_status("3", "q", "pending", "{not json");
    assert_eq!(
        (st.reason.as_str(), st.last_error.as_deref()),
        ("corrupt", Some("corrupt record: {not json"))
    );
}
