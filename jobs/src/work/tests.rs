//! Unit tests of `work.rs`.

use super::*;

#[test]
fn task_keys_map_to_their_config() {
    assert_eq!(config_of("expand_config", "linux").as_deref(), Some("linux"));
    assert_eq!(config_of("manage_bot", "linux-x-3").as_deref(), Some("linux-x"));
    assert_eq!(config_of("destroy_instance", "linux-3@https://x/linux-3-ab12").as_deref(), Some("linux"));
    assert_eq!(config_of("drain_vm", "linux-3@linux-3-ab12").as_deref(), Some("linux"));
    assert_eq!(config_of("audit_instances", "p/z"), None);
    assert_eq!(config_of("manage_bot", "garbage"), None);
}

#[test]
fn task_keys_name_their_vm_on_the_queues_keyed_by_vm() {
    assert_eq!(vm_of("create_instance", "linux-3"), Some("linux-3"));
    assert_eq!(vm_of("destroy_instance", "linux-3@https://x/linux-3-ab12"), Some("linux-3"));
    assert_eq!(vm_of("expand_config", "linux"), None, "a Config's queue");
    assert_eq!(vm_of("audit_instances", "p/z"), None);
    assert_eq!(vm_of("manage_bot", "garbage"), None);
}

#[test]
fn the_sooner_of_two_steps() {
    let ms = std::time::Duration::from_millis;
    assert_eq!(Next::Done.sooner(Next::After(ms(5))), Next::After(ms(5)));
    assert_eq!(Next::After(ms(5)).sooner(Next::Done), Next::After(ms(5)));
    assert_eq!(Next::After(ms(9)).sooner(Next::After(ms(5))), Next::After(ms(5)));
    assert_eq!(Next::Done.sooner(Next::Done), Next::Done);
}
