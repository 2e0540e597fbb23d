//! Tests of `unknown`.

use super::*;

#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
struct Inner {
    a: u32,
    #[serde(flatten)]
    unknown: Unknown,
}

#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
struct Outer {
    name: String,
    inner: Inner,
    list: Vec<Inner>,
    #[serde(flatten)]
    unknown: Unknown,
}

#[test]
fn unknown_fields_are_kept_at_every_level_and_written_back() {
    let raw = r#"{"name":"x","inner":{"a":1,"b":[1,{"c":2}]},"list":[{"a":2,"d":null}],"e":"f"}"#;
    let mut o: Outer = serde_json::from_str(raw).unwrap();
    o.name = "y".into();
    o.list[0].a = 3;
    let back: Value = serde_json::to_value(&o).unwrap();
    assert_eq!(back["inner"]["b"], serde_json::json!([1, {"c": 2}]));
    assert_eq!(back["list"][0]["d"], Value::Null);
    assert_eq!(back["list"][0]["a"], 3);
    assert_eq!(back["e"], "f");
    assert_eq!(back["name"], "y");
}

#[test]
fn strictly_refuses_an_unknown_field_naming_it_and_restores_tolerance() {
    let raw = r#"{"name":"x","inner":{"a":1,"amout":2}}"#;
    let e = strictly(|| serde_json::from_str::<Outer>(raw)).unwrap_err().to_string();
    assert!(e.contains("unknown field `amout`"), "{e}");
    assert_eq!(unknown_field_named("unknown field `amout`"), Some("amout"));
    assert!(serde_json::from_str::<Outer>(raw).is_ok(), "tolerant again once the strict read is over");
}

#[test]
fn the_future_field_is_written_only_when_storing_in_a_test_build() {
    set_future(true);
    let o = Outer { inner: Inner { a: 1, ..Default::default() }, ..Default::default() };
    let plain = serde_json::to_value(&o).unwrap();
    let kept = stored(|| serde_json::to_value(&o)).unwrap();
    set_future(false);
    assert!(plain.get(FUTURE_FIELD).is_none(), "an API answer or a hash is not a store write");
    assert!(kept[FUTURE_FIELD]["nested"]["kept"] == true && kept["inner"].get(FUTURE_FIELD).is_some());
}
