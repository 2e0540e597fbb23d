//! `gce-backend run` as an operator starts it: inputs checked with their paths named, Redis
//! waited for with a clear log line, and failures of tasks visible on the Config's status.

use std::process::Command;
use std::time::Duration;

use gce_backend_queues::testing::{RedisServer, eventually};
use serde_json::json;

use crate::support::{
    BIN, Backend, Env, pool, settings_file, sim_config, spawn_run, temp_dir, terminate, wait_for,
};

#[test]
fn run_refuses_a_missing_settings_file_or_configs_directory_naming_the_path() {
    let dir = temp_dir();
    let out = Command::new(BIN).arg("run").current_dir(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("settings file config/service.toml: not found"), "{err}");
    let out =
        Command::new(BIN).args(["run", "--settings", &settings_file()]).current_dir(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("configs directory config/pools: not found"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_waits_for_redis_at_start_and_carries_on_when_it_comes() {
    let (addr, _sim) = gce_backend::sim::spawn(sim_config()).await.unwrap();
    let dir = temp_dir();
    std::fs::write(dir.join("linux.yaml"), pool("linux", 1, "1d", "10m")).unwrap();
    let mut redis = RedisServer::start();
    redis.kill();
    let (gce, url) = (format!("http://{addr}"), redis.url());
    let args = ["run", "--quiet", "--redis", &url, "--namespace", "startup", "--listen", "127.0.0.1:0"];
    let (mut child, out, err) =
        spawn_run(&[&args[..], &["--root-url", "http://localhost", "--gce-endpoint", &gce]].concat(), &dir);
    let warn = wait_for(&err, "Redis is not reachable");
    // The URL as the service names it (database 0 is not spelled out).
    let named = redis.url().trim_end_matches("/0").to_owned();
    assert!(
        warn.contains("WARN") && warn.contains(&format!("--redis {named}")) && warn.contains("retry_in"),
        "{warn}"
    );
    assert!(!warn.contains('\u{1b}'), "no colours off a terminal: {warn:?}");
    redis.restart();
    wait_for(&out, "running (configs in");
    let imported = wait_for(&err, "imported");
    assert!(
        imported.contains("INFO") && imported.contains("config=linux"),
        "lifecycle at the default level: {imported}"
    );
    terminate(child.id());
    assert!(child.wait().unwrap().success());
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_dies_is_counted_on_its_config_and_a_missing_disk_type_is_refused() {
    let env = Env::start(Backend::Redis, sim_config(), &[], true).await;
    // Swarming refuses GetBot and ListBots (so manage_bot cannot read the walk instead).
    let denied = json!({"rate": 1.0, "status": 403});
    env.faults(json!({"errors": {"swarming.GetBot": denied, "swarming.ListBots": denied}})).await;
    env.write_pool("linux", &pool("linux", 1, "1d", "10m"));
    let st = eventually("manage_bot's task dies and its Config says so", Duration::from_secs(60), || async {
        let st = env.status("linux", false).await;
        (st.dead_tasks >= 1).then_some(st)
    })
    .await;
    let e = st.errors.iter().find(|e| e.code == "dead").expect("the dead task is in the Config's errors");
    assert_eq!(e.stage, "manage_bot");
    assert!(e.message.contains("linux-0") && e.message.contains("permanent"), "{e:?}");
    assert!(st.verified, "zone and disk types checked against the simulator");
    assert!(st.task_failures >= st.dead_tasks, "every failed run is counted: {}", st.task_failures);
    assert_eq!(env.ctx.queues.get("manage_bot").counts().await.unwrap().dead, st.dead_tasks);

    let bad = pool("mac", 1, "1d", "10m").replace("diskTypes/pd-ssd", "diskTypes/pd-fast");
    env.write_pool("mac", &bad);
    let f = eventually("pd-fast is refused at import", Duration::from_secs(60), || async {
        env.ctx.ports.store.file_errors().await.unwrap().into_iter().next()
    })
    .await;
    assert!(f.message.contains("mac.attributes.disk[0].type") && f.message.contains("pd-fast"), "{f:?}");
    assert!(env.ctx.ports.store.config("mac").await.unwrap().is_none());
    env.stop().await;
}

#[test]
fn the_api_refuses_a_public_address_without_allow_remote_and_redis_without_a_root_url() {
    let dir = temp_dir();
    let run = |extra: &[&str]| {
        Command::new(BIN)
            .args(["run", "--quiet", "--settings", &settings_file()])
            .arg("--configs")
            .arg(&dir)
            .args(extra)
            .output()
            .unwrap()
    };
    let out = run(&["--listen", "0.0.0.0:0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("add --allow-remote"), "{out:?}");
    let out = run(&["--redis", "redis://127.0.0.1:1", "--listen", "127.0.0.1:0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--root-url (or GCE_BACKEND_PUBLIC_URL) is required"),
        "{out:?}"
    );
    let out = run(&["--tokens", "/nonexistent/tokens.toml", "--listen", "127.0.0.1:0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/tokens.toml"), "{out:?}");
    // A directory where the file should be (a bind mount of a missing file) is named as such.
    let out = run(&["--tokens", dir.to_str().unwrap(), "--listen", "127.0.0.1:0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("a directory, not a tokens file"), "{out:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn json_logs_are_one_flat_object_per_line_with_severity_message_time_and_the_lifecycle_fields() {
    let dir = temp_dir();
    std::fs::write(dir.join("linux.yaml"), pool("linux", 1, "1d", "10m")).unwrap();
    let (mut child, _out, err) =
        spawn_run(&["run", "--log-format", "json", "--quiet", "--listen", "127.0.0.1:0"], &dir);
    let mut seen = Vec::new();
    let created = loop {
        let line = err.recv_timeout(Duration::from_secs(60)).expect("a log line");
        let v: serde_json::Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        let time = v["time"].as_str().unwrap_or_else(|| panic!("no time: {line}"));
        assert!(chrono::DateTime::parse_from_rfc3339(time).is_ok(), "{line}");
        assert!(
            ["DEBUG", "INFO", "WARNING", "ERROR"].contains(&v["severity"].as_str().unwrap_or("")),
            "{line}"
        );
        seen.push(v["message"].as_str().unwrap_or_else(|| panic!("no message: {line}")).to_owned());
        if v["message"] == "instance created" {
            break v;
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(seen.contains(&"imported".to_owned()), "{seen:?}");
    let f = &created;
    assert_eq!(
        (f["config"].as_str(), f["vm"].as_str(), f["zone"].as_str()),
        (Some("linux"), Some("linux-0"), Some("us-central1-b"))
    );
    assert!(f["hostname"].as_str().is_some_and(|h| h.starts_with("linux-0-")), "{created}");
    assert_eq!(created["queue"], "create_instance", "the task span's fields, flat: {created}");
    assert_eq!(created["span"], "task", "{created}");
    assert_eq!(created["severity"], "INFO");
    assert!(created.get("fields").is_none() && created.get("level").is_none(), "{created}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_says_which_stored_configs_name_a_server_the_settings_do_not_list() {
    use gce_backend_jobs::ports::store::{Expect, Store};
    let (addr, _sim) = gce_backend::sim::spawn(sim_config()).await.unwrap();
    let redis = RedisServer::start();
    // Stored by a build before `[swarming] servers` (or with another list).
    let store =
        gce_backend::adapters::redis_store::RedisStore::connect(&redis.url(), "unlisted").await.unwrap();
    let mut config = gce_backend_jobs::config::Config::parse(&pool("linux", 1, "1d", "10m"), "t").unwrap();
    config.swarming = "https://chromium-swarm.appspot.com".into();
    let rec = gce_backend_jobs::model::ConfigRecord { config, ..Default::default() };
    assert!(store.put_config(&rec, Expect::Absent).await.unwrap());
    let dir = temp_dir();
    let (gce, url) = (format!("http://{addr}"), redis.url());
    let args = [
        "run",
        "--quiet",
        "--redis",
        &url,
        "--namespace",
        "unlisted",
        "--role",
        "workers",
        "--gce-endpoint",
        &gce,
    ];
    let (mut child, _out, err) = spawn_run(&args, &dir);
    let line = wait_for(&err, "do not list");
    assert!(line.contains("ERROR") && line.contains("https://chromium-swarm.appspot.com"), "{line}");
    terminate(child.id());
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
