//! Unit tests of `tasks/pool_resources.rs`: a changed Config gets its new template, the old one
//! is kept while a VM of its revision is left and removed after, a failed removal is retried.

use super::*;
use crate::ports::compute::{ComputeError, Operation};
use crate::ports::store::Expect;

fn task() -> PoolResources {
    PoolResources { prefix: "linux".into() }
}

async fn record(ctx: &Ctx) -> crate::model::ConfigRecord {
    ctx.ports.store.config("linux").await.unwrap().unwrap().value
}

/// The Config changed to revision `r2` after its `r1` template was made.
async fn changed(ctx: &Ctx) {
    ctx.seed_config("linux", 3).await;
    assert_eq!(run(ctx, task()).await.unwrap(), Next::Done);
    let cur = ctx.ports.store.config("linux").await.unwrap().unwrap();
    let mut rec = cur.value;
    rec.revision = "r2".into();
    rec.config.attributes.disk[0].image = "global/images/y".into();
    assert!(ctx.ports.store.put_config(&rec, Expect::Version(cur.version)).await.unwrap());
}

fn templates(f: &crate::testing::Fakes) -> Vec<String> {
    f.compute.templates.lock().unwrap().keys().cloned().collect()
}

#[tokio::test]
async fn the_old_template_stays_while_a_vm_of_its_revision_is_left_and_goes_after() {
    let (ctx, f) = Ctx::test();
    changed(&ctx).await;
    let old = ctx.seed_vm("linux-0", |v| v.revision = "r1".into()).await;
    assert_eq!(run(&ctx, task()).await.unwrap(), Next::Done);
    assert_eq!(templates(&f), ["linux-r1", "linux-r2"], "the new one made, the old one kept: a VM uses it");
    assert!(!f.compute.calls().iter().any(|c| c.starts_with("delete_template")));
    let rec = record(&ctx).await;
    assert!(rec.resource("r2").unwrap().usable() && rec.resource("r1").unwrap().usable());
    // Its last VM gone: the old template goes, and the record forgets it.
    let cur = ctx.ports.store.vm(&old.id).await.unwrap().unwrap();
    assert!(ctx.ports.store.delete_vm(&old.id, cur.version).await.unwrap());
    assert_eq!(run(&ctx, task()).await.unwrap(), Next::Done);
    assert_eq!(templates(&f), ["linux-r2"]);
    let rec = record(&ctx).await;
    assert!(rec.resource("r1").is_none() && !rec.has_old_resources());
    assert_eq!(f.compute.calls().iter().filter(|c| c.starts_with("delete_template linux-r1 ")).count(), 1);
}

#[tokio::test]
async fn the_current_revision_s_template_is_never_removed() {
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", 3).await;
    run(&ctx, task()).await.unwrap();
    // No VM at all: still the Config's own.
    run(&ctx, task()).await.unwrap();
    assert_eq!(templates(&f), ["linux-r1"]);
    assert!(record(&ctx).await.resource("r1").unwrap().usable());
}

#[tokio::test]
async fn a_failed_removal_is_recorded_and_tried_again() {
    let (ctx, f) = Ctx::test();
    changed(&ctx).await;
    let unavailable = ComputeError::from_http(Some(503), "backendError", "try later");
    f.compute.template_calls.lock().unwrap().extend([Ok(None), Err(unavailable)]); // r2's insert, r1's delete
    assert!(run(&ctx, task()).await.is_err(), "the task fails: retried");
    let errors = ctx.ports.store.errors("linux").await.unwrap();
    assert!(errors.iter().any(|e| e.stage == "pool_resources" && e.message.contains("try later")), "{errors:?}");
    let r1 = record(&ctx).await.resource("r1").cloned().unwrap();
    assert!(r1.removing.is_some() && !r1.usable(), "no bulk names it from now on: {r1:?}");
    // A delete whose operation fails: a new attempt, a new requestId.
    let failed = ComputeError::from_operation("RESOURCE_IN_USE", Some(400), "in use");
    f.compute.template_calls.lock().unwrap().push_back(Ok(Some(Operation { name: "op-d".into(), done: true, error: Some(failed) })));
    assert!(run(&ctx, task()).await.is_err());
    assert_eq!(record(&ctx).await.resource("r1").unwrap().attempt, 1);
    assert_eq!(run(&ctx, task()).await.unwrap(), Next::Done);
    assert_eq!(templates(&f), ["linux-r2"]);
    assert!(record(&ctx).await.resource("r1").is_none());
    let deletes: Vec<String> = f.compute.calls().into_iter().filter(|c| c.starts_with("delete_template")).collect();
    assert_eq!(deletes.len(), 3, "{deletes:?}");
    assert_eq!(deletes[0], deletes[1], "sent again after a refusal: the same request");
    assert_ne!(deletes[1], deletes[2], "after a failed operation: a new one");
}

#[test]
fn a_resource_goes_once_it_is_not_the_current_revision_s_and_no_vm_uses_it() {
    use crate::model::{ConfigRecord, PoolResource};
    use std::collections::BTreeSet;
    let now = chrono::DateTime::UNIX_EPOCH;
    let mut rec = ConfigRecord { revision: "r3".into(), ..Default::default() };
    rec.resources = ["r1", "r2", "r3"].iter().map(|r| PoolResource::new(r, &format!("t-{r}"), now)).collect();
    let used: BTreeSet<String> = ["r2".to_owned()].into();
    assert_eq!(rec.unused(&used), vec!["r1".to_owned()], "r2 has VMs; r3 is current");
    assert_eq!(rec.unused(&BTreeSet::new()), vec!["r1".to_owned(), "r2".to_owned()]);
    assert!(rec.has_old_resources() && rec.needs_resources(), "nothing made for r3 yet");
    rec.resources.retain(|r| r.revision == "r3");
    rec.resources[0].ready = Some(now);
    assert!(!rec.has_old_resources() && !rec.needs_resources());
}
