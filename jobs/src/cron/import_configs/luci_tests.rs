//! Import of LUCI `vms.cfg` files: a Config per `vms` block, errors with the block's prefix and
//! line, the file applied whole or not at all, and the same guard rails as YAML files.

use std::path::PathBuf;

use crate::work::ExpandConfig;
use chrono::Duration;

use super::*;
use crate::config::luci::tests::VMS_CFG;
use crate::config::{Metadata, Secs};

/// A context importing from `<tmp>/configs`, with a secret beside that directory.
fn setup() -> (Ctx, crate::testing::Fakes, PathBuf) {
    let (mut ctx, f, root) = super::tests::setup();
    let dir = root.join("configs");
    std::fs::create_dir_all(dir.join("metadata")).unwrap();
    std::fs::write(dir.join("metadata/token.txt"), "tok-1").unwrap();
    std::fs::write(root.join("secret.txt"), "TOPSECRET-42").unwrap();
    ctx.settings.configs_dir = dir.clone();
    *f.compute.zones.lock().unwrap() =
        ["z", "us-central1-b", "us-east1-c", "us-west1-a"].map(String::from).to_vec();
    (ctx, f, dir)
}

async fn prefixes(ctx: &Ctx) -> Vec<String> {
    let mut p: Vec<String> =
        ctx.ports.store.configs().await.unwrap().into_iter().map(|c| c.value.config.prefix).collect();
    p.sort();
    p
}

async fn only_error(ctx: &Ctx) -> String {
    let errors = ctx.ports.store.file_errors().await.unwrap();
    assert_eq!(errors.len(), 1, "{errors:?}");
    errors[0].message.clone()
}

#[tokio::test]
async fn a_vms_cfg_of_three_blocks_is_three_configs() {
    let (ctx, _, dir) = setup();
    std::fs::write(dir.join("vms.cfg"), VMS_CFG).unwrap();
    let n = run(&ctx).await.unwrap();
    let errors = ctx.ports.store.file_errors().await.unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(n, 3);
    assert_eq!(prefixes(&ctx).await, ["linux", "mac", "win"]);
    let linux = ctx.ports.store.config("linux").await.unwrap().unwrap().value;
    assert_eq!(linux.source, "vms.cfg");
    assert_eq!(linux.config.attributes.project, "google.com:chromium-ci");
    assert_eq!(
        linux.config.attributes.metadata[1],
        Metadata::text("token:tok-1"),
        "from_file read at import"
    );
    assert_eq!(linux.config.lifetime, Secs(86_400));
    let win = ctx.ports.store.config("win").await.unwrap().unwrap().value;
    assert_ne!(linux.revision, win.revision, "a revision per block");
    assert_eq!(ctx.taken::<ExpandConfig>().await.len(), 3);
    // Unchanged: nothing is written again.
    assert_eq!(run(&ctx).await.unwrap(), 0);
    // One block changed (and comments moved): only that Config is applied again.
    let edited = VMS_CFG
        .replace("amount { min: 0 max: 2 }", "amount { min: 0 max: 3 }")
        .replace("# Pools", "\n# Pools");
    std::fs::write(dir.join("vms.cfg"), edited).unwrap();
    let before = ctx.ports.store.config("linux").await.unwrap().unwrap().version;
    assert_eq!(run(&ctx).await.unwrap(), 1);
    assert_eq!(
        ctx.ports.store.config("linux").await.unwrap().unwrap().version,
        before,
        "linux is left alone"
    );
    assert_eq!(ctx.ports.store.config("win").await.unwrap().unwrap().value.config.amount.max, 3);
    // A metadata file changed: the Config that reads it is applied again.
    std::fs::write(dir.join("metadata/token.txt"), "tok-2").unwrap();
    assert_eq!(run(&ctx).await.unwrap(), 1);
    let linux = ctx.ports.store.config("linux").await.unwrap().unwrap().value;
    assert_eq!(linux.config.attributes.metadata[1], Metadata::text("token:tok-2"));
}

#[tokio::test]
async fn a_bad_block_keeps_the_whole_file_out_and_says_its_prefix_and_line() {
    let (ctx, f, dir) = setup();
    std::fs::write(dir.join("vms.cfg"), VMS_CFG).unwrap();
    run(&ctx).await.unwrap();
    // win loses its zone, and mac goes: the file is refused whole, nothing is orphaned.
    let mac_at = VMS_CFG.find("vms: <").unwrap();
    let broken = VMS_CFG[..mac_at].replace("    zone: \"us-east1-c\"\n", "");
    std::fs::write(dir.join("vms.cfg"), &broken).unwrap();
    run(&ctx).await.unwrap();
    f.clock.advance(Duration::days(30));
    run(&ctx).await.unwrap();
    let e = only_error(&ctx).await;
    assert!(e.contains("vms.cfg:48: vms block \"win\" (line 45): win.attributes.zone: is required"), "{e}");
    for p in ["linux", "mac", "win"] {
        assert!(ctx.ports.store.config(p).await.unwrap().unwrap().value.orphaned.is_none(), "{p}");
    }
    // Fixed: applied, and the removed block's Config is orphaned (deleted after the grace).
    std::fs::write(dir.join("vms.cfg"), &VMS_CFG[..mac_at]).unwrap();
    run(&ctx).await.unwrap();
    assert!(ctx.ports.store.file_errors().await.unwrap().is_empty());
    assert!(ctx.ports.store.config("mac").await.unwrap().unwrap().value.orphaned.is_some());
    assert!(ctx.ports.store.config("linux").await.unwrap().unwrap().value.orphaned.is_none());
}

#[tokio::test]
async fn an_unsupported_luci_field_is_a_file_error_naming_block_field_and_line() {
    let (ctx, _, dir) = setup();
    let text = VMS_CFG.replace("gcp_channel: GCP_CHANNEL_STABLE", "gcp_channel: GCP_CHANNEL_ALPHA");
    std::fs::write(dir.join("vms.cfg"), text).unwrap();
    run(&ctx).await.unwrap();
    let e = only_error(&ctx).await;
    assert!(
        e.contains("vms.cfg:38: vms block \"linux\" (line 2): attributes.gcp_channel: is not supported"),
        "{e}"
    );
    assert!(prefixes(&ctx).await.is_empty());
}

#[tokio::test]
async fn a_prefix_in_a_vms_cfg_and_a_yaml_file_is_refused_as_between_yaml_files() {
    let (ctx, _, dir) = setup();
    std::fs::write(dir.join("vms.cfg"), VMS_CFG).unwrap();
    std::fs::write(dir.join("win.yaml"), yaml_serde::to_string(&crate::testing::config("win", 1)).unwrap())
        .unwrap();
    run(&ctx).await.unwrap();
    assert_eq!(prefixes(&ctx).await, ["linux", "mac"], "win is claimed twice: applied nowhere");
    let errors = ctx.ports.store.file_errors().await.unwrap();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors.iter().all(|e| e.message.contains("claimed by several files")), "{errors:?}");
    // The YAML file goes: vms.cfg takes win.
    std::fs::remove_file(dir.join("win.yaml")).unwrap();
    run(&ctx).await.unwrap();
    assert_eq!(ctx.ports.store.config("win").await.unwrap().unwrap().value.source, "vms.cfg");
}

#[tokio::test]
async fn hostile_cfg_files_are_refused_without_echoing_them() {
    let (ctx, _, dir) = setup();
    let escape = VMS_CFG.replace("token:metadata/token.txt", "token:../secret.txt");
    std::fs::write(dir.join("vms.cfg"), escape).unwrap();
    run(&ctx).await.unwrap();
    let e = only_error(&ctx).await;
    assert!(e.contains("vms block \"linux\" (line 2)") && e.contains("leaves the configs directory"), "{e}");
    assert!(!e.contains("TOPSECRET"));
    // A syntax error quotes nothing of the file; deep nesting and a huge file are refused.
    for (text, why) in [
        (
            "vms { prefix: \"a\" attributes { metadata { from_text: \"pw:TOPSECRET-42 } } }".to_owned(),
            "not closed",
        ),
        ("vms {".repeat(200_000), "deeper than"),
        (format!("vms {{ prefix: \"{}\" }}", "a".repeat(2 << 20)), "at most"),
    ] {
        std::fs::write(dir.join("vms.cfg"), &text).unwrap();
        run(&ctx).await.unwrap();
        let e = only_error(&ctx).await;
        assert!(e.contains(why), "{e}");
        assert!(!e.contains("TOPSECRET") && e.len() < 400, "{e}");
    }
    assert!(prefixes(&ctx).await.is_empty());
}

#[tokio::test]
async fn errors_found_after_reading_say_the_block_and_line_too() {
    let (ctx, f, dir) = setup();
    // The settings do not list this server (the tenant's rule), and Compute has no such zone.
    let text = VMS_CFG
        .replacen("swarming: \"https://swarm.example.com\"", "swarming: \"https://other.example.com\"", 1)
        .replace("zone: \"us-east1-c\"", "zone: \"us-east1-x\"");
    std::fs::write(dir.join("vms.cfg"), text).unwrap();
    run(&ctx).await.unwrap();
    let errors = ctx.ports.store.file_errors().await.unwrap();
    let of = |p: &str| errors.iter().find(|e| e.prefix == p).map(|e| e.message.clone()).unwrap_or_default();
    assert!(of("linux").contains("vms.cfg:42: vms block \"linux\" (line 2): linux.swarming: "), "{errors:?}");
    assert!(
        of("win").contains("vms.cfg:50: vms block \"win\" (line 45): win.attributes.zone: "),
        "{errors:?}"
    );
    assert_eq!(prefixes(&ctx).await, ["mac"], "the others of the file are applied, as YAML files are");
    // A round later the two errors of the one file are the same two: none is new again.
    f.clock.advance(Duration::minutes(1));
    run(&ctx).await.unwrap();
    assert_eq!(ctx.ports.store.file_errors().await.unwrap(), errors, "kept as they were, since included");
}

#[tokio::test]
async fn one_document_of_a_yaml_file_edited_leaves_the_others_revision_and_a_prefix_twice_is_named() {
    let (ctx, _, dir) = setup();
    let doc = |prefix: &str, amount: u32| {
        let mut c = crate::testing::config(prefix, amount);
        c.attributes.zone = "z".into();
        yaml_serde::to_string(&c).unwrap()
    };
    std::fs::write(dir.join("two.yaml"), format!("{}---\n{}", doc("a", 1), doc("b", 1))).unwrap();
    assert_eq!(run(&ctx).await.unwrap(), 2, "{:?}", ctx.ports.store.file_errors().await.unwrap());
    let revision = |p: &'static str| {
        let ctx = &ctx;
        async move { ctx.ports.store.config(p).await.unwrap().unwrap().value.revision }
    };
    let (a, b) = (revision("a").await, revision("b").await);
    std::fs::write(dir.join("two.yaml"), format!("{}---\n{}", doc("a", 2), doc("b", 1))).unwrap();
    run(&ctx).await.unwrap();
    assert_ne!(revision("a").await, a);
    assert_eq!(revision("b").await, b, "b's document did not change");
    std::fs::write(dir.join("two.yaml"), format!("{}---\n{}", doc("a", 2), doc("a", 1))).unwrap();
    run(&ctx).await.unwrap();
    let e = only_error(&ctx).await;
    assert!(e.contains("document 2: prefix \"a\" also in document 1"), "{e}");
}

#[tokio::test]
async fn every_mistake_of_a_vms_cfg_is_recorded_in_one_round_by_the_config_it_is_about() {
    let (ctx, _, dir) = setup();
    // A seventh mistake, found after reading: a metadata file that is not there.
    let text = crate::config::luci::tests::SIX_MISTAKES.replace(
        "disk { image: \"global/images/win\" }",
        "disk { image: \"global/images/win\" }\n    metadata { from_file: \"k:metadata/gone.txt\" }",
    );
    std::fs::write(dir.join("vms.cfg"), text).unwrap();
    run(&ctx).await.unwrap();
    let mut errors = ctx.ports.store.file_errors().await.unwrap();
    errors.sort_by(|a, b| a.prefix.cmp(&b.prefix));
    let lines = |i: usize| errors[i].message.lines().map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(errors.iter().map(|e| e.prefix.as_str()).collect::<Vec<_>>(), ["linux", "win"], "{errors:#?}");
    let linux = "vms block \"linux\" (line 1): ";
    assert_eq!(
        lines(0),
        [
            format!("vms.cfg:3: {linux}linux.amount: min 5 is above max 2"),
            format!("vms.cfg:6: {linux}attributes.zone: must be a quoted string"),
            format!("vms.cfg:8: {linux}attributes.disk[0].size: must not be negative"),
            format!("vms.cfg:10: {linux}attributes.gpu: is not a field of LUCI's config.proto here"),
        ]
    );
    let win = lines(1);
    assert_eq!(win.len(), 3, "{win:#?}");
    assert!(
        win[0].starts_with("vms.cfg:15: vms block \"win\" (line 15): swarming: is required here"),
        "{win:#?}"
    );
    assert!(
        win[1].starts_with("vms.cfg:15: vms block \"win\" (line 15): win.lifetime: is required"),
        "{win:#?}"
    );
    assert!(
        win[2].starts_with("vms.cfg:22: vms block \"win\" (line 15): win.attributes.metadata[0].from_file: \"metadata/gone.txt\": cannot read"),
        "{win:#?}"
    );
    assert!(prefixes(&ctx).await.is_empty());
}
