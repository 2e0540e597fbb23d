//! Unit tests of `model/api.rs`.

use super::*;
use crate::model::parked::{Park, Parked};
use crate::model::{Bot, Fault, FaultKind, Observed, Placed};

#[test]
fn the_state_of_a_vm_follows_its_record() {
    let at = DateTime::<Utc>::default();
    let placed = Placed {
        unknown: Default::default(),
        url: "u".into(),
        created: at,
        instance_id: String::new(),
        internal_ip: String::new(),
        external_ip: String::new(),
    };
    let made = Vm { instance: Some(placed), ..Vm::default() };
    let fault =
        Some(Fault { unknown: Default::default(), kind: FaultKind::BotDead, detail: "dead".into(), at });
    let parked = Parked {
        unknown: Default::default(),
        how: Park::Suspend,
        since: at,
        done: true,
        waking: None,
        operation: String::new(),
        turns: 1,
    };
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
        ("fault", Vm { fault, connected: Some(at), ..made.clone() }, VmState::Unhealthy),
        ("parked", Vm { parked: Some(parked.clone()), connected: Some(at), ..made.clone() }, VmState::Warm),
        (
            "waking",
            Vm { parked: Some(Parked { waking: Some(at), ..parked }), connected: Some(at), ..made },
            VmState::Connected,
        ),
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
    assert!(
        e.contains("\"dead\"") && e.contains("creating, running, connected, warm, draining, unhealthy"),
        "{e}"
    );
}

#[test]
fn a_plan_input_refuses_unknown_fields() {
    assert!(serde_json::from_str::<PlanInput>(r#"{"amount": 3}"#).is_ok());
    assert!(serde_json::from_str::<PlanInput>(r#"{"amonut": 3}"#).is_err());
}

#[test]
fn a_bots_state_follows_its_observation_else_the_record() {
    let at = DateTime::<Utc>::default();
    let seen = |b: Bot| Some(Observed { unknown: Default::default(), bot: b, at, idle_since: None });
    let connected_vm = Vm { connected: Some(at), ..Vm::default() };
    let cases = [
        ("never seen", Vm::default(), None, None),
        ("connected by the record", connected_vm.clone(), None, Some(BotState::Connected)),
        ("seen well", Vm::default(), seen(Bot::default()), Some(BotState::Connected)),
        ("dead", Vm::default(), seen(Bot { is_dead: true, ..Bot::default() }), Some(BotState::Dead)),
        (
            "deleted wins",
            connected_vm,
            seen(Bot { is_dead: true, deleted: true, ..Bot::default() }),
            Some(BotState::Deleted),
        ),
        (
            "terminating",
            Vm::default(),
            seen(Bot { termination_task_id: "t1".into(), ..Bot::default() }),
            Some(BotState::Terminating),
        ),
    ];
    for (what, vm, bot, want) in cases {
        assert_eq!(BotState::of(&vm, bot.as_ref()), want, "{what}");
        assert_eq!(VmView::of(vm, bot).bot_state, want, "{what}: the view carries it");
    }
}
