//! Unit tests of `providers/gce_template.rs`: the name rule, a template made once per revision
//! (the same request when sent again), a 409 adopted only when ours, a failed insert recorded.

use super::*;
use crate::ctx::Ctx;
use crate::ports::compute::Kind;

/// A valid Compute Engine name: `[a-z]([-a-z0-9]*[a-z0-9])?`, at most 63.
fn valid(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_lowercase()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && !name.ends_with('-')
}

#[test]
fn a_template_is_named_after_the_prefix_and_the_short_revision() {
    assert_eq!(template_name("linux", "0123abcdef012345"), "linux-0123abcd");
    assert_eq!(template_name("linux", "0123abcdef012345"), template_name("linux", "0123abcdef012345"));
    assert_ne!(template_name("linux", "0123abcdef012345"), template_name("linux", "ffff0000ef012345"));
    assert_eq!(template_name("linux", "R1"), "linux-r1", "lowercase letters and digits of the revision");
    let long = format!("{}-x", "a".repeat(60));
    let name = template_name(&long, "0123abcdef012345");
    assert!(valid(&name) && name.len() <= 63 && name.ends_with("-0123abcd"), "{name}");
    // Cut where the prefix has a dash: no double dash, no trailing one.
    let dashed = format!("{}-b", "a".repeat(53));
    assert!(
        valid(&template_name(&dashed, "0123abcdef012345")),
        "{}",
        template_name(&dashed, "0123abcdef012345")
    );
    assert!(valid(&template_name("linux", "")));
}

#[test]
fn the_template_holds_the_config_s_instance_with_our_labels_and_no_vm_s() {
    let mut rec = ConfigRecord {
        config: crate::testing::config("linux", 3),
        revision: "0123abcdef".into(),
        ..Default::default()
    };
    rec.config.attributes.label.insert("team".into(), "infra".into());
    let t = template_spec(&rec, "linux-0123abcd", "prod");
    let l = &t.instance.labels;
    assert_eq!(l.get(labels::DEPLOYMENT).map(String::as_str), Some("prod"));
    assert_eq!(l.get(labels::CONFIG).map(String::as_str), Some("linux"));
    assert_eq!(l.get(labels::REVISION).map(String::as_str), Some("0123abcdef"));
    assert_eq!(l.get("team").map(String::as_str), Some("infra"));
    assert!(!l.contains_key(labels::VM));
    assert_eq!(t.instance.attributes.machine_type, "zones/z/machineTypes/e2-small", "the zone filled in");
    assert!(
        t.instance
            .metadata
            .iter()
            .any(|(k, v)| k == crate::config::SWARMING_SERVER_KEY && v == "https://swarm.example.com")
    );
}

async fn record(ctx: &Ctx) -> ConfigRecord {
    ctx.ports.store.config("linux").await.unwrap().unwrap().value
}

#[tokio::test]
async fn a_revision_s_template_is_made_once() {
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", 3).await;
    assert_eq!(ensure(&ctx, &record(&ctx).await).await.unwrap(), Next::Done);
    let calls = f.compute.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert!(calls[0].starts_with("insert_template linux-r1 "), "{calls:?}");
    let r = record(&ctx).await.resource("r1").cloned().unwrap();
    assert!(r.usable() && r.name == "linux-r1", "{r:?}");
    assert!(f.compute.templates.lock().unwrap().contains_key("linux-r1"));
    // Looked at again (the next tick, another process): nothing more is asked.
    assert_eq!(ensure(&ctx, &record(&ctx).await).await.unwrap(), Next::Done);
    assert_eq!(f.compute.calls().len(), 1);
}

#[tokio::test]
async fn an_insert_in_flight_is_followed_and_one_compute_forgot_is_the_same_request_again() {
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", 3).await;
    let running = Operation { name: "op-t".into(), done: false, error: None };
    f.compute.template_calls.lock().unwrap().push_back(Ok(Some(running.clone())));
    assert!(matches!(ensure(&ctx, &record(&ctx).await).await.unwrap(), Next::After(_)));
    assert_eq!(record(&ctx).await.resource("r1").unwrap().operation, "op-t");
    // Still running: followed, not sent again.
    f.compute.global_operations.lock().unwrap().push_back(Ok(Some(running)));
    assert!(matches!(ensure(&ctx, &record(&ctx).await).await.unwrap(), Next::After(_)));
    // Forgotten: sent again with the same requestId.
    f.compute.global_operations.lock().unwrap().push_back(Ok(None));
    assert_eq!(ensure(&ctx, &record(&ctx).await).await.unwrap(), Next::Done);
    let inserts: Vec<String> =
        f.compute.calls().into_iter().filter(|c| c.starts_with("insert_template")).collect();
    assert_eq!(inserts.len(), 2, "{inserts:?}");
    assert_eq!(inserts[0], inserts[1], "the same request");
    assert!(record(&ctx).await.resource("r1").unwrap().usable());
}

#[tokio::test]
async fn a_failed_insert_is_recorded_and_tried_again_as_a_new_request() {
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", 3).await;
    let failed = ComputeError::from_operation("QUOTA_EXCEEDED", Some(403), "too many templates");
    f.compute.template_calls.lock().unwrap().push_back(Ok(Some(Operation {
        name: "op-t".into(),
        done: true,
        error: Some(failed),
    })));
    assert!(ensure(&ctx, &record(&ctx).await).await.is_err(), "the task fails: retried");
    let errors = ctx.ports.store.errors("linux").await.unwrap();
    assert!(
        errors.iter().any(|e| e.stage == STAGE && e.message.contains("too many templates")),
        "{errors:?}"
    );
    assert_eq!(record(&ctx).await.resource("r1").unwrap().attempt, 1);
    assert_eq!(ensure(&ctx, &record(&ctx).await).await.unwrap(), Next::Done);
    let inserts: Vec<String> =
        f.compute.calls().into_iter().filter(|c| c.starts_with("insert_template")).collect();
    assert_ne!(inserts[0], inserts[1], "a new requestId after an operation that failed");
    assert!(
        ctx.ports.store.errors("linux").await.unwrap().iter().all(|e| e.resolved.is_some()),
        "resolved once made"
    );
}

#[tokio::test]
async fn a_name_in_use_is_adopted_only_when_the_template_there_is_ours() {
    let (ctx, f) = Ctx::test();
    ctx.seed_config("linux", 3).await;
    let taken = ComputeError::from_http(Some(409), "alreadyExists", "exists");
    assert_eq!(taken.kind, Kind::AlreadyExists);
    // Someone else's under that name.
    let mut theirs = template_spec(&record(&ctx).await, "linux-r1", "another-deployment");
    f.compute.templates.lock().unwrap().insert("linux-r1".into(), theirs.clone());
    f.compute.template_calls.lock().unwrap().push_back(Err(taken.clone()));
    assert!(ensure(&ctx, &record(&ctx).await).await.is_err());
    assert!(!record(&ctx).await.resource("r1").unwrap().usable(), "not used: not ours");
    // Ours (an earlier run made it and crashed before recording): adopted.
    theirs.instance.labels.insert(labels::DEPLOYMENT.into(), "test".into());
    f.compute.templates.lock().unwrap().insert("linux-r1".into(), theirs);
    f.compute.template_calls.lock().unwrap().push_back(Err(taken));
    assert_eq!(ensure(&ctx, &record(&ctx).await).await.unwrap(), Next::Done);
    assert!(record(&ctx).await.resource("r1").unwrap().usable());
}

#[tokio::test]
async fn a_static_pool_has_no_template() {
    let (ctx, f) = Ctx::test();
    let mut rec = ConfigRecord {
        config: crate::testing::config("linux", 1),
        revision: "r1".into(),
        ..Default::default()
    };
    rec.config.machines = Some(vec!["host-1".into()]);
    assert_eq!(ensure(&ctx, &rec).await.unwrap(), Next::Done);
    assert!(f.compute.calls().is_empty());
}
