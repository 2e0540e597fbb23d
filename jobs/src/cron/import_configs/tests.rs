//! Unit tests of `import_configs`: ownership decided without effects (`plan`), then whole rounds
//! over a temporary directory, the memory store and a scripted Compute.

use std::path::PathBuf;

use crate::work::{DrainVm, ExpandConfig};
use chrono::Duration;

use super::*;
use crate::ports::compute::ComputeError;
use crate::testing::config;

fn ok(prefix: &str) -> Read {
    Ok(vec![(config(prefix, 1), "rev".into())])
}

fn files(list: &[(&str, Read)]) -> BTreeMap<String, Read> {
    list.iter().map(|(p, r)| ((*p).to_owned(), r.clone())).collect()
}

fn owners(list: &[(&str, &str)]) -> BTreeMap<String, String> {
    list.iter().map(|(p, s)| ((*p).to_owned(), (*s).to_owned())).collect()
}

#[test]
fn the_file_that_holds_a_prefix_keeps_it_whatever_the_names_order() {
    for copy in ["a-copy.yaml", "z-copy.yaml"] {
        let p = plan(
            &files(&[("linux.yaml", ok("linux")), (copy, ok("linux"))]),
            &owners(&[("linux", "linux.yaml")]),
        );
        assert_eq!(p.accept["linux"].0, "linux.yaml", "{copy}");
        assert_eq!(p.rejects.len(), 1);
        assert_eq!(p.rejects[0].0, copy);
        assert!(p.rejects[0].2.contains("belongs to linux.yaml"), "{:?}", p.rejects);
        assert!(p.blocked(), "a refused file blocks deletion that round");
    }
}

#[test]
fn a_new_prefix_claimed_twice_is_applied_nowhere() {
    let p = plan(&files(&[("a.yaml", ok("mac")), ("b.yaml", ok("mac"))]), &owners(&[]));
    assert!(p.accept.is_empty());
    assert_eq!(p.rejects.len(), 2);
    assert!(p.rejects[0].2.contains("several files"));
}

#[test]
fn an_erroring_owner_keeps_its_prefix_and_blocks_deletion() {
    let bad: Read = Err(vec![(String::new(), "empty".into())]);
    let p =
        plan(&files(&[("linux.yaml", bad), ("copy.yaml", ok("linux"))]), &owners(&[("linux", "linux.yaml")]));
    assert!(p.accept.is_empty());
    assert!(p.held.contains("linux"));
    assert!(p.blocked());
    assert!(p.rejects.iter().any(|(f, _, e)| f == "copy.yaml" && e.contains("error of its own")));
}

#[test]
fn a_renamed_file_takes_over_and_an_applied_prefix_change_orphans_the_old_one() {
    let p = plan(&files(&[("linux2.yaml", ok("linux"))]), &owners(&[("linux", "linux.yaml")]));
    assert_eq!(p.accept["linux"].0, "linux2.yaml");
    let p = plan(&files(&[("linux.yaml", ok("mac"))]), &owners(&[("linux", "linux.yaml")]));
    assert!(!p.held.contains("linux") && !p.blocked(), "the file now holds another prefix, applied");
    assert_eq!(p.accept["mac"].0, "linux.yaml");
}

#[test]
fn a_prefix_change_that_is_refused_keeps_the_old_pool() {
    // linux.yaml now names mac, which mac.yaml owns: refused, so linux stays held.
    let p = plan(
        &files(&[("linux.yaml", ok("mac")), ("mac.yaml", ok("mac"))]),
        &owners(&[("linux", "linux.yaml"), ("mac", "mac.yaml")]),
    );
    assert!(p.held.contains("linux") && p.held.contains("mac") && p.blocked());
    // ... or an overlapping new prefix.
    let p = plan(&files(&[("linux.yaml", ok("linux-big"))]), &owners(&[("linux", "linux.yaml")]));
    assert!(p.held.contains("linux") && p.blocked());
}

#[test]
fn a_config_of_unknown_source_and_two_claimants_is_held_by_both() {
    for source in ["", "config/pools/linux.yaml", "linux.yaml"] {
        let p = plan(
            &files(&[("copy.yaml", ok("linux")), ("other.yaml", ok("linux"))]),
            &owners(&[("linux", source)]),
        );
        assert!(p.accept.is_empty() && p.held.contains("linux") && p.blocked(), "{source:?}");
    }
}

#[test]
fn a_new_prefix_overlapping_another_config_is_refused_and_the_live_pool_untouched() {
    let p = plan(
        &files(&[("linux.yaml", ok("linux")), ("big.yaml", ok("linux-big")), ("lin.yaml", ok("lin"))]),
        &owners(&[("linux", "linux.yaml")]),
    );
    assert_eq!(p.accept.keys().collect::<Vec<_>>(), ["linux"]);
    assert_eq!(p.rejects.len(), 2);
    assert!(p.held.contains("linux"));
}

static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

pub(super) fn setup() -> (Ctx, crate::testing::Fakes, PathBuf) {
    let (mut ctx, f) = Ctx::test();
    let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("gce-backend-import-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    ctx.settings.configs_dir = dir.clone();
    (ctx, f, dir)
}

pub(super) fn write(dir: &std::path::Path, name: &str, c: &Config) {
    std::fs::write(dir.join(name), yaml_serde::to_string(c).unwrap()).unwrap();
}

/// The path of file `name` in `dir`, as the file errors name it.
pub(super) fn path(dir: &std::path::Path, name: &str) -> String {
    dir.join(name).display().to_string()
}

#[tokio::test]
async fn an_unchanged_revision_leaves_the_record_alone() {
    let (ctx, _, dir) = setup();
    write(&dir, "linux.yaml", &config("linux", 2));
    assert_eq!(run(&ctx).await.unwrap(), 1);
    let rec = ctx.ports.store.config("linux").await.unwrap().unwrap();
    assert_eq!(rec.value.source, "linux.yaml", "the file's name, whatever the directory is called");
    assert!(rec.value.verified);
    assert_eq!(ctx.taken::<ExpandConfig>().await.len(), 1);
    assert_eq!(run(&ctx).await.unwrap(), 0);
    assert_eq!(ctx.ports.store.config("linux").await.unwrap().unwrap().version, rec.version);
    assert!(ctx.taken::<ExpandConfig>().await.is_empty());
}

#[tokio::test]
async fn a_typo_in_the_prefix_keeps_the_pool_and_reports_on_it() {
    let (ctx, f, dir) = setup();
    write(&dir, "builders.yaml", &config("builder", 4));
    run(&ctx).await.unwrap();
    let mut typo = config("builder", 4);
    typo.prefix = "Builder".into();
    write(&dir, "builders.yaml", &typo);
    f.clock.advance(Duration::hours(1));
    run(&ctx).await.unwrap();
    let rec = ctx.ports.store.config("builder").await.unwrap().unwrap().value;
    assert!(rec.orphaned.is_none());
    assert!(ctx.ports.store.config("Builder").await.unwrap().is_none());
    assert_eq!(
        ctx.ports.store.errors("builder").await.unwrap()[0].code,
        "invalid",
        "filed under the pool it holds"
    );
}

#[tokio::test]
async fn a_removed_file_orphans_then_deletes_after_the_grace_and_a_returning_file_cancels() {
    let (ctx, f, dir) = setup();
    write(&dir, "linux.yaml", &config("linux", 1));
    run(&ctx).await.unwrap();
    ctx.seed_vm("linux-0", crate::testing::created(ctx.now())).await;
    std::fs::remove_file(dir.join("linux.yaml")).unwrap();
    run(&ctx).await.unwrap();
    let rec = ctx.ports.store.config("linux").await.unwrap().unwrap().value;
    assert_eq!(rec.orphaned, Some(ctx.now()));
    assert_eq!(ctx.ports.store.errors("linux").await.unwrap()[0].code, "orphaned");
    // The file comes back before the grace: cancelled.
    write(&dir, "linux.yaml", &config("linux", 1));
    f.clock.advance(Duration::minutes(5));
    run(&ctx).await.unwrap();
    assert!(ctx.ports.store.config("linux").await.unwrap().unwrap().value.orphaned.is_none());
    // Gone again: orphaned, kept until the grace (15 min) has passed, then deleted and drained.
    std::fs::remove_file(dir.join("linux.yaml")).unwrap();
    run(&ctx).await.unwrap();
    f.clock.advance(Duration::minutes(14));
    run(&ctx).await.unwrap();
    assert!(ctx.ports.store.config("linux").await.unwrap().is_some());
    assert!(ctx.taken::<DrainVm>().await.is_empty());
    f.clock.advance(Duration::minutes(2));
    run(&ctx).await.unwrap();
    assert!(ctx.ports.store.config("linux").await.unwrap().is_none());
    assert_eq!(ctx.taken::<DrainVm>().await, [DrainVm { id: "linux-0".into() }]);
    assert_eq!(ctx.ports.store.errors("linux").await.unwrap()[0].code, "deleted");
}

#[tokio::test]
async fn a_huge_amount_is_refused_at_import_and_nothing_is_stored() {
    let (ctx, _, dir) = setup();
    write(&dir, "linux.yaml", &config("linux", 10_000_000));
    run(&ctx).await.unwrap();
    assert!(ctx.ports.store.config("linux").await.unwrap().is_none());
    assert!(ctx.taken::<ExpandConfig>().await.is_empty());
    let e = &ctx.ports.store.file_errors().await.unwrap()[0];
    assert!(e.message.contains("max_amount"), "{e:?}");
}

#[tokio::test]
async fn zones_and_disk_types_are_checked_against_the_project_or_later_when_compute_is_away() {
    let (ctx, f, dir) = setup();
    let mut c = config("linux", 1);
    c.attributes.zone = "us-central1-x".into();
    write(&dir, "linux.yaml", &c);
    run(&ctx).await.unwrap();
    assert!(ctx.ports.store.config("linux").await.unwrap().is_none());
    assert!(ctx.ports.store.file_errors().await.unwrap()[0].message.contains("linux.attributes.zone"));
    let mut c = config("linux", 1);
    c.attributes.disk[0].kind = "zones/{{.Zone}}/diskTypes/pd-fast".into();
    write(&dir, "linux.yaml", &c);
    run(&ctx).await.unwrap();
    let e = &ctx.ports.store.file_errors().await.unwrap()[0];
    assert!(e.message.contains("linux.attributes.disk[0].type") && e.message.contains("pd-fast"), "{e:?}");
    // Compute unreachable: imported unverified, verified on a later round.
    *f.compute.catalog_fail.lock().unwrap() = Some(ComputeError::from_http(Some(503), "", "down"));
    f.clock.advance(Duration::minutes(11)); // past the catalog's cache
    write(&dir, "linux.yaml", &config("linux", 1));
    run(&ctx).await.unwrap();
    assert!(!ctx.ports.store.config("linux").await.unwrap().unwrap().value.verified);
    assert!(ctx.ports.store.file_errors().await.unwrap().is_empty(), "the file error is cleared");
    *f.compute.catalog_fail.lock().unwrap() = None;
    run(&ctx).await.unwrap();
    assert!(ctx.ports.store.config("linux").await.unwrap().unwrap().value.verified);
}

#[tokio::test]
async fn a_regional_config_is_stored_with_its_projects_zones_in_the_region_once_compute_lists_them() {
    let (ctx, f, dir) = setup();
    *f.compute.zones.lock().unwrap() =
        ["us-central1-b", "us-east1-b", "us-central1-a"].map(String::from).to_vec();
    let mut c = crate::testing::zoned(config("linux", 2), &[]);
    c.region = "us-central1".into();
    // Compute cannot list the zones: nothing is applied, and the file's error says why.
    *f.compute.catalog_fail.lock().unwrap() = Some(ComputeError::from_http(Some(503), "", "down"));
    write(&dir, "linux.yaml", &c);
    run(&ctx).await.unwrap();
    assert!(ctx.ports.store.config("linux").await.unwrap().is_none(), "not applied without its zones");
    let e = &ctx.ports.store.file_errors().await.unwrap()[0];
    assert!(e.message.contains("linux.region") && e.message.contains("cannot list"), "{e:?}");

    *f.compute.catalog_fail.lock().unwrap() = None;
    run(&ctx).await.unwrap();
    let stored = ctx.ports.store.config("linux").await.unwrap().unwrap();
    let zones: Vec<(&str, u32)> =
        stored.value.config.zones.iter().map(|z| (z.zone.as_str(), z.weight)).collect();
    assert_eq!(zones, [("us-central1-a", 1), ("us-central1-b", 1)]);
    assert_eq!(stored.value.config.region, "us-central1");
    assert!(stored.value.verified);
    assert!(ctx.ports.store.file_errors().await.unwrap().is_empty(), "the file error is cleared");
    run(&ctx).await.unwrap();
    assert_eq!(ctx.ports.store.config("linux").await.unwrap().unwrap().version, stored.version, "unchanged");

    // A region the project has no zones in: refused, and the pool keeps its zones.
    c.region = "asia-east2".into();
    write(&dir, "linux.yaml", &c);
    run(&ctx).await.unwrap();
    assert_eq!(ctx.ports.store.config("linux").await.unwrap().unwrap().value, stored.value);
    let e = &ctx.ports.store.file_errors().await.unwrap()[0];
    assert!(e.message.contains("has no zones in region asia-east2"), "{e:?}");
}

#[tokio::test]
async fn a_restored_file_resolves_its_error() {
    let (ctx, _, dir) = setup();
    write(&dir, "linux.yaml", &config("linux", 2));
    run(&ctx).await.unwrap();
    std::fs::write(dir.join("linux.yaml"), "").unwrap();
    run(&ctx).await.unwrap();
    assert!(ctx.ports.store.errors("linux").await.unwrap()[0].resolved.is_none());
    write(&dir, "linux.yaml", &config("linux", 2));
    run(&ctx).await.unwrap();
    assert!(ctx.ports.store.errors("linux").await.unwrap()[0].resolved.is_some(), "marked resolved");
    assert!(ctx.ports.store.file_errors().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_corrupt_config_record_is_rewritten_from_its_file_or_deleted_without_one() {
    let (ctx, f, dir) = setup();
    write(&dir, "linux.yaml", &config("linux", 2));
    write(&dir, "mac.yaml", &config("mac", 1));
    run(&ctx).await.unwrap();
    for id in ["linux-0", "linux-1", "charlie-0"] {
        ctx.seed_vm(id, |_| {}).await;
    }
    let store = ctx.ports.store.clone();
    f.store.plant_corrupt_config("linux");
    f.store.plant_corrupt_config("charlie");
    assert!(store.config("linux").await.is_err());
    run(&ctx).await.unwrap();
    let linux = store.config("linux").await.unwrap().unwrap().value;
    assert_eq!(linux.current_amount, 2, "rewritten from its file, keeping every VM it has");
    crate::cron::drain_vms::run(&ctx).await.unwrap();
    let drained: Vec<String> = ctx.taken::<DrainVm>().await.into_iter().map(|t| t.id).collect();
    assert!(
        drained.is_empty(),
        "linux keeps its VMs, and charlie's unreadable Config drains nothing: {drained:?}"
    );
    assert!(store.config("mac").await.unwrap().is_some(), "the others carry on");
    // charlie has no file: deleted, but only after the grace.
    assert!(!store.corrupt_configs().await.unwrap().is_empty());
    f.clock.advance(ctx.settings.timing.config_delete_grace.chrono() + Duration::seconds(1));
    run(&ctx).await.unwrap();
    assert!(store.corrupt_configs().await.unwrap().is_empty());
    assert!(store.config("charlie").await.unwrap().is_none(), "no file: deleted");
    assert_eq!(ctx.taken::<DrainVm>().await, [DrainVm { id: "charlie-0".into() }]);
    assert_eq!(store.errors("charlie").await.unwrap()[0].code, "deleted");
}

#[tokio::test]
async fn hostile_files_are_refused_before_parsing_and_unchanged_files_are_not_parsed_again() {
    let (ctx, _, dir) = setup();
    write(&dir, "good.yaml", &config("good", 1));
    std::fs::write(dir.join("huge.yaml"), vec![b'#'; 2 << 20]).unwrap();
    std::fs::write(dir.join("deep.yaml"), "[".repeat(200_000)).unwrap();
    let mut many = config("many", 1);
    many.attributes.metadata =
        (0..20_000).map(|i| crate::config::Metadata::text(format!("k{i}:v"))).collect();
    write(&dir, "many.yaml", &many);
    std::os::unix::fs::symlink("/dev/zero", dir.join("zero.yaml")).unwrap();
    let fifo = dir.join("fifo.yaml");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    run(&ctx).await.unwrap();
    let errors = ctx.ports.store.file_errors().await.unwrap();
    let of =
        |f: &str| errors.iter().find(|e| e.path.ends_with(f)).map(|e| e.message.clone()).unwrap_or_default();
    assert!(of("huge.yaml").contains("at most 1048576"), "{errors:?}");
    assert!(of("deep.yaml").contains("deeper than 32"), "{errors:?}");
    assert!(of("many.yaml").contains("at most 10000"), "{errors:?}");
    assert!(
        of("zero.yaml").contains("leaves the configs directory"),
        "a link out of the directory: {errors:?}"
    );
    assert!(of("fifo.yaml").contains("not a regular file"), "{errors:?}");
    assert!(ctx.ports.store.config("good").await.unwrap().is_some(), "the good file goes on");
    run(&ctx).await.unwrap();
    let parses: Vec<u32> = files::PARSED
        .lock()
        .unwrap()
        .iter()
        .filter(|(p, _)| p.starts_with(&dir))
        .map(|(_, (_, _, n))| *n)
        .collect();
    assert_eq!(parses, [1, 1, 1], "good, deep and many parsed once each, huge never read");
}

#[test]
fn a_file_naming_a_prefix_the_api_holds_is_refused_and_the_api_config_stays_held() {
    let owners = owners(&[("linux", crate::model::API_SOURCE), ("mac", "mac.yaml")]);
    let p = plan(&files(&[("linux.yaml", ok("linux")), ("mac.yaml", ok("mac"))]), &owners);
    assert!(!p.accept.contains_key("linux"));
    assert_eq!(p.rejects.len(), 1);
    assert_eq!(p.rejects[0].2, "prefix \"linux\" belongs to a Config made over the API");
    assert!(p.held.contains("linux") && p.blocked());
    // Held while no file names it; a new file's prefix may not clash with it.
    let p = plan(&files(&[("lin.yaml", ok("lin"))]), &owners);
    assert!(p.held.contains("linux") && p.accept.is_empty(), "{p:?}");
    assert!(p.rejects[0].2.contains("one is a prefix of the other"), "{:?}", p.rejects);
}

#[tokio::test]
async fn an_api_config_is_never_orphaned_or_rewritten_by_a_file() {
    let (ctx, f, dir) = setup();
    let (api, _) = crate::operate::apply(&ctx, config("linux", 2), "alice").await.unwrap();
    write(&dir, "linux.yaml", &config("linux", 5));
    f.clock.advance(Duration::hours(1));
    run(&ctx).await.unwrap();
    assert_eq!(ctx.ports.store.config("linux").await.unwrap().unwrap().value, api, "untouched");
    let e = &ctx.ports.store.file_errors().await.unwrap()[0];
    assert_eq!(e.path, path(&dir, "linux.yaml"));
    assert!(e.message.contains("belongs to a Config made over the API"), "{e:?}");
    std::fs::remove_file(dir.join("linux.yaml")).unwrap();
    f.clock.advance(Duration::hours(1));
    run(&ctx).await.unwrap();
    assert_eq!(ctx.ports.store.config("linux").await.unwrap().unwrap().value, api, "no file needed");
}

#[tokio::test]
async fn an_api_config_applied_while_compute_was_away_is_checked_by_the_import() {
    let (ctx, f, _dir) = setup();
    let busy = crate::ports::compute::ComputeError::from_http(Some(503), "backendError", "busy");
    *f.compute.catalog_fail.lock().unwrap() = Some(busy);
    crate::operate::apply(&ctx, config("linux", 1), "alice").await.unwrap();
    let mut far = config("mac", 1);
    far.attributes.zone = "mars-east1-a".into();
    crate::operate::apply(&ctx, far, "alice").await.unwrap();
    assert!(!linux(&ctx).await.verified);
    run(&ctx).await.unwrap();
    assert!(!linux(&ctx).await.verified, "still unknown");
    *f.compute.catalog_fail.lock().unwrap() = None;
    f.clock.advance(Duration::hours(1)); // past the catalog cache
    run(&ctx).await.unwrap();
    assert!(linux(&ctx).await.verified, "checked once Compute answers");
    let mac = ctx.ports.store.config("mac").await.unwrap().unwrap().value;
    assert!(!mac.verified);
    let e = &ctx.ports.store.errors("mac").await.unwrap()[0];
    assert!(e.code == "invalid" && e.message.contains("mars-east1-a"), "{e:?}");
}

async fn linux(ctx: &Ctx) -> ConfigRecord {
    ctx.ports.store.config("linux").await.unwrap().unwrap().value
}

#[tokio::test]
async fn a_set_amount_survives_a_reimport_and_restarts_when_the_bounds_change() {
    let (ctx, _, dir) = setup();
    let mut c = config("linux", 1);
    c.amount.max = 5;
    write(&dir, "linux.yaml", &c);
    run(&ctx).await.unwrap();
    crate::operate::set_amount(&ctx, "linux", 4, "alice").await.unwrap();
    crate::operate::pause(&ctx, "linux", "rollout", "bob").await.unwrap();
    run(&ctx).await.unwrap(); // the same file
    assert_eq!(linux(&ctx).await.current_amount, 4);
    c.attributes.tag = vec!["bots".into()]; // a new revision, the same bounds
    write(&dir, "linux.yaml", &c);
    run(&ctx).await.unwrap();
    let rec = linux(&ctx).await;
    assert_eq!((rec.config.attributes.tag.len(), rec.current_amount), (1, 4), "kept");
    assert_eq!(rec.paused.map(|p| p.by), Some("bob".into()), "the pause survives imports");
    c.amount.min = 2; // new bounds: restarts from them
    write(&dir, "linux.yaml", &c);
    run(&ctx).await.unwrap();
    assert_eq!(linux(&ctx).await.current_amount, 2);
}

#[test]
fn no_config_file_can_be_named_like_the_api_source() {
    let (_, _, dir) = setup();
    std::fs::write(dir.join(crate::model::API_SOURCE), "prefix: x\n").unwrap();
    write(&dir, "linux.yaml", &config("linux", 1));
    assert_eq!(list(&dir).unwrap(), ["linux.yaml"]);
}

#[tokio::test(start_paused = true)]
async fn a_new_file_prefix_is_checked_again_under_the_admission_claim() {
    let (ctx, _, dir) = setup();
    write(&dir, "linux.yaml", &config("linux", 1));
    assert!(
        ctx.ports
            .store
            .lease(crate::env::ADMISSION, "other", std::time::Duration::from_secs(60))
            .await
            .unwrap()
    );
    let import = tokio::spawn({
        let ctx = ctx.clone();
        async move { run(&ctx).await }
    });
    // Paused time: this sleep ends only once the spawned task has run as far as it can.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(!import.is_finished(), "the import waits for the claim to write a new prefix");
    // Meanwhile a clashing Config came over the API (its apply held the claim).
    ctx.seed_config_from("linux-a", 1, crate::model::API_SOURCE).await;
    ctx.ports.store.release(crate::env::ADMISSION, "other").await.unwrap();
    import.await.unwrap().unwrap();
    assert!(ctx.ports.store.config("linux").await.unwrap().is_none(), "not admitted");
    let e = &ctx.ports.store.file_errors().await.unwrap()[0];
    assert!(e.message.contains("one is a prefix of the other"), "{e:?}");
}
