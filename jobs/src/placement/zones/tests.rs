//! Unit tests of `zones.rs`.

use super::*;
use crate::ctx::Ctx;
use crate::placement::backoff::Scope;

fn multi(weights: &[(&str, u32)]) -> Config {
    crate::testing::zoned(crate::testing::config("linux", 1), weights)
}

fn room(zone: &str, weight: u32, vms: i64, backed_off: bool) -> Room<'_> {
    Room { zone, weight, vms, backed_off }
}

#[test]
fn each_new_vm_goes_to_the_zone_with_the_most_headroom_by_weight() {
    // An empty pool of 6 over weights 2:1 fills to 4 and 2.
    let mut rooms = [room("a", 2, 0, false), room("b", 1, 0, false)];
    let zones = place(&mut rooms, 6, 6);
    assert_eq!(zones, ["a", "a", "a", "b", "a", "b"]);
    assert_eq!((rooms[0].vms, rooms[1].vms), (4, 2));
    // Holes are filled where they are, whatever the index: b lost two VMs.
    let mut rooms = [room("a", 2, 4, false), room("b", 1, 0, false)];
    assert_eq!(place(&mut rooms, 6, 2), ["b", "b"]);
    // A zone over its share (after a stockout elsewhere) gets nothing until the other catches
    // up; then both grow by weight.
    let mut rooms = [room("a", 1, 0, false), room("b", 1, 4, false)];
    assert_eq!(place(&mut rooms, 6, 4), ["a", "a", "a", "a"]);
    let mut rooms = [room("a", 1, 3, false), room("b", 1, 3, false)];
    assert_eq!(place(&mut rooms, 8, 2), ["a", "b"], "ties to the first listed");
}

#[test]
fn backed_off_zones_are_skipped_and_weight_0_zones_are_the_last_resort() {
    let mut rooms = [room("a", 2, 0, true), room("b", 1, 3, false)];
    assert_eq!(place(&mut rooms, 6, 3), ["b", "b", "b"], "a backs off: b, past its share");
    let mut rooms = [room("a", 1, 0, true), room("spare", 0, 1, false), room("c", 0, 0, false)];
    assert_eq!(place(&mut rooms, 4, 3), ["c", "spare", "c"], "weight 0, fewest VMs first");
    let mut rooms = [room("a", 1, 0, false), room("spare", 0, 0, false)];
    assert_eq!(place(&mut rooms, 2, 3), ["a", "a", "a"], "never while a weighted zone is up");
    let mut rooms = [room("a", 1, 2, true), room("b", 1, 0, true)];
    assert_eq!(place(&mut rooms, 4, 1), ["b"], "all back off: most headroom, it waits there");
    assert!(place(&mut [], 4, 2).is_empty());
}

#[tokio::test]
async fn a_batch_is_placed_at_once_and_a_zone_backed_off_is_skipped() {
    let (ctx, _) = Ctx::test();
    let rec = ctx.seed_config_with("linux", 4, |c| *c = multi(&[("a", 1), ("b", 1)])).await;
    ctx.seed_vm("linux-0", |v| v.attributes.zone = "a".into()).await;
    let zones = |n| {
        let (ctx, rec) = (ctx.clone(), rec.clone());
        async move { places(&ctx, &rec, n).await.unwrap().into_iter().map(|(z, _)| z).collect::<Vec<_>>() }
    };
    assert_eq!(zones(3).await, ["b", "a", "b"], "one decision for the batch: 2 and 2");
    // Each decision from the counts (one VM in a, none in b).
    assert_eq!(zones(1).await, ["b"]);
    crate::placement::backoff::hit(
        &ctx,
        &Scope("test-project".into(), "b".into()),
        "ZONE_RESOURCE_POOL_EXHAUSTED",
    )
    .await
    .unwrap();
    assert_eq!(zones(1).await, ["a"], "b backs off since");
    let waiting = ctx.seed_vm("linux-2", |v| v.attributes.zone = "b".into()).await;
    assert!(crate::placement::ranks::elsewhere(&ctx, &waiting).await.unwrap(), "b backs off, a does not");
    let in_a = ctx.seed_vm("linux-3", |v| v.attributes.zone = "a".into()).await;
    assert!(!crate::placement::ranks::elsewhere(&ctx, &in_a).await.unwrap());
    crate::placement::backoff::hit(&ctx, &Scope("test-project".into(), "a".into()), "QUOTA_EXCEEDED")
        .await
        .unwrap();
    assert!(!crate::placement::ranks::elsewhere(&ctx, &waiting).await.unwrap(), "nowhere better");
    let one = crate::testing::config("linux", 1);
    let one = ConfigRecord { config: one, ..rec.clone() };
    assert_eq!(
        places(&ctx, &one, 2).await.unwrap(),
        [("z".to_owned(), None), ("z".to_owned(), None)],
        "one zone"
    );
}

#[tokio::test]
async fn a_stockout_in_one_zone_makes_the_vm_again_in_another_at_once() {
    use crate::ports::compute::ComputeError;
    use crate::work::{CreateInstance, CreateVm, ExpandConfig};
    let (ctx, f) = Ctx::test();
    ctx.seed_config_with("linux", 2, |c| *c = multi(&[("a", 1), ("b", 1)])).await;
    crate::tasks::create_vm::run(&ctx, CreateVm { id: "linux-0".into() }).await.unwrap();
    let vm = ctx.ports.store.vm("linux-0").await.unwrap().unwrap().value;
    assert_eq!((vm.zone(), vm.attributes.machine_type.as_str()), ("a", "zones/a/machineTypes/e2-small"));
    let stockout = ComputeError::from_operation("ZONE_RESOURCE_POOL_EXHAUSTED", Some(503), "no room in a");
    f.compute.inserts.lock().unwrap().push_back(Err(stockout));
    ctx.taken::<CreateInstance>().await;
    let next =
        crate::tasks::create_instance::run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
    assert_eq!(next, crate::work::Next::Done, "no wait for the backoff");
    assert!(ctx.ports.store.vm("linux-0").await.unwrap().is_none(), "dropped: it had no instance");
    assert_eq!(ctx.taken::<ExpandConfig>().await.len(), 1, "made again at once");
    assert!(
        crate::placement::backoff::active(&ctx, &Scope("test-project".into(), "a".into()))
            .await
            .unwrap()
            .is_some()
    );
    crate::tasks::create_vm::run(&ctx, CreateVm { id: "linux-0".into() }).await.unwrap();
    let again = ctx.ports.store.vm("linux-0").await.unwrap().unwrap().value;
    assert_eq!(again.zone(), "b");
    assert_ne!(again.hostname, vm.hostname, "a new incarnation");
}
