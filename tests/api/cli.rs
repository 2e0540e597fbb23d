//! The CLI as an operator runs it, against a running service's API: apply a Config file, list,
//! change the amount, the generic `api` command, and exit codes 0/1/2.

use std::process::{Command, Output};

use gce_backend_queues::testing::eventually;
use serde_json::Value;

use super::WRITER;
use crate::support::{BIN, Backend, Env, sim_config};

fn cli(env: &Env, token: &str, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("GCE_BACKEND_ROOT_URL", env.api_url.as_deref().unwrap())
        .env("GCE_BACKEND_TOKEN", token)
        .env_remove("RUST_BACKTRACE")
        .output()
        .unwrap()
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_uses_the_cli_on_the_api() {
    let env = Env::start(Backend::Redis, sim_config(), &[], true).await;
    // Outside the configs directory (the service's own), or the file would be imported too,
    // racing the apply.
    let files = crate::support::temp_dir();
    let file = files.join("web.yaml");
    let yaml = crate::support::pool("web", 1, "1d", "10m")
        .replace("amount: {min: 1, max: 1}", "amount: {min: 1, max: 4}");
    std::fs::write(&file, format!("{yaml}owner: [infra]\n")).unwrap();

    let o = cli(&env, WRITER, &["configs", "apply", "-f", file.to_str().unwrap()]);
    assert!(o.status.success(), "{:?}", text(&o));
    env.converged("web", 1).await;
    let o = cli(&env, WRITER, &["configs", "amount", "web", "3"]);
    assert!(o.status.success(), "{:?}", text(&o));
    env.converged("web", 3).await;

    // The table, and the same as JSON.
    let o = cli(&env, WRITER, &["configs", "list"]);
    let (out, _) = text(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("PREFIX") && lines[0].contains("CONNECTED"), "{out}");
    assert!(lines[1].starts_with("web ") && lines[1].contains(" api "), "{out}");
    let o = cli(&env, WRITER, &["configs", "list", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["configs"][0]["amount"], 3);
    let o = cli(&env, WRITER, &["vms", "list", "web", "--state", "connected"]);
    assert_eq!(text(&o).0.lines().filter(|l| l.starts_with("web-")).count(), 3, "{:?}", text(&o));

    // The generic command reads the reference: any method, no CLI change.
    let o = cli(&env, WRITER, &["api", "listVms", "prefix=web", "limit=2"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((v["vms"].as_array().unwrap().len(), v["continuationToken"].is_string()), (2, true));

    // Exit codes: API errors 1, usage 2.
    let o = cli(&env, "gbt_wrong", &["configs", "list"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).1.contains("401 AuthenticationFailed"), "{:?}", text(&o));
    let o = cli(&env, WRITER, &["configs", "get", "nosuch"]);
    assert_eq!(o.status.code(), Some(1));
    let o = cli(&env, WRITER, &["api", "noSuchMethod"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("listConfigs"), "lists the methods: {:?}", text(&o));
    let o = Command::new(BIN).args(["configs", "list"]).env_remove("GCE_BACKEND_ROOT_URL").output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("no root URL"), "{:?}", text(&o));
    let bad = files.join("bad.yaml");
    std::fs::write(&bad, "prefix: Bad\n").unwrap();
    let o = cli(&env, WRITER, &["configs", "apply", "-f", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{:?}", text(&o));
    let (_, err) = text(&o);
    assert!(err.contains("400 InvalidInput") && err.contains("Bad.prefix: must match"), "{err}");
    eventually("nothing else changed", std::time::Duration::from_secs(5), || async {
        (env.vms("web").await.len() == 3).then_some(())
    })
    .await;
    let _ = std::fs::remove_dir_all(&files);
}
