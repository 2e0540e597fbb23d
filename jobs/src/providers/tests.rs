//! Tests of the provider contract's plumbing: declaration, the default, setup once (and again
//! after a failure), Configs matched to providers, and a change of provider.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;

use super::*;
use crate::catalog::Verdict;
use crate::config::Config;
use crate::config::providers::{Declared, Kind, ProviderIds};
use crate::model::ConfigRecord;
use crate::model::Vm;
use crate::ports::store::Versioned;
use crate::work::Next;

/// The `provider_changed` mark a record replacing `old` with `new` gets.
fn changed(
    ids: &ProviderIds,
    old: &ConfigRecord,
    new: &Config,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<chrono::DateTime<chrono::Utc>> {
    let mut rec = ConfigRecord { config: new.clone(), ..old.clone() };
    rec.succeed(Some(old), ids, now);
    rec.provider_changed
}
use crate::ctx::Ctx;
use crate::ports::store::Expect;
use crate::testing::created;
use crate::work::{CreateInstance, DrainVm};

/// A provider that counts its calls; its setup fails `fail_setup` times first.
#[derive(Debug, Default)]
struct Counting {
    setups: AtomicUsize,
    fail_setup: usize,
    creates: AtomicUsize,
}

#[async_trait]
impl Provider for Counting {
    fn kind(&self) -> Kind {
        Kind::Gce
    }
    async fn setup(&self, _ctx: &Env) -> Result<(), TaskError> {
        let n = self.setups.fetch_add(1, Ordering::SeqCst);
        if n < self.fail_setup {
            return Err(TaskError::Conflict("no network".into()));
        }
        Ok(())
    }
    async fn validate(&self, _ctx: &Env, _config: &Config) -> Verdict {
        Verdict::Valid
    }
    async fn create(&self, _ctx: &Env, _vm: Versioned<Vm>) -> Result<Next, TaskError> {
        self.creates.fetch_add(1, Ordering::SeqCst);
        Ok(Next::Done)
    }
    async fn remove(&self, _ctx: &Env, _vm: Vm) -> Result<Next, TaskError> {
        Ok(Next::Done)
    }
    async fn check(&self, _ctx: &Env, _vm: &Vm) -> Result<Health, TaskError> {
        Ok(Health::Gone)
    }
}

fn declared(ids: &[&str]) -> BTreeMap<String, Declared> {
    ids.iter().map(|id| ((*id).to_owned(), Declared { kind: Kind::Gce })).collect()
}

#[test]
fn the_default_is_the_one_gce_provider_or_the_one_named_gce() {
    let none = ProviderIds::new(&BTreeMap::new()).unwrap();
    assert_eq!((none.ids(), none.resolve("")), (vec!["gce"], "gce"), "nothing declared: gce");
    let one = ProviderIds::new(&declared(&["east"])).unwrap();
    assert_eq!(one.resolve(""), "east");
    assert_eq!(one.resolve("west"), "west", "a named provider is itself");
    let two = ProviderIds::new(&declared(&["east", "gce"])).unwrap();
    assert_eq!(two.resolve(""), "gce");
    let ambiguous = ProviderIds::new(&declared(&["east", "west"])).unwrap();
    let e = ambiguous.problem(&crate::testing::config("linux", 1)).expect("no default");
    assert!(e.field == "linux.provider" && e.rule.contains("east, west"), "{e}");
    let bad = ProviderIds::new(&declared(&["East"])).unwrap_err();
    assert!(bad.contains("[providers.East]"), "{bad}");
}

#[tokio::test]
async fn a_config_must_name_a_declared_provider_with_a_valid_id() {
    let (ctx, _) = Ctx::test();
    let mut c = crate::testing::config("linux", 1);
    c.provider = "elsewhere".into();
    match ctx.validate(&mut c.clone()).await {
        Verdict::Invalid(e) => {
            assert!(e.field == "linux.provider" && e.rule.contains("declared: gce"), "{e}")
        }
        v => panic!("{v:?}"),
    }
    c.provider = "Not An Id".into();
    assert!(c.problems().iter().any(|e| e.field == "linux.provider"), "{:?}", c.problems());
    c.provider = "gce".into();
    assert!(c.problems().is_empty());
    assert_eq!(ctx.validate(&mut c.clone()).await, Verdict::Valid, "the fake project has the zone");
}

#[tokio::test]
async fn setup_runs_once_per_process_and_again_after_a_failure_without_stopping_the_others() {
    let (ctx, f) = Ctx::test();
    let flaky = Arc::new(Counting { fail_setup: 1, ..Counting::default() });
    let fine = Arc::new(Counting::default());
    let providers = Providers::default().with("flaky", flaky.clone()).with("fine", fine.clone());
    providers.setup_all(&ctx).await;
    let setups = || (flaky.setups.load(Ordering::SeqCst), fine.setups.load(Ordering::SeqCst));
    assert_eq!(setups(), (1, 1), "each once at start");
    // Right after a failure, calls fail at once (no storm of setups), as transient.
    for _ in 0..5 {
        let e = providers.get(&ctx, "flaky").await.unwrap_err();
        assert_eq!(e.class(), crate::error::Class::Transient, "{e}");
        assert!(e.to_string().contains("setup failed") && e.to_string().contains("no network"), "{e}");
    }
    providers.get(&ctx, "fine").await.unwrap();
    assert_eq!(setups(), (1, 1));
    // Later, the next call tries again; once set up, never again.
    f.clock.advance(chrono::Duration::seconds(SETUP_RETRY_SECS));
    providers.get(&ctx, "flaky").await.unwrap();
    providers.get(&ctx, "flaky").await.unwrap();
    assert_eq!(setups(), (2, 1));

    let broken = Arc::new(Counting { fail_setup: usize::MAX, ..Counting::default() });
    let providers = Providers::default().with("broken", broken);
    let e = providers.get(&ctx, "broken").await.unwrap_err();
    assert_eq!(e.class(), crate::error::Class::Transient, "{e}");
    let e = providers.get(&ctx, "undeclared").await.unwrap_err();
    assert_eq!(e.class(), crate::error::Class::Permanent, "{e}");
}

#[tokio::test]
async fn create_instance_goes_to_the_vms_provider() {
    let (mut ctx, f) = Ctx::test();
    let other = Arc::new(Counting::default());
    ctx.providers = Arc::new(Providers::default().with("other", other.clone()));
    let mut c = crate::testing::config("linux", 2);
    c.provider = "other".into();
    ctx.seed_config("linux", 2).await;
    let mut rec = ctx.ports.store.config("linux").await.unwrap().unwrap();
    rec.value.config = c;
    assert!(ctx.ports.store.put_config(&rec.value, Expect::Version(rec.version)).await.unwrap());
    ctx.seed_vm("linux-0", |v| v.provider = "other".into()).await;
    crate::tasks::create_instance::run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
    assert_eq!(other.creates.load(Ordering::SeqCst), 1);
    assert!(f.compute.calls().is_empty(), "Compute was not asked: {:?}", f.compute.calls());
    // A VM left from the default provider is not the Config's any more: dropped, not made.
    ctx.seed_vm("linux-1", |_| {}).await;
    crate::tasks::create_instance::run(&ctx, CreateInstance { id: "linux-1".into() }).await.unwrap();
    assert!(ctx.ports.store.vm("linux-1").await.unwrap().is_none());
    assert_eq!(other.creates.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_provider_change_replaces_the_pool_a_tenth_at_a_time_and_ends() {
    use crate::tasks::expand_config::run as expand;
    use crate::work::ExpandConfig;
    let (mut ctx, _) = Ctx::test();
    ctx.providers = Arc::new(Providers::new(&declared(&["gce", "gce-b"])).unwrap());
    ctx.seed_config("linux", 20).await;
    for i in 0..20 {
        ctx.seed_vm(&format!("linux-{i}"), created(ctx.now())).await;
    }
    let cur = ctx.ports.store.config("linux").await.unwrap().unwrap();
    let mut new = cur.value.config.clone();
    new.provider = "gce".into();
    assert_eq!(
        changed(ctx.providers.declared(), &cur.value, &new, ctx.now()),
        None,
        "naming the default is no change"
    );
    let stand_in = ConfigRecord { revision: String::new(), ..cur.value.clone() };
    assert!(
        changed(ctx.providers.declared(), &stand_in, &new, ctx.now()).is_some(),
        "VMs of a corrupt record: checked"
    );
    new.provider = "gce-b".into();
    let rec = ConfigRecord {
        provider_changed: changed(ctx.providers.declared(), &cur.value, &new, ctx.now()),
        config: new,
        ..cur.value
    };
    assert!(rec.provider_changed.is_some());
    assert!(ctx.ports.store.put_config(&rec, Expect::Version(cur.version)).await.unwrap());

    let step = || async {
        let next = expand(&ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
        let drains = ctx.finished::<DrainVm>().await;
        for t in &drains {
            crate::tasks::drain_vm::run(&ctx, t.clone()).await.unwrap();
        }
        (next, drains.len())
    };
    let (next, drained) = step().await;
    assert_eq!((drained, next), (2, Next::After(ctx.watch())), "a tenth of 20 at once");
    assert_eq!(step().await.1, 0, "none more while two are on their way out");
    let mut rounds = 0;
    loop {
        // The drained VMs finish (their instance destroyed, bot deleted): their ids are made
        // again, by the new provider.
        for id in
            ctx.ports.store.vm_ids(crate::ports::store::VmIndex::OfConfig("linux".into())).await.unwrap()
        {
            let v = ctx.ports.store.vm(&id).await.unwrap().unwrap();
            if v.value.drained {
                assert!(ctx.ports.store.delete_vm(&id, v.version).await.unwrap());
            }
        }
        let (next, drained) = step().await;
        rounds += 1;
        if next == Next::Done {
            assert_eq!(drained, 0);
            break;
        }
        assert!(drained <= 2 && rounds <= 11, "{drained} in round {rounds}");
    }
    assert_eq!(rounds, 10, "two drained first, nine rounds of two more, then one that finds none left");
    assert_eq!(
        ctx.ports.store.config("linux").await.unwrap().unwrap().value.provider_changed,
        None,
        "done: mark cleared"
    );
    for i in 0..20 {
        assert_eq!(ctx.ports.store.vm(&format!("linux-{i}")).await.unwrap().unwrap().value.provider, "gce-b");
    }
}

#[tokio::test]
async fn the_work_that_names_no_provider_goes_to_each_provider_once() {
    let (mut ctx, f) = Ctx::test();
    // Two ids of Compute Engine's type share its provider; one of another provider type.
    let other = Arc::new(Counting::default());
    ctx.providers = Arc::new(Providers::new(&declared(&["gce", "gce-b"])).unwrap().with("other", other));
    let (scans, audits) = (
        ctx.providers.scan_zone(&ctx, "test-project", "z"),
        ctx.providers.audit_resources(&ctx, "test-project"),
    );
    assert_eq!(scans.await.unwrap(), Next::Done);
    assert_eq!(audits.await.unwrap(), Next::Done);
    assert_eq!(
        f.compute.calls(),
        ["list", "templates"],
        "Compute Engine's zone scanned once, its templates audited once"
    );
    // A Config's bulk_insert: Compute Engine, whose bulks these are, follows them once.
    ctx.seed_config("linux", 1).await;
    ctx.seed_vm("linux-0", |v| v.batch = "b1".into()).await;
    ctx.providers.send_together(&ctx, "linux").await.unwrap();
    let follows: Vec<String> =
        f.compute.calls().into_iter().filter(|c| c.starts_with("bulk_insert ")).collect();
    assert_eq!(follows.len(), 1, "{:?}", f.compute.calls());
}
