//! Unit tests of `plan`: growth, shrink, changed fields and whom they affect, problems, and that
//! nothing is written.

use super::*;
use crate::model::ConfigRecord;
use crate::ports::store::Versioned;
use crate::testing::config;
use crate::work::{CreateInstance, DrainVm, ExpandConfig};

/// A stored API Config `linux` of 1 to 12 VMs targeting `amount`, with VMs `0..vms`.
async fn setup(amount: u32, vms: u32) -> Ctx {
    let (ctx, _) = Ctx::test();
    let mut c = config("linux", 1);
    c.amount.max = 12;
    crate::operate::apply(&ctx, c, "alice").await.unwrap();
    crate::operate::set_amount(&ctx, "linux", amount, "alice").await.unwrap();
    for i in 0..vms {
        ctx.seed_vm(&format!("linux-{i}"), |_| {}).await;
    }
    ctx
}

/// Everything a plan could write: Config records and VM records.
async fn snapshot(ctx: &Ctx) -> (Vec<Versioned<ConfigRecord>>, Vec<Option<u64>>) {
    let ids = ctx.ports.store.vm_ids(VmIndex::OfConfig("linux".into())).await.unwrap();
    let mut versions = Vec::new();
    for id in ids {
        versions.push(ctx.ports.store.vm_version(&id).await.unwrap());
    }
    (ctx.ports.store.configs().await.unwrap(), versions)
}

fn amount(n: u32) -> PlanInput {
    PlanInput { amount: Some(n), ..PlanInput::default() }
}

#[tokio::test]
async fn growing_lists_the_vms_to_create_in_index_order_and_writes_nothing() {
    let ctx = setup(10, 10).await;
    ctx.taken::<ExpandConfig>().await;
    let before = snapshot(&ctx).await;
    let p = plan(&ctx, "linux", amount(12)).await.unwrap();
    assert_eq!((p.prefix.as_str(), p.amount), ("linux", 12));
    assert_eq!(p.create, ["linux-10", "linux-11"]);
    assert!(p.drain.is_empty() && p.problems.is_empty());
    assert_eq!(p.keep.len(), 10);
    assert_eq!(p.keep.last().map(String::as_str), Some("linux-9"), "by index, not by name");
    let c = &p.changes[..];
    assert_eq!(c.len(), 1);
    assert_eq!((c[0].field.as_str(), c[0].applies_to.as_str()), ("current_amount", "the pool"));
    assert_eq!((c[0].from.clone(), c[0].to.clone()), (10.into(), 12.into()));
    // Clamped as set_amount would.
    assert_eq!(plan(&ctx, "linux", amount(50)).await.unwrap().amount, 12);
    assert_eq!(snapshot(&ctx).await, before, "nothing written");
    assert!(ctx.taken::<ExpandConfig>().await.is_empty() && ctx.taken::<CreateInstance>().await.is_empty());
}

#[tokio::test]
async fn a_wanted_vm_already_drained_is_replaced() {
    let ctx = setup(2, 1).await;
    ctx.seed_vm("linux-1", |v| v.drained = true).await;
    let p = plan(&ctx, "linux", PlanInput::default()).await.unwrap();
    assert_eq!(
        (p.keep, p.replace, p.replacement),
        (vec!["linux-0".to_owned()], vec!["linux-1".to_owned()], None)
    );
    assert!(p.create.is_empty() && p.drain.is_empty());
}

#[tokio::test]
async fn shrinking_lists_the_vms_to_drain() {
    let ctx = setup(3, 3).await;
    let p = plan(&ctx, "linux", amount(1)).await.unwrap();
    assert_eq!(
        (p.amount, p.keep.as_slice(), p.drain.as_slice()),
        (1, &["linux-0".to_owned()][..], &["linux-1".to_owned(), "linux-2".to_owned()][..])
    );
    assert!(p.create.is_empty());
    assert!(ctx.taken::<DrainVm>().await.is_empty(), "nothing drained");
}

#[tokio::test]
async fn changed_attributes_roll_every_vm_out_and_the_lifetime_applies_to_new_instances() {
    let ctx = setup(2, 2).await;
    let before = snapshot(&ctx).await;
    let mut c = ctx.ports.store.config("linux").await.unwrap().unwrap().value.config;
    c.attributes.machine_type = "zones/{{.Zone}}/machineTypes/e2-large".into();
    c.lifetime = crate::config::Secs(7200);
    c.amount.min = 4;
    let p = plan(&ctx, "linux", PlanInput { config: Some(c.clone()), amount: None }).await.unwrap();
    let of =
        |f: &str| p.changes.iter().find(|c| c.field == f).unwrap_or_else(|| panic!("{f}: {:?}", p.changes));
    assert_eq!(of("attributes.machine_type").applies_to, Change::REPLACED_NOW);
    assert_eq!(of("attributes.machine_type").to, "zones/{{.Zone}}/machineTypes/e2-large");
    assert_eq!(
        (of("lifetime").from.clone(), of("lifetime").applies_to.as_str()),
        (86_400.into(), "new instances")
    );
    assert_eq!(of("amount").applies_to, "the pool");
    assert_eq!(of("current_amount").to, 4, "kept, clamped by the new bounds");
    assert_eq!(p.changes.len(), 4, "{:?}", p.changes);
    assert_eq!((p.amount, p.create.as_slice()), (4, &["linux-2".to_owned(), "linux-3".to_owned()][..]));
    assert_eq!(
        (p.replace, p.keep.len(), p.drain.len(), p.recycle.len()),
        (vec!["linux-0".into(), "linux-1".into()], 0, 0, 0)
    );
    // The default update: a surge of 1, no bot less than the amount: one at a time.
    let r = p.replacement.expect("a replacement");
    assert_eq!(
        (r.by, r.at_once, r.surge, r.min_connected),
        (ReplacedBy::RollingUpdate, 1, vec!["linux-4".to_owned()], Some(4))
    );
    assert!(p.problems.is_empty(), "{:?}", p.problems);
    assert_eq!(snapshot(&ctx).await, before, "nothing written");

    // Applied: the record is marked for the rollout the plan said.
    c.update.max_surge = 2;
    c.update.max_unavailable = 1;
    let p = plan(&ctx, "linux", PlanInput { config: Some(c.clone()), amount: None }).await.unwrap();
    let r = p.replacement.expect("a replacement");
    assert_eq!((r.at_once, r.surge.len(), r.min_connected), (3, 2, Some(3)));
    let (rec, _) = crate::operate::apply(&ctx, c, "alice").await.unwrap();
    assert!(rec.rollout.is_some());
}

#[tokio::test]
async fn on_lifetime_recycles_outdated_vms_at_their_deadline_and_the_lifetime_alone_replaces_none() {
    let ctx = setup(2, 0).await;
    let made = ctx.now();
    for i in 0..2 {
        ctx.seed_vm(&format!("linux-{i}"), crate::testing::created(made)).await;
    }
    let mut c = ctx.ports.store.config("linux").await.unwrap().unwrap().value.config;
    c.lifetime = crate::config::Secs(7200);
    let p = plan(&ctx, "linux", PlanInput { config: Some(c.clone()), amount: None }).await.unwrap();
    assert_eq!((p.keep.len(), p.replace.len(), p.recycle.len(), p.replacement), (2, 0, 0, None));
    c.update.mode = crate::config::UpdateMode::OnLifetime;
    c.attributes.machine_type = "zones/{{.Zone}}/machineTypes/e2-large".into();
    let p = plan(&ctx, "linux", PlanInput { config: Some(c.clone()), amount: None }).await.unwrap();
    let deadline = Some(made + chrono::Duration::seconds(86_400));
    assert_eq!(
        p.recycle.iter().map(|r| (r.id.as_str(), r.at)).collect::<Vec<_>>(),
        [("linux-0", deadline), ("linux-1", deadline)]
    );
    assert_eq!((p.keep.len(), p.replace.len(), p.replacement), (0, 0, None));
    let of = |f: &str| p.changes.iter().find(|c| c.field == f).unwrap().applies_to.clone();
    assert_eq!(of("attributes.machine_type"), Change::AT_LIFETIME);
    let (rec, _) = crate::operate::apply(&ctx, c, "alice").await.unwrap();
    assert!(rec.rollout.is_none(), "no rollout, as planned");
    // Past its lifetime, a VM is recycled whatever the change, unless a pause holds it.
    ctx.seed_vm("linux-2", |v| {
        crate::testing::created(made - chrono::Duration::days(2))(v);
        v.attributes = rec.config.attributes_in(&v.attributes.zone.clone());
    })
    .await;
    let p = plan(&ctx, "linux", amount(3)).await.unwrap();
    assert_eq!(p.recycle.last().map(|r| r.id.as_str()), Some("linux-2"), "{:?}", p.recycle);
    crate::operate::pause(&ctx, "linux", "incident", "bob").await.unwrap();
    let p = plan(&ctx, "linux", amount(3)).await.unwrap();
    assert!(p.recycle.iter().all(|r| r.id != "linux-2") && p.keep.contains(&"linux-2".to_owned()), "{p:?}");
}

#[tokio::test]
async fn a_plan_that_could_not_be_applied_says_why() {
    let ctx = setup(2, 0).await;
    let mut bad = config("mac", 1);
    bad.lifetime = crate::config::Secs(0);
    let p = plan(&ctx, "linux", PlanInput { config: Some(bad), amount: None }).await.unwrap();
    assert!(p.problems.iter().any(|e| e.contains("names \"mac\", not \"linux\"")), "{:?}", p.problems);
    assert!(p.problems.iter().any(|e| e.starts_with("mac.lifetime")), "{:?}", p.problems);
    // A file's Config: its attributes are the file's to change (its amount is not).
    ctx.seed_config("mac", 1).await;
    let p = plan(&ctx, "mac", PlanInput { config: Some(config("mac", 1)), amount: None }).await.unwrap();
    assert!(p.problems[0].contains("held by a Config file"), "{:?}", p.problems);
    assert!(plan(&ctx, "mac", amount(1)).await.unwrap().problems.is_empty());
    // A new Config clashing with another's prefix.
    let p = plan(&ctx, "lin", PlanInput { config: Some(config("lin", 2)), amount: None }).await.unwrap();
    assert!(p.problems[0].contains("one is a prefix of the other"), "{:?}", p.problems);
    assert_eq!((p.amount, p.create.len()), (0, 0), "not applicable: no VM is listed");
    // Nor for a Config far over the limits, or with rules that cannot be computed.
    let mut huge = config("big", 1);
    huge.amount.min = u32::MAX;
    huge.amount.max = u32::MAX;
    let p = plan(&ctx, "big", PlanInput { config: Some(huge), amount: None }).await.unwrap();
    assert!(p.problems.iter().any(|e| e.contains("max_amount")) && p.create.is_empty(), "{:?}", p.problems);
    let mut odd = config("odd", 1);
    let mut window: crate::config::Schedule = serde_json::from_value(
        serde_json::json!({"start": {"day": "MONDAY", "time": "9:00"}, "length": "9999999999999h"}),
    )
    .unwrap();
    window.max = 1;
    odd.amount.change.push(window);
    let p = plan(&ctx, "odd", PlanInput { config: Some(odd), amount: None }).await.unwrap();
    assert!(p.problems.iter().any(|e| e.contains("length")), "{:?}", p.problems);
    // A new Config: each field it sets, none it leaves at its default.
    let fields: Vec<&str> = p.changes.iter().map(|c| c.field.as_str()).collect();
    for f in ["prefix", "amount", "attributes.project", "attributes.zone", "lifetime", "swarming"] {
        assert!(fields.contains(&f), "{f} in {fields:?}");
    }
    let defaults = serde_json::to_value(crate::config::Config::default()).unwrap();
    for c in &p.changes {
        assert!(c.from.is_null() && !c.to.is_null(), "{c:?}");
        let default = match c.field.strip_prefix("attributes.") {
            Some(a) => &defaults["attributes"][a],
            None => &defaults[&c.field],
        };
        assert_ne!(&c.to, default, "{} left at its default is no change", c.field);
    }
    assert!(matches!(plan(&ctx, "nope", amount(1)).await, Err(OpError::NotFound(_))));
}

#[tokio::test]
async fn a_plan_says_when_creation_waits_for_a_pause() {
    let ctx = setup(1, 0).await;
    assert!(plan(&ctx, "linux", amount(2)).await.unwrap().paused.is_none());
    crate::operate::pause_all(&ctx, "incident", "bob").await.unwrap();
    let p = plan(&ctx, "linux", amount(2)).await.unwrap();
    assert_eq!((p.paused.map(|p| p.reason), p.create.len()), (Some("incident".into()), 2));
}

#[tokio::test]
async fn another_provider_replaces_every_vm_and_naming_the_default_changes_nothing() {
    let mut ctx = setup(3, 3).await;
    let declared = ["gce", "gce-b"].map(|id| {
        (id.to_owned(), crate::config::providers::Declared { kind: crate::config::providers::Kind::Gce })
    });
    ctx.providers = std::sync::Arc::new(crate::providers::Providers::new(&declared.into()).unwrap());
    let mut c = config("linux", 1);
    c.amount.max = 12;
    c.provider = "gce".into();
    let p = plan(&ctx, "linux", PlanInput { config: Some(c.clone()), ..PlanInput::default() }).await.unwrap();
    assert!(p.changes.iter().all(|ch| ch.field != "provider"), "{:?}", p.changes);
    assert_eq!((p.keep.len(), p.drain.len(), p.create.len()), (3, 0, 0));

    c.provider = "gce-b".into();
    let before = snapshot(&ctx).await;
    let p = plan(&ctx, "linux", PlanInput { config: Some(c.clone()), ..PlanInput::default() }).await.unwrap();
    assert!(p.problems.is_empty(), "{:?}", p.problems);
    assert!(p.changes.iter().any(|ch| ch.field == "provider"), "{:?}", p.changes);
    assert_eq!(
        (p.keep.len(), p.drain.len(), p.create.len()),
        (0, 0, 0),
        "each is replaced: drained, then made again by the new provider"
    );
    assert_eq!(p.replace, ["linux-0", "linux-1", "linux-2"]);
    let r = p.replacement.expect("a replacement");
    assert_eq!((r.by, r.at_once, r.surge.len(), r.min_connected), (ReplacedBy::ProviderChange, 1, 0, None));
    assert_eq!(p.changes.iter().find(|ch| ch.field == "provider").unwrap().applies_to, Change::REPLACED_NOW);
    assert_eq!(snapshot(&ctx).await, before, "a plan writes nothing");

    // Applied: the record is marked in the same write, and the drains begin.
    let (rec, _) = crate::operate::apply(&ctx, c, "alice").await.unwrap();
    assert!(rec.provider_changed.is_some());
    assert_eq!(
        ctx.ports.store.config("linux").await.unwrap().unwrap().value.provider_changed,
        rec.provider_changed
    );
}

#[tokio::test]
async fn a_warm_pool_added_lists_the_vms_made_for_it() {
    let ctx = setup(2, 2).await;
    let mut c = config("linux", 1);
    c.amount.max = 12;
    c.warm = Some(crate::config::Warm { unknown: Default::default(), suspended: 3, stopped: 0 });
    let p = plan(&ctx, "linux", PlanInput { config: Some(c), amount: None }).await.unwrap();
    let made = ["linux-2", "linux-3", "linux-4"];
    assert_eq!(
        (p.create.clone(), p.warm.clone()),
        (made.map(String::from).to_vec(), made.map(String::from).to_vec())
    );
    assert_eq!(p.keep, ["linux-0", "linux-1"]);
    assert!(ctx.taken::<CreateInstance>().await.is_empty(), "nothing made");
}

#[tokio::test]
async fn a_plan_says_what_it_would_cost_and_whether_the_tenants_budget_holds_its_growth() {
    let (mut ctx, _) = Ctx::test();
    let mut c = config("linux", 1);
    c.amount.max = 12;
    c.attributes.zone = "us-central1-b".into();
    crate::operate::apply(&ctx, c, "alice").await.unwrap();
    let p = plan(&ctx, "linux", amount(4)).await.unwrap();
    let cost = p.cost.expect("priced");
    let vm = cost.per_vm.expect("e2-small is priced").0;
    assert!((cost.planned_per_hour.unwrap().0 - 4.0 * vm).abs() < 1e-9, "{cost:?}");
    assert_eq!((cost.now_per_hour, cost.budget), (Usd(0.0), None), "no VM billed yet, no budget");
    // A tenant limited to 2.5 VMs an hour: 2 of the 4 new VMs may be made now.
    let t = crate::config::Tenant { max_cost_per_hour: Some(Usd(2.5 * vm)), ..crate::config::Tenant::open() };
    let tenants = std::collections::BTreeMap::from([("*".to_owned(), t)]);
    ctx.env.settings.trust = std::sync::Arc::new(
        crate::config::Trust::new(&crate::config::SwarmingServers::default(), &tenants).unwrap(),
    );
    let b = plan(&ctx, "linux", amount(4)).await.unwrap().cost.unwrap().budget.expect("a budget");
    assert_eq!((b.holds, b.room), (false, 2), "{b:?}");
    assert!(b.said.contains("max_cost_per_hour"), "{}", b.said);
    let b = plan(&ctx, "linux", amount(2)).await.unwrap().cost.unwrap().budget.unwrap();
    assert_eq!((b.holds, b.room), (true, 2), "{b:?}");
}
