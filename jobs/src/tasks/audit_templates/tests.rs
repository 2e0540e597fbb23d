//! Unit tests of `tasks/audit_templates.rs` (and the Compute Engine provider's audit,
//! `providers/gce_audit.rs`): a template of ours no Config names and no VM uses is deleted after
//! the grace; one named, one used, one of another deployment never.

use super::*;
use crate::model::marks::{TEMPLATE_LEAKS, TEMPLATE_PROJECTS};
use crate::ports::compute::TemplateSpec;
use crate::providers::gce_template::template_spec;

fn task() -> AuditTemplates {
    AuditTemplates { project: "test-project".into() }
}

/// A template `name` of Config `prefix`'s revision `revision` in `deployment`.
fn template(prefix: &str, revision: &str, name: &str, deployment: &str) -> TemplateSpec {
    let rec = crate::model::ConfigRecord {
        config: crate::testing::config(prefix, 1),
        revision: revision.into(),
        ..Default::default()
    };
    template_spec(&rec, name, deployment)
}

#[tokio::test]
async fn a_leaked_template_is_deleted_after_the_grace_and_nothing_else_is() {
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", 1).await;
    crate::providers::gce_template::ensure(&ctx, &ctx.ports.store.config("linux").await.unwrap().unwrap().value)
        .await
        .unwrap();
    ctx.seed_vm("mac-0", |v| v.revision = "m1".into()).await;
    {
        let mut t = f.compute.templates.lock().unwrap();
        for spec in [
            template("gone", "g1", "gone-g1", "test"),     // leaked: no Config, no VM
            template("mac", "m1", "mac-m1", "test"),       // a VM of its revision is left
            template("linux", "r0", "linux-r0", "other"),  // another deployment's
        ] {
            t.insert(spec.name.clone(), spec);
        }
    }
    run(&ctx, task()).await.unwrap();
    assert!(!f.compute.calls().iter().any(|c| c.starts_with("delete_template")), "marked, not deleted yet");
    f.clock.advance(ctx.settings.timing.leak_grace.chrono());
    run(&ctx, task()).await.unwrap();
    let deleted: Vec<String> = f.compute.calls().into_iter().filter(|c| c.starts_with("delete_template")).collect();
    assert_eq!(deleted.len(), 1, "{deleted:?}");
    assert!(deleted[0].starts_with("delete_template gone-g1 "));
    let left: Vec<String> = f.compute.templates.lock().unwrap().keys().cloned().collect();
    assert_eq!(left, ["linux-r0", "linux-r1", "mac-m1"], "the Config's own, the used one and another deployment's stay");
    assert!(ctx.ports.store.marks(TEMPLATE_LEAKS).await.unwrap().iter().all(|(k, _)| k != "test-project/mac-m1"));
}

#[tokio::test]
async fn a_deleted_configs_template_is_audited_in_its_project_until_none_of_ours_is_left() {
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", 1).await;
    let rec = ctx.ports.store.config("linux").await.unwrap().unwrap().value;
    crate::providers::gce_template::ensure(&ctx, &rec).await.unwrap();
    let projects = |ctx: Ctx| async move {
        crate::cron::audit_instances::run(&ctx).await.unwrap();
        ctx.finished::<AuditTemplates>().await.into_iter().map(|t| t.project).collect::<Vec<_>>()
    };
    // The last Config of the project is deleted: its template is still there, and still found.
    let cur = ctx.ports.store.config("linux").await.unwrap().unwrap();
    assert!(ctx.ports.store.delete_config("linux", cur.version).await.unwrap());
    assert_eq!(projects(ctx.clone()).await, ["test-project"]);
    run(&ctx, task()).await.unwrap();
    f.clock.advance(ctx.settings.timing.leak_grace.chrono());
    run(&ctx, task()).await.unwrap();
    let deleted: Vec<String> = f.compute.calls().into_iter().filter(|c| c.starts_with("delete_template")).collect();
    assert_eq!(deleted.len(), 1, "{deleted:?}");
    assert!(deleted[0].starts_with("delete_template linux-"), "{deleted:?}");
    // None of ours is left there and no Config names it: the project is no longer walked.
    run(&ctx, task()).await.unwrap();
    assert!(ctx.ports.store.marks(TEMPLATE_PROJECTS).await.unwrap().is_empty());
    assert!(projects(ctx.clone()).await.is_empty());
}

#[tokio::test]
async fn a_config_deleted_with_templates_marks_their_project_even_one_made_before_the_mark() {
    let (mut ctx, f) = Ctx::test();
    let dir = std::env::temp_dir().join(format!("gce-backend-audit-templates-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    ctx.settings.configs_dir = dir;
    crate::operate::apply(&ctx, crate::testing::config("mac", 1), "alice").await.unwrap();
    let rec = ctx.ports.store.config("mac").await.unwrap().unwrap().value;
    crate::providers::gce_template::ensure(&ctx, &rec).await.unwrap();
    // As a template made by an older build: its project not marked.
    ctx.ports.store.unmark(TEMPLATE_PROJECTS, "test-project").await.unwrap();
    crate::operate::configs::delete(&ctx, "mac", "alice").await.unwrap();
    f.clock.advance(ctx.settings.timing.config_delete_grace.chrono() + chrono::Duration::seconds(1));
    crate::cron::import_configs::run(&ctx).await.unwrap();
    assert!(ctx.ports.store.config("mac").await.unwrap().is_none(), "deleted");
    let marked: Vec<String> = ctx.ports.store.marks(TEMPLATE_PROJECTS).await.unwrap().into_iter().map(|(k, _)| k).collect();
    assert_eq!(marked, ["test-project"]);
}

#[tokio::test]
async fn a_marked_project_no_config_names_that_cannot_be_read_is_forgotten() {
    let (ctx, f) = Ctx::test();
    ctx.ports.store.mark(TEMPLATE_PROJECTS, "test-project", ctx.now()).await.unwrap();
    let gone = |code| Some(crate::ports::compute::ComputeError::from_http(Some(code), "", "no such project"));
    // Compute down: kept, tried again.
    *f.compute.catalog_fail.lock().unwrap() = gone(503);
    assert!(run(&ctx, task()).await.is_err());
    assert_eq!(ctx.ports.store.marks(TEMPLATE_PROJECTS).await.unwrap().len(), 1);
    // Named by a Config: kept.
    *f.compute.catalog_fail.lock().unwrap() = gone(404);
    ctx.seed_config("linux", 1).await;
    assert!(run(&ctx, task()).await.is_err());
    assert_eq!(ctx.ports.store.marks(TEMPLATE_PROJECTS).await.unwrap().len(), 1);
    // Gone, and no Config names it: forgotten.
    let cur = ctx.ports.store.config("linux").await.unwrap().unwrap();
    assert!(ctx.ports.store.delete_config("linux", cur.version).await.unwrap());
    assert_eq!(run(&ctx, task()).await.unwrap(), Next::Done);
    assert!(ctx.ports.store.marks(TEMPLATE_PROJECTS).await.unwrap().is_empty());
}
