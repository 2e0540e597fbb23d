//! The provider contract, run on both providers (Compute Engine over the fake Compute, static):
//! a Config of its shape validates and one of the other shape does not, `create` records one
//! machine and is idempotent, `check` says it is up, `remove` is idempotent, and the handlers
//! built on the contract (create_vm, create_instance, destroy_instance) need nothing else.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;
use crate::catalog::Verdict;
use crate::tasks::create_instance::{self, CreateInstance};
use crate::tasks::destroy_instance::{self, DestroyInstance};

fn both(ctx: &mut Ctx) {
    let declared = BTreeMap::from([
        ("gce".to_owned(), Declared { kind: Kind::Gce }),
        ("lab".to_owned(), Declared { kind: Kind::Static }),
    ]);
    ctx.providers = Arc::new(Providers::new(&declared).unwrap());
}

fn listed(prefix: &str, machines: &[&str]) -> Config {
    Config {
        prefix: prefix.into(),
        provider: "lab".into(),
        machines: Some(machines.iter().map(|m| (*m).to_owned()).collect()),
        swarming: "https://swarm.example.com".into(),
        timeout: crate::config::Secs(600),
        ..Config::default()
    }
}

/// What one provider did through the contract.
struct Seen {
    vm: Vm,
    /// `check` after `remove`.
    after_remove: Health,
}

async fn contract(ctx: &Ctx, config: Config) -> Seen {
    let prefix = config.prefix.clone();
    assert_eq!(ctx.validate(&config).await, Verdict::Valid, "{prefix}");
    crate::operate::apply(ctx, config, "test").await.unwrap();
    crate::tasks::expand_config::run(ctx, crate::tasks::ExpandConfig { prefix: prefix.clone() })
        .await
        .unwrap();
    for t in ctx.finished::<crate::tasks::CreateVm>().await {
        crate::tasks::create_vm::run(ctx, t).await.unwrap();
    }
    let id = format!("{prefix}-0");
    // create: a few steps at most (Compute Engine: the insert, then its operation), then the
    // machine is recorded; more calls change nothing.
    for _ in 0..3 {
        create_instance::run(ctx, CreateInstance { id: id.clone() }).await.unwrap();
    }
    let vm = ctx.store.vm(&id).await.unwrap().unwrap();
    let placed = vm.value.instance.clone().expect("machine recorded");
    let p = ctx.providers.get(ctx, &vm.value.provider).await.unwrap().clone();
    let again = p.create(ctx, vm.clone()).await.unwrap();
    assert_eq!(again, Next::Done, "{prefix}: created already");
    let now = ctx.store.vm(&id).await.unwrap().unwrap();
    assert_eq!(now.value.instance, Some(placed), "{prefix}: the same machine");
    assert!(matches!(p.check(ctx, &now.value).await.unwrap(), Health::Up(_)), "{prefix}: up");
    // remove: through the handler once (it marks the removal), then again directly.
    destroy_instance::run(ctx, DestroyInstance::of(&now.value).unwrap()).await.unwrap();
    let removing = ctx.store.vm(&id).await.unwrap().unwrap().value;
    assert!(removing.destroying.is_some());
    assert_eq!(p.remove(ctx, removing.clone()).await.unwrap(), Next::Done, "{prefix}: removed already");
    let after_remove = p.check(ctx, &removing).await.unwrap();
    Seen { vm: removing, after_remove }
}

#[tokio::test]
async fn the_contract_holds_on_both_providers() {
    let (mut ctx, f) = Ctx::test();
    both(&mut ctx);
    let gce = contract(&ctx, crate::testing::config("linux", 1)).await;
    assert!(gce.vm.hostname.starts_with("linux-0-"), "a fresh hostname");
    assert_eq!(gce.after_remove, Health::Gone, "Compute Engine: the instance is gone");
    // A create again sends the same insert (same requestId: Compute makes nothing more).
    let inserts: std::collections::BTreeSet<String> =
        f.compute.calls().into_iter().filter(|c| c.starts_with("insert ")).collect();
    assert_eq!(inserts.len(), 1, "{:?}", f.compute.calls());
    assert_eq!(f.compute.instances.lock().unwrap().len(), 0, "and the one instance is gone");
    let calls = f.compute.calls().len();

    let lab = contract(&ctx, listed("lab", &["mac-1"])).await;
    assert_eq!(lab.vm.hostname, "mac-1", "the listed hostname");
    assert!(matches!(lab.after_remove, Health::Up(_)), "static: the machine stays");
    assert_eq!(f.compute.calls().len(), calls, "static: Compute is never asked");
    assert!(lab.vm.url().unwrap().starts_with("static://mac-1/"));
}

#[tokio::test]
async fn a_config_of_the_other_shape_is_refused_by_each_provider() {
    let (mut ctx, _) = Ctx::test();
    both(&mut ctx);
    let mut gce_shaped = crate::testing::config("linux", 1);
    gce_shaped.provider = "lab".into();
    let static_shaped = Config { provider: "gce".into(), ..listed("lab", &["mac-1"]) };
    let mut fields = Vec::new();
    for c in [gce_shaped, static_shaped] {
        match ctx.validate(&c).await {
            Verdict::Invalid(e) => fields.push((e.field, e.rule.contains("type"))),
            v => panic!("{v:?}"),
        }
    }
    assert_eq!(fields, [("linux.provider".into(), true), ("lab.machines".into(), true)]);
    // A static Config names its provider: the default is of type gce.
    let unnamed = Config { provider: String::new(), ..listed("lab", &["mac-1"]) };
    assert!(matches!(ctx.validate(&unnamed).await, Verdict::Invalid(_)));
}

#[tokio::test]
async fn a_hostname_keeps_its_vm_id_while_the_list_changes_around_it() {
    let (mut ctx, _) = Ctx::test();
    both(&mut ctx);
    let ids = async |ctx: &Ctx, machines: &[&str]| {
        crate::operate::apply(ctx, listed("lab", machines), "test").await.unwrap();
        let rec = ctx.store.config("lab").await.unwrap().unwrap().value;
        assert_eq!(rec.current_amount as usize, machines.len());
        rec.listed.slots.into_iter().map(|(i, h)| format!("{i}={h}")).collect::<Vec<_>>()
    };
    assert_eq!(ids(&ctx, &["a", "b", "c"]).await, ["0=a", "1=b", "2=c"]);
    assert_eq!(ids(&ctx, &["c", "d", "a"]).await, ["0=a", "2=c", "3=d"], "b's index is not given again");
    assert_eq!(ids(&ctx, &["b"]).await, ["4=b"], "b back: a new index (its old VM may still drain)");
    // Amount and recycling are the list's: refused.
    let e = crate::operate::set_amount(&ctx, "lab", 5, "bob").await.unwrap_err();
    assert!(matches!(&e, crate::operate::OpError::Invalid(v) if v[0].rule.contains("managed by their list")));
    ctx.seed_vm("lab-4", |v| v.provider = "lab".into()).await;
    let e = crate::operate::recycle(&ctx, "lab-4", "bob").await.unwrap_err();
    assert!(matches!(e, crate::operate::OpError::Invalid(_)), "{e:?}");
    assert!(!ctx.store.vm("lab-4").await.unwrap().unwrap().value.drained);
}

#[tokio::test]
async fn a_machine_belongs_to_one_pool() {
    let (mut ctx, _) = Ctx::test();
    both(&mut ctx);
    crate::operate::apply(&ctx, listed("lab", &["a", "b"]), "test").await.unwrap();
    let e = crate::operate::apply(&ctx, listed("other", &["c", "b"]), "test").await.unwrap_err();
    match e {
        crate::operate::OpError::Invalid(v) => {
            assert_eq!(v[0].field, "other.machines[1]");
            assert!(v[0].rule.contains("listed by Config lab"), "{}", v[0].rule);
        }
        e => panic!("{e:?}"),
    }
    assert!(ctx.store.config("other").await.unwrap().is_none());
    // Its own list again is no clash.
    crate::operate::apply(&ctx, listed("lab", &["b", "a"]), "test").await.unwrap();
}
