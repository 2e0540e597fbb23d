//! Unit tests of `model/api.rs`.

use super::*;
use crate::model::{Fault, FaultKind, Placed};

#[test]
fn the_state_of_a_vm_follows_its_record() {
    let at = DateTime::<Utc>::default();
    let placed = Placed {
        url: "u".into(),
        created: at,
        instance_id: String::new(),
        internal_ip: String::new(),
        external_ip: String::new(),
    };
    let made = Vm { instance: Some(placed), ..Vm::default() };
    let fault = Some(Fault { kind: FaultKind::BotDead, detail: "dead".into(), at });
    let cases = [
        ("new", Vm::default(), VmState::Creating),
        ("instance", made.clone(), VmState::Running),
        ("connected", Vm { connected: Some(at), ..made.clone() }, VmState::Connected),
        ("drained", Vm { drained: true, ..made.clone() }, VmState::Draining),
        ("drained unsent", Vm { drained: true, ..Vm::default() }, VmState::Draining),
        (
            "terminating",
            Vm { terminate_sent: Some(at), connected: Some(at), ..made.clone() },
            VmState::Draining,
        ),
        ("destroying", Vm { destroying: Some(at), ..made.clone() }, VmState::Draining),
        ("fault", Vm { fault, connected: Some(at), ..made }, VmState::Unhealthy),
    ];
    for (name, vm, want) in cases {
        assert_eq!(VmState::of(&vm), want, "{name}");
    }
}

#[test]
fn state_names_parse_and_an_unknown_one_lists_the_valid_names() {
    for s in VmState::ALL {
        assert_eq!(s.name().parse::<VmState>(), Ok(s));
        assert_eq!(serde_json::to_value(s).unwrap(), s.name());
    }
    let e = "dead".parse::<VmState>().unwrap_err().to_string();
    assert!(e.contains("\"dead\"") && e.contains("creating, running, connected, draining, unhealthy"), "{e}");
}

#[test]
fn a_plan_input_refuses_unknown_fields() {
    assert!(serde_json::from_str::<PlanInput>(r#"{"amount": 3}"#).is_ok());
    assert!(serde_json::from_str::<PlanInput>(r#"{"amonut": 3}"#).is_err());
}
