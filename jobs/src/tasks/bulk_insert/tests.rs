//! Unit tests of `tasks/bulk_insert.rs` (and the bulk creation of the Compute Engine provider,
//! `providers/gce_send.rs` and `providers/gce_bulk.rs`): one bulk for a pool, the gather, a
//! crash after the claim, members not made, a refusal, the places.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::config::{Limits, labels};
use crate::model::Vm;
use crate::ports::compute::{ComputeError, Operation};
use crate::providers::gce_bulk::bulk_request_id;
use crate::testing::FakeCompute;
use crate::work::{CreateInstance, ManageBot};

const N: u32 = 12;

/// A Config of `N` VMs, `have` of their records made (none sent).
async fn pool(ctx: &Ctx, have: u32) -> Vec<Vm> {
    ctx.seed_config("linux", N).await;
    let mut out = Vec::new();
    for i in 0..have {
        out.push(ctx.seed_vm(&format!("linux-{i}"), |_| {}).await);
    }
    out
}

async fn vm(ctx: &Ctx, id: &str) -> Vm {
    ctx.ports.store.vm(id).await.unwrap().unwrap().value
}

fn task() -> BulkInsert {
    BulkInsert { prefix: "linux".into() }
}

#[tokio::test]
async fn a_pool_goes_in_one_bulk_and_each_vm_records_its_own_instance() {
    let (ctx, f) = Ctx::test();
    let vms = pool(&ctx, N).await;
    assert_eq!(run(&ctx, task()).await.unwrap(), Next::Done);
    let refs: Vec<&Vm> = vms.iter().collect();
    let rid = bulk_request_id(&refs);
    let names: Vec<String> = vms.iter().map(|v| v.hostname.clone()).collect();
    assert_eq!(f.compute.calls(), [format!("bulk_insert {} {rid}", names.join(",")), "list".to_owned()]);
    for v in &vms {
        let got = vm(&ctx, &v.id).await;
        assert!(got.instance.is_some(), "{} recorded", v.id);
        assert_eq!((got.batch.as_str(), got.operation.as_str()), (rid.as_str(), ""), "the bulk kept, its operation done");
    }
    // The instances carry our labels and the bulk's, and no VM's: Compute labels them alike.
    let made = f.compute.instances.lock().unwrap().get(&names[3]).cloned().unwrap();
    assert_eq!(made.labels.get(labels::BATCH), Some(&rid));
    assert_eq!(made.labels.get(labels::CONFIG).map(String::as_str), Some("linux"));
    assert!(!made.labels.contains_key(labels::VM) && made.belongs_to("linux-3", "test"));
    assert!(!made.belongs_to("linux-4", "test"), "the name tells the VM");
    assert_eq!(ctx.delayed::<ManageBot>().await.len(), N as usize, "each bot is looked for after boot");
    let m = ctx.metrics.text();
    let line = r#"gce_backend_instance_operations_total{config="linux",zone="z",op="insert",result="ok",code=""} 12"#;
    assert!(m.lines().any(|l| l == line), "{line} in\n{m}");
}

#[tokio::test]
async fn it_gathers_while_records_are_made_then_sends_what_is_there() {
    let (mut ctx, f) = Ctx::test();
    ctx.settings.limits = Arc::new(Limits { bulk_min: 3, ..Limits::default() });
    pool(&ctx, 4).await;
    let next = run(&ctx, task()).await.unwrap();
    assert!(matches!(next, Next::After(d) if d <= Duration::from_millis(250)), "{next:?}");
    assert!(f.compute.calls().is_empty(), "more are coming");
    f.clock.advance(chrono::Duration::seconds(9));
    run(&ctx, task()).await.unwrap();
    assert!(f.compute.calls().is_empty(), "still within bulk_gather");
    f.clock.advance(chrono::Duration::seconds(2));
    run(&ctx, task()).await.unwrap();
    assert!(f.compute.calls()[0].starts_with("bulk_insert linux-0-abcd,linux-1-abcd,linux-2-abcd,linux-3-abcd "));
}

#[tokio::test]
async fn a_group_smaller_than_bulk_min_goes_one_insert_each() {
    let (ctx, f) = Ctx::test();
    pool(&ctx, N).await;
    for i in 0..N - 2 {
        let id = format!("linux-{i}");
        crate::records::writes::update_vm(&ctx, &id, |v| {
            crate::testing::created(v.configured)(v);
            true
        })
        .await
        .unwrap();
    }
    run(&ctx, task()).await.unwrap();
    let calls = f.compute.calls();
    assert!(calls.iter().all(|c| !c.starts_with("bulk_insert")), "{calls:?}");
    assert_eq!(calls.iter().filter(|c| c.starts_with("insert ")).count(), 2, "{calls:?}");
    assert!(vm(&ctx, "linux-11").await.instance.is_some());
}

#[tokio::test]
async fn a_bulk_claimed_before_a_crash_is_sent_again_the_same_and_one_in_flight_is_only_looked_at() {
    let (ctx, f) = Ctx::test();
    let vms = pool(&ctx, N).await;
    let refs: Vec<&Vm> = vms.iter().collect();
    let rid = bulk_request_id(&refs);
    // A run claimed them all, then died before the call.
    for v in &vms {
        crate::records::writes::update_vm(&ctx, &v.id, |v| {
            v.insert_sent = Some(v.configured);
            v.batch = rid.clone();
            true
        })
        .await
        .unwrap();
    }
    let pending = Operation { name: "op-bulk".into(), done: false, error: None };
    f.compute.inserts.lock().unwrap().push_back(Ok(pending.clone()));
    let next = run(&ctx, task()).await.unwrap();
    assert!(matches!(next, Next::After(_)), "{next:?}");
    let calls = f.compute.calls();
    assert!(calls.len() == 1 && calls[0].ends_with(&format!(" {rid}")), "the same request: {calls:?}");
    let noted: Vec<String> = vms.iter().map(|v| v.id.clone()).collect();
    let mut ops = Vec::new();
    for id in &noted {
        ops.push(vm(&ctx, id).await.operation);
    }
    assert_eq!(ops.iter().filter(|o| *o == "op-bulk").count(), 1, "its operation noted on one member: {ops:?}");
    // In flight: looked at, not sent again; a create_instance of a member only hands it back.
    f.compute.operations.lock().unwrap().push_back(Ok(Some(pending)));
    run(&ctx, task()).await.unwrap();
    assert_eq!(f.compute.calls()[1], "operation op-bulk");
    crate::tasks::create_instance::run(&ctx, CreateInstance { id: "linux-5".into() }).await.unwrap();
    assert_eq!(f.compute.calls().len(), 2, "no insert of its own");
    assert_eq!(ctx.keys::<BulkInsert>().await, ["linux"]);
}

#[tokio::test]
async fn members_not_made_go_again_alone_with_their_next_attempt() {
    let (ctx, f) = Ctx::test();
    let vms = pool(&ctx, N).await;
    let refs: Vec<&Vm> = vms.iter().collect();
    let rid = bulk_request_id(&refs);
    // Compute made two of them only.
    f.compute.inserts.lock().unwrap().push_back(Ok(Operation { name: "op-bulk".into(), done: true, error: None }));
    for v in &vms[..2] {
        let labels = [(labels::DEPLOYMENT, "test"), (labels::CONFIG, "linux"), (labels::BATCH, rid.as_str())];
        f.compute.instances.lock().unwrap().insert(v.hostname.clone(), FakeCompute::instance(&v.hostname, &labels));
    }
    run(&ctx, task()).await.unwrap();
    assert!(vm(&ctx, "linux-1").await.instance.is_some());
    let rest = vm(&ctx, "linux-2").await;
    assert!(rest.instance.is_none() && rest.batch.is_empty() && rest.insert_sent.is_none());
    assert_eq!(rest.insert_attempt, 1, "its next insert has a new requestId");
    assert_eq!(ctx.taken::<CreateInstance>().await.len(), N as usize - 2);
    let e = &ctx.ports.store.errors("linux").await.unwrap()[0];
    assert!(e.stage == "bulk_insert" && e.message.contains("10 of its VMs not made"), "{e:?}");
    // Sent again alone, as create_instance does for a later attempt.
    f.compute.calls.lock().unwrap().clear();
    crate::tasks::create_instance::run(&ctx, CreateInstance { id: "linux-2".into() }).await.unwrap();
    assert!(f.compute.calls()[0].starts_with("insert linux-2-abcd "), "{:?}", f.compute.calls());
}

#[tokio::test]
async fn a_bulk_refused_for_want_of_room_backs_the_zone_off_and_keeps_each_attempt() {
    let (ctx, f) = Ctx::test();
    pool(&ctx, N).await;
    let no_room = ComputeError::from_http(Some(503), "insufficientCapacity", "no room in the zone");
    f.compute.inserts.lock().unwrap().push_back(Err(no_room));
    assert_eq!(run(&ctx, task()).await.unwrap(), Next::Done);
    let v = vm(&ctx, "linux-4").await;
    assert!(v.batch.is_empty() && v.insert_sent.is_none() && v.insert_attempt == 0, "{v:?}");
    let b = ctx.ports.store.backoff("test-project", "z").await.unwrap();
    assert!(b.is_some_and(|b| b.until > ctx.now()), "the zone backs off");
    assert_eq!(ctx.taken::<CreateInstance>().await.len(), N as usize, "each waits in create_instance");
    // While the zone backs off, a run sends nothing.
    f.compute.calls.lock().unwrap().clear();
    run(&ctx, task()).await.unwrap();
    assert!(f.compute.calls().is_empty(), "{:?}", f.compute.calls());
}

#[tokio::test]
async fn a_bulk_waits_for_a_place_when_the_project_runs_its_most_at_once() {
    let (mut ctx, f) = Ctx::test();
    ctx.settings.limits = Arc::new(Limits { bulk_running: 1, ..Limits::default() });
    pool(&ctx, N).await;
    assert!(ctx.ports.buckets.enter("test-project/bulk", "another", 1, Duration::from_secs(60)).await.unwrap());
    assert_eq!(run(&ctx, task()).await.unwrap(), Next::After(Duration::from_millis(500)));
    assert!(f.compute.calls().is_empty());
    let v = vm(&ctx, "linux-0").await;
    assert!(v.batch.is_empty() && v.insert_sent.is_none(), "not claimed before it can go: {v:?}");
    ctx.ports.buckets.leave("test-project/bulk", "another").await.unwrap();
    assert_eq!(run(&ctx, task()).await.unwrap(), Next::Done);
    assert!(vm(&ctx, "linux-0").await.instance.is_some());
    assert!(ctx.ports.buckets.enter("test-project/bulk", "another", 1, Duration::from_secs(60)).await.unwrap(), "its place given back");
}

#[tokio::test]
async fn create_instance_hands_a_big_pool_s_first_inserts_to_the_bulk_and_sends_a_replacement_alone() {
    let (ctx, f) = Ctx::test();
    pool(&ctx, 3).await;
    crate::tasks::create_instance::run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
    assert!(f.compute.calls().is_empty());
    assert_eq!(ctx.taken::<BulkInsert>().await, [task()]);
    // All made but one: a replacement goes alone.
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", N).await;
    ctx.seed_vm("linux-0", |_| {}).await;
    for i in 1..N {
        ctx.seed_vm(&format!("linux-{i}"), crate::testing::created(ctx.now())).await;
    }
    crate::tasks::create_instance::run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
    assert!(f.compute.calls()[0].starts_with("insert linux-0-abcd "), "{:?}", f.compute.calls());
    assert!(ctx.taken::<BulkInsert>().await.is_empty());
}

#[tokio::test]
async fn bulks_in_flight_are_followed_while_more_are_gathered() {
    let (mut ctx, f) = Ctx::test();
    ctx.settings.limits = Arc::new(Limits { bulk_min: 3, ..Limits::default() });
    pool(&ctx, 4).await;
    run(&ctx, task()).await.unwrap();
    f.clock.advance(chrono::Duration::seconds(11));
    let pending = Operation { name: "op-bulk".into(), done: false, error: None };
    f.compute.inserts.lock().unwrap().push_back(Ok(pending.clone()));
    run(&ctx, task()).await.unwrap();
    assert_eq!(f.compute.calls().len(), 1, "{:?}", f.compute.calls());
    // Two more records come while the bulk runs: they are gathered, the bulk is followed.
    for i in 4..6 {
        ctx.seed_vm(&format!("linux-{i}"), |_| {}).await;
    }
    f.compute.operations.lock().unwrap().push_back(Ok(Some(Operation { done: true, ..pending })));
    let next = run(&ctx, task()).await.unwrap();
    assert!(matches!(next, Next::After(d) if d <= Duration::from_millis(250)), "{next:?}");
    assert_eq!(&f.compute.calls()[1..], ["operation op-bulk", "list"], "followed, nothing new sent");
    assert!(vm(&ctx, "linux-3").await.batch.is_empty(), "its bulk followed to its end");
    assert!(vm(&ctx, "linux-4").await.insert_sent.is_none(), "gathered, not sent");
}

#[tokio::test]
async fn a_bulk_names_its_config_s_template_once_made_and_sends_the_whole_instance_before() {
    let (mut ctx, f) = Ctx::test();
    ctx.settings.limits = Arc::new(Limits { bulk_min: 3, ..Limits::default() });
    // No template yet: the whole instance, as before.
    let first = pool(&ctx, 6).await;
    run(&ctx, task()).await.unwrap();
    f.clock.advance(chrono::Duration::seconds(11));
    run(&ctx, task()).await.unwrap();
    let bulks: Vec<String> = f.compute.calls().into_iter().filter(|c| c.starts_with("bulk_insert")).collect();
    assert_eq!(bulks.len(), 1, "{bulks:?}");
    assert!(!bulks[0].contains(" from "), "no template yet: {bulks:?}");
    assert!(vm(&ctx, &first[0].id).await.instance.is_some());
    // The Config's template of its revision made: the next bulk names it.
    let rec = ctx.ports.store.config("linux").await.unwrap().unwrap().value;
    assert_eq!(crate::providers::gce_template::ensure(&ctx, &rec).await.unwrap(), Next::Done);
    for i in 6..N {
        ctx.seed_vm(&format!("linux-{i}"), |_| {}).await;
    }
    run(&ctx, task()).await.unwrap();
    let bulks: Vec<String> = f.compute.calls().into_iter().filter(|c| c.starts_with("bulk_insert")).collect();
    assert_eq!(bulks.len(), 2, "{bulks:?}");
    assert!(bulks[1].ends_with(" from linux-r1"), "{bulks:?}");
    let made = f.compute.instances.lock().unwrap().get("linux-7-abcd").cloned().unwrap();
    assert_eq!(made.labels.get(labels::REVISION).map(String::as_str), Some("r1"));
    assert!(made.belongs_to("linux-7", "test"));
}

#[tokio::test]
async fn a_template_deleted_outside_is_made_again_and_its_bulk_sent_again_with_the_whole_instance() {
    let (mut ctx, f) = Ctx::test();
    ctx.settings.limits = Arc::new(Limits { bulk_min: 3, ..Limits::default() });
    let made = pool(&ctx, N).await;
    let rec = ctx.ports.store.config("linux").await.unwrap().unwrap().value;
    crate::providers::gce_template::ensure(&ctx, &rec).await.unwrap();
    f.compute.templates.lock().unwrap().clear(); // deleted by someone else
    // The bulk naming it is refused: nothing was made, the template is asked for again.
    assert_eq!(run(&ctx, task()).await.unwrap(), Next::After(Duration::from_millis(250)));
    let r = ctx.ports.store.config("linux").await.unwrap().unwrap().value.resources[0].clone();
    assert!(r.ready.is_none() && r.attempt == 1, "{r:?}");
    assert_eq!(ctx.finished::<crate::work::PoolResources>().await.len(), 1);
    let errors = ctx.ports.store.errors("linux").await.unwrap();
    assert!(errors.iter().any(|e| e.message.contains("instance template linux-r1 is gone")), "{errors:?}");
    // Sent again: the same members and requestId, with the whole instance; each VM is made.
    run(&ctx, task()).await.unwrap();
    let bulks: Vec<String> = f.compute.calls().into_iter().filter(|c| c.starts_with("bulk_insert")).collect();
    assert_eq!(bulks.len(), 2, "{bulks:?}");
    assert!(bulks[0].ends_with(" from linux-r1"), "{bulks:?}");
    let parts = |call: &str| {
        let mut words: Vec<String> = call.split(' ').map(str::to_owned).collect();
        let mut names: Vec<String> = words[1].split(',').map(str::to_owned).collect();
        names.sort();
        words[1] = names.join(",");
        words
    };
    let (first, again) = (parts(&bulks[0]), parts(&bulks[1]));
    assert_eq!(first[..3], again[..], "the same members and requestId, without the template");
    for v in &made {
        assert!(vm(&ctx, &v.id).await.instance.is_some(), "{}", v.id);
    }
    // The template is made again, a new request, and the next bulks name it.
    let rec = ctx.ports.store.config("linux").await.unwrap().unwrap().value;
    assert_eq!(crate::providers::gce_template::ensure(&ctx, &rec).await.unwrap(), Next::Done);
    assert!(f.compute.templates.lock().unwrap().contains_key("linux-r1"));
    assert!(ctx.ports.store.config("linux").await.unwrap().unwrap().value.resources[0].usable());
}

#[tokio::test]
async fn vms_of_an_older_revision_are_not_made_from_the_new_template() {
    let (ctx, f) = Ctx::test();
    pool(&ctx, N).await;
    let cur = ctx.ports.store.config("linux").await.unwrap().unwrap();
    let mut rec = cur.value;
    rec.revision = "r2".into();
    assert!(ctx.ports.store.put_config(&rec, crate::ports::store::Expect::Version(cur.version)).await.unwrap());
    crate::providers::gce_template::ensure(&ctx, &rec).await.unwrap();
    run(&ctx, task()).await.unwrap();
    let bulks: Vec<String> = f.compute.calls().into_iter().filter(|c| c.starts_with("bulk_insert")).collect();
    assert_eq!(bulks.len(), 1, "{bulks:?}");
    assert!(!bulks[0].contains(" from "), "its VMs are r1's: {bulks:?}");
}

#[tokio::test]
async fn the_cron_pushes_one_bulk_insert_for_a_config_in_bulk_which_hands_its_retries_on() {
    let (ctx, _) = Ctx::test();
    // `linux` (12 VMs, 3 made, one of them on its second attempt) is in bulk; `mac` (2) is not.
    pool(&ctx, 3).await;
    crate::records::writes::update_vm(&ctx, "linux-2", |v| {
        v.insert_attempt = 1;
        true
    })
    .await
    .unwrap();
    ctx.seed_config("mac", 2).await;
    ctx.seed_vm("mac-0", |_| {}).await;
    crate::cron::create_instances::run(&ctx).await.unwrap();
    assert_eq!(ctx.taken::<BulkInsert>().await, [task()], "one task for the Config in bulk");
    assert_eq!(ctx.taken::<CreateInstance>().await, [CreateInstance { id: "mac-0".into() }], "one per VM of the other");
    // Gathering while records are made: nothing is handed on yet.
    assert!(matches!(run(&ctx, task()).await.unwrap(), Next::After(_)));
    assert!(ctx.taken::<CreateInstance>().await.is_empty());
    // All made, sent: the VM on its second attempt is create_instance's, handed on.
    for i in 3..N {
        ctx.seed_vm(&format!("linux-{i}"), |_| {}).await;
    }
    assert_eq!(run(&ctx, task()).await.unwrap(), Next::Done);
    assert_eq!(ctx.taken::<CreateInstance>().await, [CreateInstance { id: "linux-2".into() }]);
    assert!(vm(&ctx, "linux-0").await.instance.is_some() && vm(&ctx, "linux-2").await.instance.is_none());
}
