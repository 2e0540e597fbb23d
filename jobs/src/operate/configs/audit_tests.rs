//! Unit tests of the audit trail the Config operations write: one entry per change made, with
//! who, what and the revisions before and after; nothing for a refusal or a change that changes
//! nothing; the global list for the global pause; bounded per Config.

use super::*;
use crate::model::{AuditAction, AuditEntry, GLOBAL_AUDIT};
use crate::testing::config;

async fn trail(ctx: &Ctx, prefix: &str) -> Vec<AuditEntry> {
    ctx.ports.store.audit(prefix, 0, 1000).await.unwrap()
}

/// (actor, action, before, after, detail) of each entry, newest first.
async fn said(ctx: &Ctx, prefix: &str) -> Vec<(String, AuditAction, Option<String>, Option<String>, String)> {
    let t = trail(ctx, prefix).await;
    t.into_iter().map(|e| (e.actor, e.action, e.before_revision, e.after_revision, e.detail)).collect()
}

#[tokio::test]
async fn apply_records_a_creation_and_each_new_revision_once() {
    let (ctx, _) = Ctx::test();
    let mut c = config("linux", 1);
    c.owner = vec!["team-a".into()];
    let (first, _) = apply(&ctx, c.clone(), "alice").await.unwrap();
    apply(&ctx, c.clone(), "alice").await.unwrap(); // the same again: no change, no entry
    c.amount.max = 9;
    let (second, _) = apply(&ctx, c, "bob").await.unwrap();
    assert_ne!(first.revision, second.revision);
    let (r1, r2) = (Some(first.revision.clone()), Some(second.revision.clone()));
    assert_eq!(
        said(&ctx, "linux").await,
        [
            ("bob".into(), AuditAction::Update, r1.clone(), r2, String::new()),
            ("alice".into(), AuditAction::Create, None, r1, String::new()),
        ]
    );
    let e = &trail(&ctx, "linux").await[0];
    assert_eq!((e.prefix.as_str(), e.owner.clone(), e.at), ("linux", vec!["team-a".to_owned()], ctx.now()));
}

#[tokio::test]
async fn amount_pause_resume_and_delete_each_write_one_entry() {
    let (ctx, _) = Ctx::test();
    let mut c = config("linux", 1);
    c.amount.max = 5;
    let (rec, _) = apply(&ctx, c.clone(), "alice").await.unwrap();
    let rev = Some(rec.revision.clone());
    set_amount(&ctx, "linux", 3, "bob").await.unwrap();
    set_amount(&ctx, "linux", 3, "bob").await.unwrap(); // unchanged: nothing
    set_amount(&ctx, "linux", 50, "bob").await.unwrap();
    pause(&ctx, "linux", "image rollout", "carol").await.unwrap();
    pause(&ctx, "linux", "again", "carol").await.unwrap(); // already paused: nothing
    resume(&ctx, "linux", "dave").await.unwrap();
    resume(&ctx, "linux", "dave").await.unwrap(); // not paused: nothing
    delete(&ctx, "linux", "erin").await.unwrap();
    delete(&ctx, "linux", "erin").await.unwrap(); // deleted already: nothing
    apply(&ctx, c, "frank").await.unwrap(); // applied again within the grace
    let got = said(&ctx, "linux").await;
    let actions: Vec<(&str, AuditAction)> = got.iter().map(|e| (e.0.as_str(), e.1)).collect();
    assert_eq!(
        actions,
        [
            ("frank", AuditAction::Update),
            ("erin", AuditAction::Delete),
            ("dave", AuditAction::Resume),
            ("carol", AuditAction::Pause),
            ("bob", AuditAction::Amount),
            ("bob", AuditAction::Amount),
            ("alice", AuditAction::Create),
        ]
    );
    assert_eq!(got[4].4, "amount 3 → 5 (asked 50, clamped to its bounds)", "newest first");
    assert_eq!(got[5].4, "amount 1 → 3");
    assert_eq!(got[3].4, "image rollout");
    assert!(got[2].4.starts_with("paused by carol since "), "{}", got[2].4);
    assert!(got[1].4.contains("unless it is applied again"), "{}", got[1].4);
    assert_eq!(got[0].4, "applied again while deleted: deletion cancelled");
    // None of these changed the revision: each names it before and after.
    assert!(got[1..6].iter().all(|e| e.2 == rev && e.3 == rev), "{got:?}");
}

#[tokio::test]
async fn a_refused_operation_records_nothing() {
    let (ctx, _) = Ctx::test();
    ctx.seed_config_from("linux", 1, "linux.yaml").await;
    assert!(delete(&ctx, "linux", "alice").await.is_err(), "a file's Config");
    assert!(pause(&ctx, "mac", "x", "alice").await.is_err(), "no such Config");
    let mut bad = config("win", 1);
    bad.attributes.project.clear();
    assert!(apply(&ctx, bad, "alice").await.is_err(), "invalid");
    for p in ["linux", "mac", "win", GLOBAL_AUDIT] {
        assert!(trail(&ctx, p).await.is_empty(), "{p}");
    }
}

#[tokio::test]
async fn the_global_pause_goes_into_the_global_list() {
    let (ctx, _) = Ctx::test();
    pause_all(&ctx, "incident 42", "ops").await.unwrap();
    pause_all(&ctx, "again", "ops").await.unwrap(); // already paused: nothing
    resume_all(&ctx, "ops2").await.unwrap();
    resume_all(&ctx, "ops2").await.unwrap(); // not paused: nothing
    assert_eq!(
        said(&ctx, GLOBAL_AUDIT).await,
        [
            ("ops2".into(), AuditAction::ResumeAll, None, None, String::new()),
            ("ops".into(), AuditAction::PauseAll, None, None, "incident 42".into()),
        ]
    );
}

#[tokio::test]
async fn a_configs_trail_keeps_the_newest_audit_keep_entries() {
    let (mut ctx, _) = Ctx::test();
    ctx.settings.limits = std::sync::Arc::new(crate::config::Limits { audit_keep: 3, ..Default::default() });
    let mut c = config("linux", 0);
    c.amount.max = 10;
    apply(&ctx, c, "alice").await.unwrap();
    for n in 1..=5 {
        set_amount(&ctx, "linux", n, "bob").await.unwrap();
    }
    let details: Vec<String> = trail(&ctx, "linux").await.into_iter().map(|e| e.detail).collect();
    assert_eq!(details, ["amount 4 → 5", "amount 3 → 4", "amount 2 → 3"]);
    let page: Vec<String> =
        ctx.ports.store.audit("linux", 1, 1).await.unwrap().into_iter().map(|e| e.detail).collect();
    assert_eq!(page, ["amount 3 → 4"], "paged from the newest");
}
