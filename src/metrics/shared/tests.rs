//! `fleet_vms`'s states partition a Config's VMs, whatever its counts' overlaps.

use gce_backend_jobs::model::Counts;

use super::partition;

#[test]
fn the_states_count_each_vm_once_and_sum_to_the_configs_vms() {
    // 12 VMs: 2 without an instance, 1 down, 2 kept warm, 3 up without a healthy bot, 4
    // connected; the flags (draining, bot dead, unhealthy) overlap those and are not states.
    let n = Counts {
        unknown: Default::default(),
        configured: 12,
        vms: 12,
        created: 10,
        running: 7,
        connected: 4,
        draining: 3,
        dead: 1,
        unhealthy: 2,
        parked: 2,
        at: None,
    };
    let states = partition(&n);
    assert_eq!(states, [("creating", 2), ("down", 1), ("warm", 2), ("booting", 3), ("connected", 4)]);
    assert_eq!(states.iter().map(|(_, v)| v).sum::<u32>(), n.vms);
}

#[test]
fn counts_out_of_step_never_make_a_state_negative() {
    let n = Counts { vms: 1, created: 2, running: 3, connected: 4, ..Counts::default() };
    assert_eq!(partition(&n), [("creating", 0), ("down", 0), ("warm", 0), ("booting", 0), ("connected", 4)]);
    let n = Counts { vms: 2, created: 2, running: 2, parked: 1, ..Counts::default() };
    assert_eq!(
        partition(&n).iter().map(|(_, v)| v).sum::<u32>(),
        2,
        "a parked VM counted as running is counted once"
    );
}
