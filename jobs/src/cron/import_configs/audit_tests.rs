//! Unit tests of the audit trail a file import writes: the file (`file:<name>`) creates,
//! replaces and orphans its Config; `import_configs` removes it once the grace ends; the trail
//! outlives the Config.

use chrono::Duration;

use super::tests::{setup, write};
use super::*;
use crate::model::AuditAction;
use crate::testing::config;

#[tokio::test]
async fn a_files_changes_are_recorded_with_the_file_as_actor_and_outlive_the_config() {
    let (ctx, f, dir) = setup();
    let mut c = config("linux", 1);
    c.owner = vec!["team-a".into()];
    write(&dir, "linux.yaml", &c);
    run(&ctx).await.unwrap();
    let r1 = ctx.ports.store.config("linux").await.unwrap().unwrap().value.revision;
    run(&ctx).await.unwrap(); // unchanged: nothing
    c.amount.max = 4;
    write(&dir, "linux.yaml", &c);
    run(&ctx).await.unwrap();
    let r2 = ctx.ports.store.config("linux").await.unwrap().unwrap().value.revision;
    std::fs::remove_file(dir.join("linux.yaml")).unwrap();
    run(&ctx).await.unwrap();
    f.clock.advance(Duration::minutes(16));
    run(&ctx).await.unwrap();
    assert!(ctx.ports.store.config("linux").await.unwrap().is_none(), "deleted after the grace");
    let trail = ctx.ports.store.audit("linux", 0, 10).await.unwrap();
    let got: Vec<(&str, AuditAction, Option<&str>, Option<&str>)> = trail
        .iter()
        .map(|e| (e.actor.as_str(), e.action, e.before_revision.as_deref(), e.after_revision.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            ("import_configs", AuditAction::Remove, Some(r2.as_str()), None),
            ("file:linux.yaml", AuditAction::Delete, Some(r2.as_str()), Some(r2.as_str())),
            ("file:linux.yaml", AuditAction::Update, Some(r1.as_str()), Some(r2.as_str())),
            ("file:linux.yaml", AuditAction::Create, None, Some(r1.as_str())),
        ]
    );
    assert!(trail[0].detail.contains("has been gone since"), "{}", trail[0].detail);
    assert!(trail.iter().all(|e| e.owner == ["team-a"]), "who may read it once the Config is gone");
}

#[tokio::test]
async fn a_returning_file_is_recorded_as_cancelling_the_deletion() {
    let (ctx, _, dir) = setup();
    write(&dir, "linux.yaml", &config("linux", 1));
    run(&ctx).await.unwrap();
    std::fs::remove_file(dir.join("linux.yaml")).unwrap();
    run(&ctx).await.unwrap();
    write(&dir, "linux.yaml", &config("linux", 1));
    run(&ctx).await.unwrap();
    let trail = ctx.ports.store.audit("linux", 0, 10).await.unwrap();
    assert_eq!(trail.len(), 3, "{trail:?}");
    assert_eq!(
        (trail[0].action, trail[0].detail.as_str()),
        (AuditAction::Update, "the file is back: deletion cancelled")
    );
    assert_eq!(trail[0].before_revision, trail[0].after_revision, "the same revision");
}
