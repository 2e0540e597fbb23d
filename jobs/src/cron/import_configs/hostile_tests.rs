//! Files that try to reach beyond the configs directory, and Configs that reach beyond their
//! tenant: refused at import with the field named, never echoing what a file holds.

use std::path::PathBuf;
use std::sync::Arc;

use super::*;
use crate::config::{SwarmingServers, Tenant, Trust};
use crate::testing::config;

static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A context importing from `<tmp>/configs`, with a secret beside that directory.
fn setup() -> (Ctx, PathBuf, PathBuf) {
    let (mut ctx, _) = Ctx::test();
    let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let root = std::env::temp_dir().join(format!("gce-backend-hostile-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let dir = root.join("configs");
    std::fs::create_dir_all(&dir).unwrap();
    let secret = root.join("secret.txt");
    std::fs::write(&secret, "TOPSECRET-42").unwrap();
    ctx.settings.configs_dir = dir.clone();
    (ctx, dir, secret)
}

fn yaml(c: &Config) -> String {
    yaml_serde::to_string(c).unwrap()
}

async fn error_of(ctx: &Ctx, file: &str) -> String {
    let errors = ctx.ports.store.file_errors().await.unwrap();
    errors.iter().find(|e| e.path.ends_with(file)).map(|e| e.message.clone()).unwrap_or_default()
}

#[tokio::test]
async fn from_file_stays_in_the_configs_directory_and_no_error_echoes_a_file() {
    let (ctx, dir, secret) = setup();
    std::os::unix::fs::symlink(&secret, dir.join("link.txt")).unwrap();
    std::fs::write(dir.join("ok.txt"), "#!/bin/sh\necho hi").unwrap();
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    // A second name for a file (here in the directory; it could be one made for a file outside).
    std::fs::write(dir.join("h.txt"), "x").unwrap();
    std::fs::hard_link(dir.join("h.txt"), dir.join("hard.txt")).unwrap();
    let cases = [
        ("up", "pw:../secret.txt", "leaves the configs directory"),
        ("deep", "pw:../../../../../../etc/passwd", "leaves the configs directory"),
        ("abs", &format!("k:{}", secret.display()) as &str, "relative to the Config file's directory"),
        ("env", "k:/proc/self/environ", "relative to the Config file's directory"),
        ("sym", "k:link.txt", "leaves the configs directory"),
        ("dir", "k:sub", "not a regular file"),
        ("none", "k:", "relative to the Config file's directory"),
        ("hard", "k:hard.txt", "hard links"),
    ];
    for (prefix, spec, _) in &cases {
        let mut c = config(prefix, 1);
        c.attributes.metadata = vec![crate::config::Metadata {
            unknown: Default::default(),
            from_text: None,
            from_file: Some((*spec).into()),
        }];
        std::fs::write(dir.join(format!("{prefix}.yaml")), yaml(&c)).unwrap();
    }
    let mut good = config("good", 1);
    good.attributes.metadata = vec![crate::config::Metadata {
        unknown: Default::default(),
        from_text: None,
        from_file: Some("startup-script:ok.txt".into()),
    }];
    std::fs::write(dir.join("good.yaml"), yaml(&good)).unwrap();
    // A Config file that is itself a link out of the directory is refused unread.
    std::os::unix::fs::symlink(&secret, dir.join("leak.yaml")).unwrap();
    run(&ctx).await.unwrap();
    for (prefix, _, why) in cases {
        let e = error_of(&ctx, &format!("{prefix}.yaml")).await;
        assert!(
            e.contains(&format!("{prefix}.attributes.metadata[0].from_file")) && e.contains(why),
            "{prefix}: {e}"
        );
        assert!(ctx.ports.store.config(prefix).await.unwrap().is_none(), "{prefix} stored");
    }
    assert!(error_of(&ctx, "leak.yaml").await.contains("leaves the configs directory"));
    let all = format!("{:?}", ctx.ports.store.file_errors().await.unwrap());
    assert!(!all.contains("TOPSECRET") && !all.contains("root:"), "{all}");
    let stored = ctx.ports.store.config("good").await.unwrap().expect("a file inside the directory is read");
    assert_eq!(
        stored.value.config.attributes.metadata[0].pair(),
        Some(("startup-script", "#!/bin/sh\necho hi"))
    );
}

#[tokio::test]
async fn a_parse_error_never_quotes_the_file() {
    let (ctx, dir, _) = setup();
    std::fs::write(dir.join("bad.yaml"), "\"root:x:0:0:root:/root:/bin/bash TOPSECRET\"\n").unwrap();
    run(&ctx).await.unwrap();
    let e = error_of(&ctx, "bad.yaml").await;
    assert!(e.contains("cannot parse") && !e.contains("TOPSECRET") && !e.contains("root:x"), "{e}");
}

#[tokio::test]
async fn durations_and_counts_out_of_range_are_file_errors_not_panics() {
    let (ctx, dir, _) = setup();
    for (name, lifetime) in [("huge", "10000000000mo"), ("wrap", "18446744073709551615"), ("year", "400d")] {
        let text = yaml(&config(name, 1)).replace("lifetime: 86400", &format!("lifetime: {lifetime}"));
        assert!(text.contains(lifetime), "{text}");
        std::fs::write(dir.join(format!("{name}.yaml")), text).unwrap();
    }
    run(&ctx).await.unwrap();
    for name in ["huge", "wrap", "year"] {
        let e = error_of(&ctx, &format!("{name}.yaml")).await;
        assert!(e.contains(&format!("{name}.lifetime")) && e.contains("31536000s (365d)"), "{name}: {e}");
        assert!(ctx.ports.store.config(name).await.unwrap().is_none());
    }
}

#[tokio::test]
async fn a_file_outside_its_tenants_box_is_refused_and_a_good_one_of_the_tenant_goes_on() {
    let (mut ctx, dir, _) = setup();
    let tenants = std::collections::BTreeMap::from([(
        "team-a".to_owned(),
        Tenant {
            prefixes: vec!["team-a-*".into()],
            projects: vec!["test-project".into()],
            service_accounts: vec!["*".into()],
            machines: Vec::new(),
            max_vms: Some(3),
            ..Tenant::default()
        },
    )]);
    ctx.settings.trust = Arc::new(Trust::new(&SwarmingServers::default(), &tenants).unwrap());
    let of_a = |prefix: &str, amount| Config { owner: vec!["team-a".into()], ..config(prefix, amount) };
    std::fs::write(dir.join("a.yaml"), yaml(&of_a("team-a-linux", 2))).unwrap();
    std::fs::write(dir.join("squat.yaml"), yaml(&of_a("web", 1))).unwrap();
    std::fs::write(dir.join("more.yaml"), yaml(&of_a("team-a-mac", 2))).unwrap();
    let evil = Config { swarming: "http://127.0.0.1:19999".into(), ..of_a("team-a-evil", 0) };
    std::fs::write(dir.join("evil.yaml"), yaml(&evil)).unwrap();
    std::fs::write(dir.join("nobody.yaml"), yaml(&config("linux", 1))).unwrap();
    run(&ctx).await.unwrap();
    assert!(ctx.ports.store.config("team-a-linux").await.unwrap().is_some());
    for (file, field, rule) in [
        ("squat.yaml", "web.prefix", "outside tenant team-a's namespace"),
        ("more.yaml", "team-a-mac.amount", "max_vms is 3"),
        ("evil.yaml", "team-a-evil.swarming", "not listed in the settings"),
        ("nobody.yaml", "linux.owner", "no tenant"),
    ] {
        let e = error_of(&ctx, file).await;
        assert!(e.contains(field) && e.contains(rule), "{file}: {e}");
    }
}
