//! Unit tests of the Config operations over the fakes: apply (new, replace, invalid, conflicts,
//! limits), delete, set_amount, pause and resume of one Config and of all.

use super::*;
use crate::model::{ConfigState, VmState};
use crate::operate::plan;
use crate::testing::config;
use crate::work::{CreateInstance, DrainVm, ExpandConfig};

/// A Config of `min` to `max` VMs.
fn ranged(prefix: &str, min: u32, max: u32) -> Config {
    let mut c = config(prefix, min);
    c.amount.max = max;
    c
}

async fn record(ctx: &Ctx, prefix: &str) -> ConfigRecord {
    ctx.ports.store.config(prefix).await.unwrap().expect("stored").value
}

#[tokio::test]
async fn apply_creates_an_api_config_and_expands_it_at_once() {
    let (ctx, _) = Ctx::test();
    let (rec, new) = apply(&ctx, ranged("linux", 2, 5), "alice").await.unwrap();
    assert!(new);
    assert_eq!((rec.source.as_str(), rec.current_amount, rec.verified), (API_SOURCE, 2, true));
    assert!(!rec.from_file());
    assert_eq!(record(&ctx, "linux").await, rec);
    assert_eq!(ctx.taken::<ExpandConfig>().await, [ExpandConfig { prefix: "linux".into() }]);
    // The same again: nothing new, nothing rewritten.
    let version = ctx.ports.store.config("linux").await.unwrap().unwrap().version;
    let (again, new) = apply(&ctx, ranged("linux", 2, 5), "alice").await.unwrap();
    assert!(!new && again == rec);
    assert_eq!(ctx.ports.store.config("linux").await.unwrap().unwrap().version, version);
}

#[tokio::test]
async fn apply_replaces_an_api_config_keeping_its_amount_and_pause() {
    let (ctx, _) = Ctx::test();
    apply(&ctx, ranged("linux", 1, 5), "alice").await.unwrap();
    set_amount(&ctx, "linux", 4, "alice").await.unwrap();
    pause(&ctx, "linux", "image rollout", "bob").await.unwrap();
    let mut next = ranged("linux", 1, 6);
    next.attributes.machine_type = "zones/{{.Zone}}/machineTypes/e2-large".into();
    let (rec, new) = apply(&ctx, next.clone(), "alice").await.unwrap();
    assert!(!new);
    assert_eq!(rec.config, next);
    assert_eq!(rec.current_amount, 4, "kept");
    assert_eq!(rec.paused.as_ref().map(|p| p.by.as_str()), Some("bob"), "kept");
    // Kept, but clamped by the new bounds.
    let (rec, _) = apply(&ctx, ranged("linux", 1, 3), "alice").await.unwrap();
    assert_eq!(rec.current_amount, 3);
}

#[tokio::test]
async fn an_invalid_config_lists_every_problem_and_stores_nothing() {
    let (ctx, _) = Ctx::test();
    let mut bad = config("linux", 1);
    bad.lifetime = crate::config::Secs(0);
    bad.attributes.project.clear();
    bad.swarming.clear();
    let want = bad.problems();
    assert!(want.len() >= 3, "{want:?}");
    match apply(&ctx, bad, "alice").await {
        Err(OpError::Invalid(got)) => assert_eq!(got, want),
        other => panic!("{other:?}"),
    }
    assert!(ctx.ports.store.config("linux").await.unwrap().is_none());
    assert!(ctx.taken::<ExpandConfig>().await.is_empty());
    // A zone the project lacks is found as a file's is.
    let mut zone = config("linux", 1);
    zone.attributes.zone = "us-central1-x".into();
    match apply(&ctx, zone, "alice").await {
        Err(OpError::Invalid(got)) => assert_eq!(got[0].field, "linux.attributes.zone"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_amount_over_max_amount_is_invalid() {
    let (ctx, _) = Ctx::test();
    match apply(&ctx, config("linux", 20_000), "alice").await {
        Err(OpError::Invalid(got)) => {
            assert_eq!(got.len(), 1);
            assert_eq!(got[0].field, "linux.amount");
            assert!(got[0].rule.contains("max_amount"), "{got:?}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_prefix_a_file_holds_or_one_clashing_with_another_config_is_a_conflict() {
    let (ctx, _) = Ctx::test();
    ctx.seed_config("linux", 2).await;
    let before = record(&ctx, "linux").await;
    match apply(&ctx, config("linux", 3), "alice").await {
        Err(OpError::Conflict(why)) => assert_eq!(
            why,
            "prefix linux is held by a Config file; the API may change its amount and pause state only"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(record(&ctx, "linux").await, before, "untouched");
    for clash in ["lin", "linux-big"] {
        match apply(&ctx, config(clash, 1), "alice").await {
            Err(OpError::Conflict(why)) => assert!(why.contains("one is a prefix of the other"), "{why}"),
            other => panic!("{clash}: {other:?}"),
        }
        assert!(ctx.ports.store.config(clash).await.unwrap().is_none());
    }
}

#[tokio::test]
async fn delete_orphans_an_api_config_and_refuses_a_file_one_or_a_missing_one() {
    let (ctx, _) = Ctx::test();
    apply(&ctx, config("mac", 1), "alice").await.unwrap();
    let rec = delete(&ctx, "mac", "alice").await.unwrap();
    let grace = ctx.settings.timing.config_delete_grace.chrono();
    assert_eq!((rec.orphaned, rec.delete_at), (Some(ctx.now()), Some(ctx.now() + grace)));
    assert_eq!(record(&ctx, "mac").await, rec);
    assert_eq!(ctx.ports.store.errors("mac").await.unwrap()[0].code, "orphaned");
    let st = crate::fleet::status::status(&*ctx.ports.store, "mac", ctx.now(), grace, false).await.unwrap();
    assert_eq!((st.state, st.delete_at, st.source.as_str()), (ConfigState::Orphaned, rec.delete_at, "api"));
    assert_eq!(delete(&ctx, "mac", "bob").await.unwrap(), rec, "deleting again changes nothing");
    // Applied again within the grace: cancelled.
    let (back, _) = apply(&ctx, config("mac", 1), "alice").await.unwrap();
    assert!(back.orphaned.is_none() && back.delete_at.is_none());

    ctx.seed_config("linux", 1).await;
    match delete(&ctx, "linux", "alice").await {
        Err(OpError::Conflict(why)) => assert!(why.contains("belongs to file linux.yaml"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(record(&ctx, "linux").await.orphaned.is_none());
    match delete(&ctx, "nope", "alice").await {
        Err(e @ OpError::NotFound(_)) => assert_eq!(e.to_string(), "Config nope not found"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn set_amount_is_clamped_by_the_amount_rules_for_any_source() {
    let (ctx, _) = Ctx::test();
    ctx.seed_config("linux", 1).await; // a file's, widened to 1..5 (no task pushed)
    let cur = ctx.ports.store.config("linux").await.unwrap().unwrap();
    let rec = ConfigRecord { config: ranged("linux", 1, 5), ..cur.value };
    assert!(ctx.ports.store.put_config(&rec, Expect::Version(cur.version)).await.unwrap());
    assert_eq!(set_amount(&ctx, "linux", 4, "alice").await.unwrap().current_amount, 4);
    assert_eq!(ctx.taken::<ExpandConfig>().await.len(), 1, "it converges at once");
    assert_eq!(set_amount(&ctx, "linux", 9, "alice").await.unwrap().current_amount, 5);
    assert_eq!(set_amount(&ctx, "linux", 0, "alice").await.unwrap().current_amount, 1);
    ctx.seed_config("mac", 2).await; // min = max = 2
    assert_eq!(set_amount(&ctx, "mac", 7, "alice").await.unwrap().current_amount, 2);
    assert!(matches!(set_amount(&ctx, "nope", 1, "alice").await, Err(OpError::NotFound(_))));
}

#[tokio::test]
async fn a_paused_config_creates_nothing_until_resumed_and_resume_pushes_expansion() {
    let (ctx, _) = Ctx::test();
    ctx.seed_config("linux", 3).await;
    ctx.seed_vm("linux-0", |_| {}).await; // made, not yet sent
    ctx.seed_vm("linux-1", crate::testing::created(ctx.now())).await; // running
    let rec = pause(&ctx, "linux", "bad image", "bob").await.unwrap();
    let p = rec.paused.clone().expect("paused");
    assert_eq!((p.by.as_str(), p.reason.as_str(), p.at), ("bob", "bad image", ctx.now()));
    let again = pause(&ctx, "linux", "other", "carol").await.unwrap();
    assert_eq!(again.paused, Some(p.clone()), "the first pause stays");
    let st =
        crate::fleet::status::status(&*ctx.ports.store, "linux", ctx.now(), chrono::Duration::zero(), false)
            .await
            .unwrap();
    assert_eq!((st.paused, st.paused_all, st.source.as_str()), (Some(p), false, "linux.yaml"));
    crate::tasks::expand_config::run(&ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
    assert!(ctx.taken::<CreateInstance>().await.is_empty(), "paused: nothing created");

    let rec = resume(&ctx, "linux", "bob").await.unwrap();
    assert!(rec.paused.is_none() && record(&ctx, "linux").await.paused.is_none());
    assert_eq!(ctx.taken::<ExpandConfig>().await, [ExpandConfig { prefix: "linux".into() }]);
    assert_eq!(ctx.taken::<CreateInstance>().await, [CreateInstance { id: "linux-0".into() }]);
    let looked: Vec<String> = ctx.taken::<crate::work::ManageBot>().await.into_iter().map(|t| t.id).collect();
    assert_eq!(looked, ["linux-1"], "a VM kept past its deadline is looked at again at once");
    crate::tasks::expand_config::run(&ctx, ExpandConfig { prefix: "linux".into() }).await.unwrap();
    assert_eq!(ctx.taken::<CreateInstance>().await.len(), 1);
    assert!(matches!(pause(&ctx, "nope", "x", "bob").await, Err(OpError::NotFound(_))));
}

#[tokio::test]
async fn the_global_pause_holds_every_config_until_lifted() {
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", 2).await;
    ctx.seed_config("mac", 1).await;
    assert_eq!(paused_all(&ctx).await.unwrap(), None);
    let p = pause_all(&ctx, "incident 42", "bob").await.unwrap();
    assert_eq!(pause_all(&ctx, "other", "carol").await.unwrap(), p, "the first pause stays");
    assert_eq!(paused_all(&ctx).await.unwrap(), Some(p.clone()));
    assert_eq!(
        crate::safety::pause::paused(&ctx, Some(&record(&ctx, "mac").await)).await.unwrap(),
        Some(p.clone())
    );
    for prefix in ["linux", "mac"] {
        crate::tasks::expand_config::run(&ctx, ExpandConfig { prefix: prefix.into() }).await.unwrap();
    }
    assert!(ctx.taken::<CreateInstance>().await.is_empty());
    let report = crate::fleet::status::report(
        &*ctx.ports.store,
        &*ctx.ports.buckets,
        &[],
        ctx.now(),
        chrono::Duration::zero(),
        false,
        &ctx.settings.trust,
    )
    .await
    .unwrap();
    assert_eq!(report.paused, Some(p));
    assert!(report.configs.iter().all(|c| c.paused_all && c.paused.is_none()));
    // A paused Config stays paused when the global pause is lifted.
    pause(&ctx, "mac", "its own", "bob").await.unwrap();
    resume_all(&ctx, "bob").await.unwrap();
    assert_eq!(paused_all(&ctx).await.unwrap(), None);
    let mut woken: Vec<String> = ctx.taken::<ExpandConfig>().await.into_iter().map(|t| t.prefix).collect();
    woken.sort();
    assert_eq!(woken, ["linux", "mac"]);
    assert!(crate::safety::pause::paused(&ctx, Some(&record(&ctx, "mac").await)).await.unwrap().is_some());
    assert!(crate::safety::pause::paused(&ctx, Some(&record(&ctx, "linux").await)).await.unwrap().is_none());
    // A pause record that does not decode counts as a pause, and is replaced by the next one.
    f.store.plant_corrupt_pause();
    let broken = paused_all(&ctx).await.unwrap().expect("fails safe");
    assert!(broken.reason.contains("does not decode"), "{broken:?}");
    assert!(crate::safety::pause::paused(&ctx, Some(&record(&ctx, "linux").await)).await.unwrap().is_some());
    assert_eq!(pause_all(&ctx, "fixed", "bob").await.unwrap().reason, "fixed");
}

#[tokio::test]
async fn an_api_config_goes_the_whole_way_and_drains_after_its_grace() {
    let (mut ctx, f) = Ctx::test();
    let dir = std::env::temp_dir().join(format!("gce-backend-operate-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    ctx.settings.configs_dir = dir.clone();
    apply(&ctx, config("mac", 1), "alice").await.unwrap();
    ctx.seed_vm("mac-0", crate::testing::created(ctx.now())).await;
    crate::cron::import_configs::run(&ctx).await.unwrap();
    assert!(record(&ctx, "mac").await.orphaned.is_none(), "no file holds it, and none needs to");
    delete(&ctx, "mac", "alice").await.unwrap();
    // A broken file blocks deleting file Configs, not one deleted over the API.
    std::fs::write(dir.join("broken.yaml"), "").unwrap();
    f.clock.advance(ctx.settings.timing.config_delete_grace.chrono() - chrono::Duration::seconds(1));
    crate::cron::import_configs::run(&ctx).await.unwrap();
    assert!(ctx.ports.store.config("mac").await.unwrap().is_some(), "within the grace");
    f.clock.advance(chrono::Duration::seconds(2));
    crate::cron::import_configs::run(&ctx).await.unwrap();
    assert!(ctx.ports.store.config("mac").await.unwrap().is_none());
    assert_eq!(ctx.taken::<DrainVm>().await, [DrainVm { id: "mac-0".into() }]);
    let e = &ctx.ports.store.errors("mac").await.unwrap()[0];
    assert!(e.code == "deleted" && e.message.contains("deleted over the API"), "{e:?}");
    let _ = std::fs::remove_dir_all(&dir);
    // Its VMs are listed until they are gone.
    let (vms, _) = crate::operate::list_vms(&ctx, "mac", None, None, None, 10).await.unwrap();
    assert_eq!(vms[0].state, VmState::Running);
    assert!(plan(&ctx, "mac", Default::default()).await.is_err(), "no Config to plan against");
}

#[tokio::test]
async fn a_creation_or_a_replacement_never_overwrites_what_it_did_not_see() {
    use crate::operate::{Must, apply_expecting};
    let (ctx, _) = Ctx::test();
    let (rec, new) = apply_expecting(&ctx, config("mac", 1), "alice", Must::Absent).await.unwrap();
    assert!(new && rec.source == "api");
    match apply_expecting(&ctx, config("mac", 2), "bob", Must::Absent).await {
        Err(OpError::Conflict(why)) => assert!(why.contains("exists"), "{why}"),
        other => panic!("{other:?}"),
    }
    let v = ctx.ports.store.config("mac").await.unwrap().unwrap().version;
    apply_expecting(&ctx, config("mac", 2), "alice", Must::Version(v)).await.unwrap();
    match apply_expecting(&ctx, config("mac", 3), "bob", Must::Version(v)).await {
        Err(OpError::Conflict(why)) => assert!(why.contains("changed since it was read"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(record(&ctx, "mac").await.config.amount.max, 2, "bob's stale write was refused");
}

#[tokio::test(start_paused = true)]
async fn admission_is_one_at_a_time_so_two_clashing_prefixes_are_never_both_stored() {
    let (ctx, _) = Ctx::test();
    // Another process holds the admission claim and stores `linux` under it.
    assert!(
        ctx.ports
            .store
            .lease(crate::env::ADMISSION, "other", std::time::Duration::from_secs(60))
            .await
            .unwrap()
    );
    let waiting = tokio::spawn({
        let ctx = ctx.clone();
        async move { apply(&ctx, config("linux-a", 1), "alice").await }
    });
    // Paused time: this sleep ends only once the spawned task has run as far as it can.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(!waiting.is_finished(), "the apply waits for the claim");
    ctx.seed_config_from("linux", 1, crate::model::API_SOURCE).await; // as another process would
    ctx.ports.store.release(crate::env::ADMISSION, "other").await.unwrap();
    match waiting.await.unwrap() {
        Err(OpError::Conflict(why)) => assert!(why.contains("one is a prefix of the other"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(ctx.ports.store.config("linux-a").await.unwrap().is_none());
    // The claim is given back after each apply.
    apply(&ctx, config("mac", 1), "alice").await.unwrap();
    assert!(
        ctx.ports
            .store
            .lease(crate::env::ADMISSION, "next", std::time::Duration::from_secs(1))
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn a_from_file_item_over_the_api_is_refused_saying_why() {
    let (ctx, _) = Ctx::test();
    let mut c = config("linux", 1);
    c.attributes.metadata.push(crate::config::Metadata {
        unknown: Default::default(),
        from_text: None,
        from_file: Some("k:/etc/passwd".into()),
    });
    match apply(&ctx, c, "alice").await {
        Err(OpError::Invalid(got)) => {
            assert_eq!(got.len(), 1, "{got:?}");
            assert_eq!(got[0].field, "linux.attributes.metadata[0].from_file");
            assert!(got[0].rule.contains("reads no files"), "{}", got[0]);
        }
        other => panic!("{other:?}"),
    }
    assert!(ctx.ports.store.config("linux").await.unwrap().is_none());
}

#[tokio::test(start_paused = true)]
async fn a_lease_left_by_a_dead_process_stops_blocking_within_seconds() {
    let (ctx, _) = Ctx::test();
    // A process died holding the lease (kill -9 mid-apply): nobody renews it.
    assert!(
        ctx.ports
            .store
            .lease(crate::env::ADMISSION, "dead", std::time::Duration::from_secs(3))
            .await
            .unwrap()
    );
    // The caller waits at most 10 s: admitted only if the lease ends before (a 60 s claim
    // answered a Conflict here).
    apply(&ctx, config("linux", 1), "alice").await.expect("admitted once the dead holder's lease ends");
    assert!(ctx.ports.store.config("linux").await.unwrap().is_some());
}

#[tokio::test(start_paused = true)]
async fn the_lease_is_renewed_while_an_admission_runs() {
    let (ctx, _) = Ctx::test();
    let held = ctx.admitting(async |_| -> Result<bool, TaskError> {
        // Longer than the lease: only renewal keeps others out.
        tokio::time::sleep(std::time::Duration::from_secs(10)).await;
        Ok(ctx.ports.store.lease(crate::env::ADMISSION, "other", std::time::Duration::from_secs(3)).await?)
    });
    assert!(!held.await.unwrap(), "still held after 10 s");
    assert!(
        ctx.ports
            .store
            .lease(crate::env::ADMISSION, "other", std::time::Duration::from_secs(3))
            .await
            .unwrap(),
        "released"
    );
}

#[tokio::test]
async fn a_write_whose_lease_was_taken_over_lands_nowhere() {
    let (ctx, _) = Ctx::test();
    let rec = crate::model::ConfigRecord { config: config("linux", 1), ..Default::default() };
    let wrote = ctx
        .admitting(async |fence| -> Result<bool, TaskError> {
            // This holder stalled past its lease, and another process took it.
            ctx.ports.store.release(crate::env::ADMISSION, &fence.holder).await?;
            assert!(
                ctx.ports
                    .store
                    .lease(crate::env::ADMISSION, "next", std::time::Duration::from_secs(60))
                    .await?
            );
            Ok(ctx.ports.store.put_config_fenced(&rec, crate::ports::store::Expect::Absent, fence).await?)
        })
        .await
        .unwrap();
    assert!(!wrote, "the fence refused the late write");
    assert!(ctx.ports.store.config("linux").await.unwrap().is_none());
}

#[tokio::test(start_paused = true)]
async fn a_lapsed_lease_is_not_taken_back_by_its_renewal_so_the_late_write_lands_nowhere() {
    let (ctx, _) = Ctx::test();
    let rec = crate::model::ConfigRecord { config: config("linux", 1), ..Default::default() };
    let wrote = ctx
        .admitting(async |fence| -> Result<bool, TaskError> {
            // This holder stalls: its lease lapses, another process holds it and gives it back.
            ctx.ports.store.release(crate::env::ADMISSION, &fence.holder).await?;
            assert!(
                ctx.ports
                    .store
                    .lease(crate::env::ADMISSION, "next", std::time::Duration::from_secs(3))
                    .await?
            );
            ctx.ports.store.release(crate::env::ADMISSION, "next").await?;
            // Renewal ticks come and go while it still works.
            tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            Ok(ctx.ports.store.put_config_fenced(&rec, crate::ports::store::Expect::Absent, fence).await?)
        })
        .await
        .unwrap();
    assert!(!wrote, "the renewal did not take the free lease back: the fence refused the write");
    assert!(ctx.ports.store.config("linux").await.unwrap().is_none());
}

#[tokio::test]
async fn a_regional_config_over_the_api_waits_for_its_zones_and_is_filled_again_when_applied_again() {
    let (ctx, f) = Ctx::test();
    *f.compute.zones.lock().unwrap() = ["us-central1-a", "us-east1-b"].map(String::from).to_vec();
    let mut c = crate::testing::zoned(config("linux", 2), &[]);
    c.region = "us-central1".into();
    // Compute cannot list the zones: not applied, and the caller is told to try again.
    *f.compute.catalog_fail.lock().unwrap() =
        Some(crate::ports::compute::ComputeError::from_http(Some(503), "", "down"));
    let e = apply(&ctx, c.clone(), "alice").await.unwrap_err();
    assert!(e.transient() && e.to_string().contains("linux.region: its zones are not known"), "{e}");
    assert!(ctx.ports.store.config("linux").await.unwrap().is_none());
    *f.compute.catalog_fail.lock().unwrap() = None;
    let (rec, _) = apply(&ctx, c, "alice").await.unwrap();
    let zones: Vec<&str> = rec.config.zones.iter().map(|z| z.zone.as_str()).collect();
    assert_eq!(zones, ["us-central1-a"]);
    // Read back and applied again once the project has another zone there (after the catalog's
    // cache): the new zone is taken up.
    f.compute.zones.lock().unwrap().push("us-central1-c".into());
    f.clock.advance(chrono::Duration::minutes(11));
    let (again, _) = apply(&ctx, record(&ctx, "linux").await.config, "alice").await.unwrap();
    let zones: Vec<&str> = again.config.zones.iter().map(|z| z.zone.as_str()).collect();
    assert_eq!(zones, ["us-central1-a", "us-central1-c"]);
}
