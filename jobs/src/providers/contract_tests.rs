//! The provider contract, run on both providers (Compute Engine over the fake Compute, static):
//! a Config of its shape validates and one of the other shape does not, `create` records one
//! machine and is idempotent, `check` says it is up, `remove` is idempotent, and the handlers
//! built on the contract (create_vm, create_instance, destroy_instance) need nothing else.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;
use crate::catalog::Verdict;
use crate::config::Config;
use crate::ctx::Ctx;
use crate::model::Vm;
use crate::tasks::create_instance;
use crate::tasks::destroy_instance;
use crate::work::CreateInstance;
use crate::work::DestroyInstance;
use crate::work::Next;

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
    assert_eq!(ctx.validate(&mut config.clone()).await, Verdict::Valid, "{prefix}");
    crate::operate::apply(ctx, config, "test").await.unwrap();
    crate::tasks::expand_config::run(ctx, crate::work::ExpandConfig { prefix: prefix.clone() })
        .await
        .unwrap();
    let id = format!("{prefix}-0");
    // create: a few steps at most (Compute Engine: the insert, then its operation), then the
    // machine is recorded; more calls change nothing.
    for _ in 0..3 {
        create_instance::run(ctx, CreateInstance { id: id.clone() }).await.unwrap();
    }
    let vm = ctx.ports.store.vm(&id).await.unwrap().unwrap();
    let placed = vm.value.instance.clone().expect("machine recorded");
    let p = ctx.providers.get(ctx, &vm.value.provider).await.unwrap().clone();
    let again = p.create(ctx, vm.clone()).await.unwrap();
    assert_eq!(again, Next::Done, "{prefix}: created already");
    let now = ctx.ports.store.vm(&id).await.unwrap().unwrap();
    assert_eq!(now.value.instance, Some(placed), "{prefix}: the same machine");
    assert!(matches!(p.check(ctx, &now.value).await.unwrap(), Health::Up(_)), "{prefix}: up");
    // remove: through the handler once (it marks the removal), then again directly.
    destroy_instance::run(ctx, DestroyInstance::of(&now.value).unwrap()).await.unwrap();
    let removing = ctx.ports.store.vm(&id).await.unwrap().unwrap().value;
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
        match ctx.validate(&mut c.clone()).await {
            Verdict::Invalid(e) => fields.push((e.field, e.rule.contains("type"))),
            v => panic!("{v:?}"),
        }
    }
    assert_eq!(fields, [("linux.provider".into(), true), ("lab.machines".into(), true)]);
    // A static Config names its provider: the default is of type gce.
    let unnamed = Config { provider: String::new(), ..listed("lab", &["mac-1"]) };
    assert!(matches!(ctx.validate(&mut unnamed.clone()).await, Verdict::Invalid(_)));
}

#[tokio::test]
async fn a_hostname_keeps_its_vm_id_while_the_list_changes_around_it() {
    let (mut ctx, _) = Ctx::test();
    both(&mut ctx);
    let ids = async |ctx: &Ctx, machines: &[&str]| {
        crate::operate::apply(ctx, listed("lab", machines), "test").await.unwrap();
        let rec = ctx.ports.store.config("lab").await.unwrap().unwrap().value;
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
    assert!(!ctx.ports.store.vm("lab-4").await.unwrap().unwrap().value.drained);
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
    assert!(ctx.ports.store.config("other").await.unwrap().is_none());
    // Its own list again is no clash.
    crate::operate::apply(&ctx, listed("lab", &["b", "a"]), "test").await.unwrap();
}

/// Makes the static pool `lab` of `machines` and records their machines.
async fn made(ctx: &Ctx, machines: &[&str]) {
    crate::operate::apply(ctx, listed("lab", machines), "test").await.unwrap();
    crate::tasks::expand_config::run(ctx, crate::work::ExpandConfig { prefix: "lab".into() }).await.unwrap();
    for t in ctx.finished::<CreateInstance>().await {
        create_instance::run(ctx, t).await.unwrap();
    }
}

#[tokio::test]
async fn a_static_machines_bot_from_before_its_vm_is_its_own_unless_swarming_deleted_it() {
    use crate::model::Bot;
    use crate::tasks::manage_bot::run as manage;
    use crate::work::ManageBot;
    let (mut ctx, f) = Ctx::test();
    both(&mut ctx);
    let long_ago = ctx.now() - chrono::Duration::days(30);
    let bot = |deleted| Bot {
        id: "mac-1".into(),
        first_seen: Some(long_ago),
        last_seen: Some(ctx.now()),
        deleted,
        is_dead: deleted,
        ..Bot::default()
    };
    // A deleted bot (the previous incarnation's, deleted by delete_bot) is not this one's.
    f.bots.bots.lock().unwrap().insert("mac-1".into(), bot(true));
    made(&ctx, &["mac-1"]).await;
    manage(&ctx, ManageBot { id: "lab-0".into() }).await.unwrap();
    assert_eq!(ctx.ports.store.vm("lab-0").await.unwrap().unwrap().value.connected, None);
    // The machine's bot, there for a month: connected.
    f.bots.bots.lock().unwrap().insert("mac-1".into(), bot(false));
    manage(&ctx, ManageBot { id: "lab-0".into() }).await.unwrap();
    assert_eq!(ctx.ports.store.vm("lab-0").await.unwrap().unwrap().value.connected, Some(long_ago));
    assert!(ctx.taken::<DestroyInstance>().await.is_empty());
    // No lifetime: never retired, however long it runs.
    f.clock.advance(chrono::Duration::days(400));
    f.bots.bots.lock().unwrap().get_mut("mac-1").unwrap().last_seen = Some(ctx.now());
    manage(&ctx, ManageBot { id: "lab-0".into() }).await.unwrap();
    assert!(ctx.taken::<crate::work::TerminateBot>().await.is_empty());
}

#[tokio::test]
async fn a_plan_of_a_list_edit_names_the_vms_kept_drained_and_made() {
    let (mut ctx, _) = Ctx::test();
    both(&mut ctx);
    made(&ctx, &["a", "b", "c"]).await;
    let input = crate::model::PlanInput { config: Some(listed("lab", &["c", "d", "a"])), amount: None };
    let plan = crate::operate::plan(&ctx, "lab", input).await.unwrap();
    assert!(plan.problems.is_empty(), "{:?}", plan.problems);
    assert_eq!(
        (plan.keep, plan.drain, plan.create),
        (vec!["lab-0".to_owned(), "lab-2".to_owned()], vec!["lab-1".to_owned()], vec!["lab-3".to_owned()])
    );
    assert_eq!(plan.amount, 3);
    let with_amount = crate::model::PlanInput { config: None, amount: Some(5) };
    assert!(crate::operate::plan(&ctx, "lab", with_amount).await.is_err(), "the list decides");
    assert_eq!(
        ctx.ports.store.config("lab").await.unwrap().unwrap().value.listed.next,
        3,
        "a plan writes nothing"
    );
}
