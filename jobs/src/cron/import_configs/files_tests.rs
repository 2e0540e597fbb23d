//! Unit tests of what the import says of files it does not follow: an empty or unreadable file is
//! an error of that file, deletes nothing and holds the deletion of a Config whose file is gone
//! (said with the files it waits on, since its first round); each entry names who may read it.

use chrono::Duration;

use super::tests::{path, setup, write};
use super::*;
use crate::model::FileProblem::{DeletionHeld, NotApplied};
use crate::testing::config;

#[tokio::test]
async fn an_empty_file_is_an_error_of_that_file_and_deletes_nothing() {
    let (ctx, f, dir) = setup();
    write(&dir, "linux.yaml", &config("linux", 2));
    write(&dir, "mac.yaml", &config("mac", 1));
    run(&ctx).await.unwrap();
    std::fs::remove_file(dir.join("mac.yaml")).unwrap();
    let first = ctx.now();
    for text in ["", "# nothing\n", "---\n", "{}"] {
        std::fs::write(dir.join("linux.yaml"), text).unwrap();
        run(&ctx).await.unwrap();
        f.clock.advance(Duration::hours(1));
        run(&ctx).await.unwrap();
        let linux = ctx.ports.store.config("linux").await.unwrap().unwrap().value;
        assert!(linux.orphaned.is_none(), "{text:?}");
        assert!(
            ctx.ports.store.config("mac").await.unwrap().unwrap().value.orphaned.is_none(),
            "blocked: {text:?}"
        );
        let errors = ctx.ports.store.file_errors().await.unwrap();
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert_eq!(
            (errors[0].path.as_str(), errors[0].kind),
            (path(&dir, "linux.yaml").as_str(), NotApplied)
        );
        // mac's file is gone: its deletion is held, said with the file it waits on, since the first round.
        let held = &errors[1];
        assert_eq!((held.path.as_str(), held.prefix.as_str()), (path(&dir, "mac.yaml").as_str(), "mac"));
        assert_eq!((held.kind, held.since), (DeletionHeld, first), "{held:?}");
        assert!(held.message.contains("linux.yaml"), "{held:?}");
        assert_eq!(held.owner, Some(config("mac", 1).owner), "who may read it: mac's owners");
    }
    let e = &ctx.ports.store.errors("linux").await.unwrap()[0];
    assert_eq!((e.stage.as_str(), e.code.as_str()), ("import_configs", "invalid"));
    assert!(e.message.contains("linux.yaml"), "{e:?}");
    // Fixed: nothing is held any more, and mac's deletion begins.
    write(&dir, "linux.yaml", &config("linux", 2));
    run(&ctx).await.unwrap();
    assert!(ctx.ports.store.file_errors().await.unwrap().is_empty());
    assert!(ctx.ports.store.config("mac").await.unwrap().unwrap().value.orphaned.is_some());
}

#[tokio::test]
async fn an_unreadable_file_blocks_deletion() {
    let (ctx, f, dir) = setup();
    write(&dir, "mac.yaml", &config("mac", 1));
    run(&ctx).await.unwrap();
    std::fs::remove_file(dir.join("mac.yaml")).unwrap();
    std::fs::write(dir.join("broken.yaml"), [0xff, 0xfe, 0x00]).unwrap();
    f.clock.advance(Duration::hours(1));
    run(&ctx).await.unwrap();
    assert!(ctx.ports.store.config("mac").await.unwrap().unwrap().value.orphaned.is_none());
    assert!(ctx.ports.store.file_errors().await.unwrap()[0].message.contains("cannot read"));
}

#[tokio::test]
async fn a_file_not_applied_names_the_owners_it_gives_else_those_of_the_config_it_holds() {
    let (ctx, _, dir) = setup();
    // A new file, never applied: its own owners (who may read its errors).
    let mut new = config("infra-ci", 1);
    new.owner = vec!["infra".into()];
    new.amount.min = 3;
    write(&dir, "infra-ci.yaml", &new);
    // An applied Config whose file becomes unreadable: the owners of the Config stored.
    let mut web = config("web", 1);
    web.owner = vec!["web".into()];
    write(&dir, "web.yaml", &web);
    run(&ctx).await.unwrap();
    std::fs::write(dir.join("web.yaml"), [0xff, 0xfe]).unwrap();
    run(&ctx).await.unwrap();
    let errors = ctx.ports.store.file_errors().await.unwrap();
    let owner = |file: &str| errors.iter().find(|e| e.path == path(&dir, file)).map(|e| e.owner.clone());
    assert_eq!(owner("infra-ci.yaml"), Some(Some(vec!["infra".to_owned()])), "{errors:?}");
    assert_eq!(owner("web.yaml"), Some(Some(vec!["web".to_owned()])), "unreadable: web's owners: {errors:?}");
    // A file unreadable from the start: admins only.
    std::fs::write(dir.join("junk.yaml"), [0xff, 0xfe]).unwrap();
    run(&ctx).await.unwrap();
    let errors = ctx.ports.store.file_errors().await.unwrap();
    assert_eq!(errors.iter().find(|e| e.path == path(&dir, "junk.yaml")).map(|e| &e.owner), Some(&None));
}
