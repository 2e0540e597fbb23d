//! The configs directory watched: a file written, changed or removed is imported at once, with
//! `import_configs` ticking only hourly (so only the watch can have done it).

use std::time::Duration;

use gce_backend_queues::testing::eventually;

use crate::support::{Backend, Env, pool, settings, sim_config};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_config_file_written_is_imported_at_once_without_the_tick() {
    let mut s = settings();
    s.cron.insert("import_configs".into(), "1h".into());
    let env = Env::start_with(Backend::Redis, sim_config(), &[], true, s).await;
    let configs = || async { env.ctx.ports.store.configs().await.unwrap() };
    assert!(configs().await.is_empty());

    env.write_pool("watched", &pool("watched", 2, "1h", "10m"));
    let amount = |n: u32| {
        let configs = &configs;
        async move {
            configs()
                .await
                .iter()
                .any(|c| c.value.config.prefix == "watched" && c.value.current_amount == n)
                .then_some(())
        }
    };
    eventually("the new file is imported", Duration::from_secs(20), || amount(2)).await;
    env.converged("watched", 2).await;

    // A change too: the amount follows the file.
    env.write_pool("watched", &pool("watched", 3, "1h", "10m"));
    eventually("the changed file is imported", Duration::from_secs(20), || amount(3)).await;
    env.converged("watched", 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_file_a_config_reads_from_a_folder_changed_is_imported_at_once_without_the_tick() {
    let mut s = settings();
    s.cron.insert("import_configs".into(), "1h".into());
    let env = Env::start_with(Backend::Redis, sim_config(), &[], true, s).await;
    std::fs::create_dir_all(env.dir.join("scripts")).unwrap();
    std::fs::write(env.dir.join("scripts/startup.sh"), "echo v1").unwrap();
    let yaml = pool("folder", 1, "1h", "10m")
        .replace("  label:", "  metadata: [{from_file: \"startup-script:scripts/startup.sh\"}]\n  label:");
    env.write_pool("folder", &yaml);
    let script = |want: &'static str| {
        let ctx = &env.ctx;
        async move {
            let c = ctx.ports.store.config("folder").await.unwrap()?.value.config;
            let text = c.attributes.metadata.first()?.from_text.clone()?;
            (text == format!("startup-script:{want}")).then_some(())
        }
    };
    eventually("the new file is imported", Duration::from_secs(20), || script("echo v1")).await;
    // Only the file in the folder changes: the import follows it.
    std::fs::write(env.dir.join("scripts/startup.sh"), "echo v2").unwrap();
    eventually("the changed metadata file is imported", Duration::from_secs(20), || script("echo v2")).await;
}
