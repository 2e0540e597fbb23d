//! Unit tests of `providers/static_machines.rs`.

use crate::config::Config;

fn listed(machines: &[&str]) -> Config {
    Config {
        prefix: "lab".into(),
        swarming: "https://s".into(),
        machines: Some(machines.iter().map(|m| (*m).to_owned()).collect()),
        ..Config::default()
    }
}

#[test]
fn a_list_of_hostnames_is_a_valid_static_config_and_bad_ones_are_named() {
    assert!(listed(&["mac-1", "mac-2.lab.example.com"]).problems().is_empty());
    assert!(listed(&[]).problems().is_empty(), "an empty list is valid: the pool is drained");
    let bad = listed(&["Mac-1", "mac-2", "mac-2", "lab-3-abcd", "-x"]);
    let fields: Vec<String> =
        bad.problems().into_iter().map(|e| format!("{}: {}", e.field, e.rule)).collect();
    assert_eq!(fields.len(), 4, "{fields:?}");
    assert!(fields[0].starts_with("lab.machines[0]: must be a lowercase hostname"));
    assert!(fields[1].starts_with("lab.machines[2]: is listed twice"));
    assert!(fields[2].starts_with("lab.machines[3]: has the shape"));
    assert!(fields[3].starts_with("lab.machines[4]: must be"));
    let mut c = listed(&["mac-1"]);
    c.amount.min = 2;
    c.amount.max = 2;
    c.attributes.zone = "z".into();
    let fields: Vec<String> = c.problems().into_iter().map(|e| e.field).collect();
    assert_eq!(fields, ["lab.amount", "lab.attributes"]);
}
