//! The idle-first rule.

use std::collections::BTreeSet;

use chrono::{TimeZone, Utc};

use super::*;

fn set(v: &[u32]) -> BTreeSet<u32> {
    v.iter().copied().collect()
}

/// The let-go set of a pool with no warm pool.
fn arrange(slots: u32, live: &[(u32, Standing)], taken: &BTreeSet<u32>, limit: u32) -> BTreeSet<u32> {
    let kept = BTreeSet::new();
    super::arrange(&Pool { slots, live, parked: &[], taken, limit, warm: 0, stock: 0, kept: &kept }).let_go
}

#[test]
fn equals_keep_the_lowest_indexes_and_let_nothing_go() {
    let live: Vec<_> = (0..5).map(|i| (i, Standing::Unknown)).collect();
    assert_eq!(arrange(3, &live, &set(&[]), 100), set(&[]));
    assert_eq!(arrange(5, &live, &set(&[]), 100), set(&[]));
}

#[test]
fn idle_bots_go_before_busy_ones_the_longest_idle_first() {
    let t = |m| Utc.with_ymd_and_hms(2026, 11, 27, 9, m, 0).unwrap();
    // 0 and 1 idle (0 since 9:05, 1 since 9:01), 2 and 3 busy, 4 booting.
    let live = [
        (0, Standing::Idle(t(5))),
        (1, Standing::Idle(t(1))),
        (2, Standing::Busy),
        (3, Standing::Busy),
        (4, Standing::Booting),
    ];
    // Keep 4: the longest idle (1) goes.
    assert_eq!(arrange(4, &live, &set(&[]), 100), set(&[1]));
    // Keep 3: both idle go, busy and booting stay.
    assert_eq!(arrange(3, &live, &set(&[]), 100), set(&[0, 1]));
    // Keep 2: the booting one goes too; only the busy stay.
    assert_eq!(arrange(2, &live, &set(&[]), 100), set(&[0, 1]));
    // Keep 1: one busy goes (the higher index), after its task.
    assert_eq!(arrange(1, &live, &set(&[]), 100), set(&[0, 1]));
    assert_eq!(arrange(0, &live, &set(&[]), 100), set(&[]));
}

#[test]
fn growth_fills_holes_whose_vm_is_gone_but_not_those_still_draining() {
    // Live 1 and 3; 0 gone, 2 still draining; want 4: 0 is made again, 2 skipped, 4 made.
    let live = [(1, Standing::Busy), (3, Standing::Busy)];
    assert_eq!(arrange(4, &live, &set(&[2]), 100), set(&[2]));
    // With room for indexes 0 to 3 only, the draining one's index is taken again before going past.
    assert_eq!(arrange(4, &live, &set(&[2]), 4), set(&[]));
    // Not made, down and idle all go before a booting VM.
    let t = Utc.with_ymd_and_hms(2026, 11, 27, 9, 0, 0).unwrap();
    let live = [(0, Standing::Booting), (1, Standing::Idle(t)), (2, Standing::Down), (3, Standing::NotMade)];
    assert_eq!(arrange(1, &live, &set(&[]), 100), set(&[]));
    assert_eq!(arrange(2, &live, &set(&[]), 100), set(&[]));
    assert_eq!(
        arrange(2, &[(0, Standing::NotMade), (1, Standing::Booting), (2, Standing::Busy)], &set(&[]), 100),
        set(&[0])
    );
}

#[test]
fn a_warm_pool_keeps_idle_vms_let_go_and_wakes_them_before_making_new_ones() {
    let t = |m| Utc.with_ymd_and_hms(2026, 11, 27, 9, m, 0).unwrap();
    let live =
        [(0, Standing::Idle(t(1))), (1, Standing::Busy), (2, Standing::Idle(t(5))), (3, Standing::Booting)];
    // Keep 2 of 4, two warm: the idle ones go warm (the booting one is not idle: it goes).
    let a = super::arrange(&warm_pool(2, &live, &[], 2));
    assert_eq!((a.let_go, a.warm, a.wake), (set(&[0, 2]), set(&[0, 2]), set(&[])));
    // Room for one: the first to go (idle longest, 0) is kept warm.
    assert_eq!(super::arrange(&warm_pool(2, &live, &[], 1)).warm, set(&[0]));
    // Growth with 0 and 2 parked: they are woken before any index is made.
    let live = [(1, Standing::Busy), (3, Standing::Busy)];
    let a = super::arrange(&warm_pool(3, &live, &[0, 2], 2));
    assert_eq!((a.wake, a.warm, a.let_go), (set(&[0]), set(&[2]), set(&[2])));
    let a = super::arrange(&warm_pool(5, &live, &[0, 2], 2));
    assert_eq!((a.wake, a.warm, a.let_go), (set(&[0, 2]), set(&[]), set(&[])), "then index 4 is made");
    // More parked than room: the first stay warm, the rest go.
    let a = super::arrange(&warm_pool(2, &live, &[0, 2], 1));
    assert_eq!((a.wake, a.warm), (set(&[]), set(&[0])));
}

/// A pool keeping up to `warm` warm and filling none (stock 0), room for 100 indexes.
fn warm_pool<'a>(slots: u32, live: &'a [(u32, Standing)], parked: &'a [u32], warm: u32) -> Pool<'a> {
    static NONE: BTreeSet<u32> = BTreeSet::new();
    Pool { slots, live, parked, taken: &NONE, limit: 100, warm, stock: 0, kept: &NONE }
}

#[test]
fn a_warm_pool_short_of_its_stock_keeps_vms_on_their_way_then_makes_new_ones() {
    let t = Utc.with_ymd_and_hms(2026, 11, 27, 9, 0, 0).unwrap();
    let none = set(&[]);
    let pool = |slots, live, parked, limit, stock| Pool {
        slots,
        live,
        parked,
        taken: &none,
        limit,
        warm: 3,
        stock,
        kept: &none,
    };
    // Keep 1 (the busy one): the idle VM is kept warm, then the booting one, then a new index.
    let live = [(0, Standing::Busy), (1, Standing::Booting), (2, Standing::Idle(t))];
    let a = super::arrange(&pool(1, &live, &[], 100, 3));
    assert_eq!((a.warm, a.let_go, a.wake), (set(&[1, 2, 3]), set(&[]), set(&[])));
    // A down VM is not kept: new indexes are made instead (not its index, still in use).
    let live = [(0, Standing::Busy), (1, Standing::Down)];
    assert_eq!(super::arrange(&pool(1, &live, &[], 100, 2)).warm, set(&[2, 3]));
    // Not past the indexes the hostnames have room for.
    assert_eq!(super::arrange(&pool(1, &live, &[], 3, 2)).warm, set(&[2]));
    // Parked VMs count: one parked and a stock of 2 make one new VM, in the lowest free index.
    let live = [(0, Standing::Busy)];
    assert_eq!(super::arrange(&pool(1, &live, &[3], 100, 2)).warm, set(&[1, 3]));
    // The stock, not the room, is what is made: none when it is 0.
    assert_eq!(super::arrange(&pool(1, &live, &[], 100, 0)).warm, set(&[]));
    // Growth still wakes first: the parked VM is woken, and the stock is filled with a new one.
    let a = super::arrange(&pool(2, &live, &[3], 100, 1));
    assert_eq!((a.wake, a.warm), (set(&[3]), set(&[1])));
}

#[test]
fn a_bot_ready_is_wanted_before_vms_made_for_the_warm_pool_and_gaps_wake_warm_vms() {
    let t = Utc.with_ymd_and_hms(2026, 11, 27, 9, 0, 0).unwrap();
    let none = set(&[]);
    // 0 idle and wanted; 1 to 3 booting, made for the warm pool. One more is wanted: a booting
    // one is taken from the pool, and the ready bot is kept (not parked).
    let live =
        [(0, Standing::Idle(t)), (1, Standing::Booting), (2, Standing::Booting), (3, Standing::Booting)];
    let kept = set(&[1, 2, 3]);
    let pool =
        Pool { slots: 2, live: &live, parked: &[], taken: &none, limit: 100, warm: 3, stock: 2, kept: &kept };
    let a = super::arrange(&pool);
    assert_eq!((a.let_go, a.warm), (set(&[]), set(&[2, 3])));
    // Parked VMs above an empty gap (3 and 4) are woken, not new VMs made in the gap.
    let live = [(0, Standing::Idle(t)), (1, Standing::Idle(t)), (2, Standing::Idle(t))];
    let pool = Pool {
        slots: 5,
        live: &live,
        parked: &[5, 6],
        taken: &none,
        limit: 100,
        warm: 2,
        stock: 0,
        kept: &none,
    };
    let a = super::arrange(&pool);
    assert_eq!((a.wake, a.let_go), (set(&[5, 6]), set(&[3, 4])));
}

#[test]
fn a_woken_bot_is_idle_since_its_wake_not_since_before_its_park() {
    let t = |m| Utc.with_ymd_and_hms(2026, 11, 27, 9, m, 0).unwrap();
    let mut vm = Vm { hostname: "ci-0-abcd".into(), connected: Some(t(0)), ..Vm::default() };
    crate::testing::created(t(0))(&mut vm);
    // Idle since 9:01 as the walks saw it; parked at 9:02 (still idle to Swarming meanwhile).
    let bot = super::super::bots::Bot { id: vm.hostname.clone(), ..Default::default() };
    let seen = Observed { unknown: Default::default(), bot, at: t(10), idle_since: Some(t(1)) };
    assert_eq!(Standing::of(&vm, Some(&seen)), Standing::Idle(t(1)));
    // Woken at 9:09: idle since then, so it is not the first to go again.
    vm.woken = Some(t(9));
    assert_eq!(Standing::of(&vm, Some(&seen)), Standing::Idle(t(9)));
    // One to keep of it (1) and a bot idle since 9:05 (0): that one goes, not the woken one.
    let live = [(0, Standing::Idle(t(5))), (1, Standing::of(&vm, Some(&seen)))];
    assert_eq!(arrange(1, &live, &set(&[]), 100), set(&[0]));
    // A task run since its wake: idle since that task's end, as before.
    let after = Observed { idle_since: Some(t(10)), ..seen };
    assert_eq!(Standing::of(&vm, Some(&after)), Standing::Idle(t(10)));
}
