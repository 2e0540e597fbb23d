//! The production path's credentials end to end: `gce-backend run --google-credentials adc`
//! against a simulator that requires Google tokens (`--require-auth`), with tokens from its
//! metadata server (`GCE_METADATA_HOST`, as on a VM or a GKE pod) or a service-account key file
//! (`GOOGLE_APPLICATION_CREDENTIALS`). Every Compute and Swarming call carries a current token of
//! its API's scope, tokens are renewed before they expire, a Swarming server listed as `http://`
//! never gets one, and a metadata server that stops answering is one error line and a wait.

use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use gce_backend::sim::SimConfig;
use gce_backend::sim::auth::{AuthSettings, CLOUD_PLATFORM, USERINFO_EMAIL};
use gce_backend_queues::testing::eventually;
use serde_json::Value;

use crate::support::{DEPLOYMENT, Procs, lines, pool, sim_config, temp_dir, wall_now};

/// Token lifetime on the simulator: short, so a run sees several.
const TTL_S: u64 = 20;
const LIMIT: Duration = Duration::from_secs(120);

async fn start() -> Procs {
    let toml = "[swarming]\nservers = [\"https://swarm.example.com\", \"http://dev-swarm.example.com\"]\n";
    let auth = AuthSettings {
        require_auth: true,
        token_ttl_s: TTL_S,
        anonymous_swarming: vec!["dev-swarm.example.com".into()],
    };
    let env = Procs::start_with(8, toml, SimConfig { auth, ..sim_config() }).await;
    std::fs::write(env.configs.join("linux.yaml"), pool("linux", 2, "1d", "10m")).unwrap();
    let dev =
        pool("dev", 1, "1d", "10m").replace("https://swarm.example.com", "http://dev-swarm.example.com");
    std::fs::write(env.configs.join("dev.yaml"), dev).unwrap();
    env
}

/// `gce-backend run --google-credentials adc` on `env` with `vars` (HOME empty: no gcloud
/// file), its log lines on a channel.
fn spawn(env: &Procs, vars: &[(&str, String)]) -> (Child, mpsc::Receiver<String>) {
    let home = temp_dir();
    let mut child = env
        .command()
        .args(["--google-credentials", "adc", "--listen", "127.0.0.1:0", "--root-url", "http://localhost"])
        .env_remove("GOOGLE_APPLICATION_CREDENTIALS")
        .env_remove("GCE_METADATA_HOST")
        .env("HOME", &home)
        .env("RUST_LOG", "info")
        .envs(vars.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = lines(child.stderr.take().unwrap());
    (child, rx)
}

/// What the simulator says of its tokens and calls (`GET /sim/auth`).
async fn auth(env: &Procs) -> Value {
    reqwest::get(format!("http://{}/sim/auth", env.addr)).await.unwrap().json().await.unwrap()
}

/// Waits until both pools have all their VMs with a connected bot.
async fn converged(env: &Procs) {
    let (_, store, _) =
        gce_backend::adapters::backends::open(Some(&env.redis.url()), DEPLOYMENT).await.unwrap();
    for (prefix, n) in [("linux", 2), ("dev", 1)] {
        eventually(&format!("{prefix} converges"), LIMIT, || {
            let store = store.clone();
            async move {
                let now = wall_now();
                let c = gce_backend_jobs::records::counts::tally(&*store, prefix, now).await.ok()?.0;
                (c.created == n && c.connected == n).then_some(())
            }
        })
        .await;
    }
}

/// The simulator's clock now (ms since its start).
fn sim_ms(env: &Procs) -> u64 {
    env.sim.with(|w| w.clock_ms(w.now()))
}

/// Asserts no call was refused or carried a stale token, and the `http://` server got none.
fn assert_every_call_authenticated(a: &Value) {
    for api in ["compute", "swarming"] {
        let s = &a["standings"][api];
        assert!(s["current"].as_u64().unwrap_or(0) > 0, "{api} calls carried tokens: {a}");
        for bad in ["invalid", "expired", "scope"] {
            assert_eq!(s[bad].as_u64().unwrap_or(0), 0, "{api} {bad}: {a}");
        }
    }
    assert_eq!(a["standings"]["compute"]["missing"].as_u64().unwrap_or(0), 0, "{a}");
    let https = &a["servers"]["swarm.example.com"];
    assert_eq!(https["without_token"].as_u64().unwrap_or(0), 0, "{a}");
    let http = &a["servers"]["dev-swarm.example.com"];
    assert!(http["without_token"].as_u64().unwrap_or(0) > 0, "the dev server was called: {a}");
    assert_eq!(http["with_token"].as_u64().unwrap_or(0), 0, "no token over http: {a}");
    let swarming_missing = a["standings"]["swarming"]["missing"].as_u64().unwrap_or(0);
    assert_eq!(swarming_missing, http["without_token"].as_u64().unwrap(), "only the dev server's: {a}");
    for t in a["tokens"].as_array().unwrap() {
        assert_eq!(t["late"], 0, "no call with an expired token: {t}");
    }
}

/// The tokens of `scope`, in order, as (issued, expires) ms.
fn lives(a: &Value, scope: &str) -> Vec<(u64, u64)> {
    a["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["scopes"].as_array().unwrap().iter().any(|s| s == scope))
        .map(|t| (t["issued_ms"].as_u64().unwrap(), t["expires_ms"].as_u64().unwrap()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_from_the_metadata_server_are_renewed_scoped_and_never_sent_over_http() {
    let env = start().await;
    let (mut child, log) = spawn(&env, &[("GCE_METADATA_HOST", env.addr.to_string())]);
    converged(&env).await;
    // Past two token lifetimes since the first token.
    let first = eventually("a token issued", LIMIT, || async {
        auth(&env).await["tokens"].as_array().and_then(|t| t.first()).and_then(|t| t["issued_ms"].as_u64())
    })
    .await;
    eventually("two token lifetimes pass", LIMIT, || async {
        (sim_ms(&env) > first + 2 * TTL_S * 1000 + 2000).then_some(())
    })
    .await;
    let a = auth(&env).await;
    assert_every_call_authenticated(&a);
    assert_eq!(a["requests"]["metadata"].as_u64(), a["tokens"].as_array().map(|t| t.len() as u64), "{a}");
    for scope in [CLOUD_PLATFORM, USERINFO_EMAIL] {
        let l = lives(&a, scope);
        assert!(l.len() >= 3, "{scope}: renewed at least twice: {l:?}");
        for w in l.windows(2) {
            assert!(w[1].0 < w[0].1, "{scope}: each token renewed before the last expired: {l:?}");
        }
    }
    let (_, store, _) =
        gce_backend::adapters::backends::open(Some(&env.redis.url()), DEPLOYMENT).await.unwrap();
    for prefix in ["linux", "dev"] {
        let now = wall_now();
        let st =
            gce_backend_jobs::fleet::status::status(&*store, prefix, now, chrono::Duration::zero(), false)
                .await
                .unwrap();
        assert_eq!((st.task_failures, st.dead_tasks), (0, 0), "{prefix}: no task failed for a token");
    }

    // The metadata server stops answering: past the last token's life the calls fail, the
    // process says so once and waits; it answers again: tokens and calls resume.
    env.sim.with(|w| w.accounts.metadata_down = true);
    let down_at = sim_ms(&env);
    eventually("the last token expires and calls are retried meanwhile", LIMIT, || async {
        (sim_ms(&env) > down_at + TTL_S * 1000 + 5000).then_some(())
    })
    .await;
    assert!(child.try_wait().unwrap().is_none(), "the process waits, it does not exit");
    let lines: Vec<String> = log.try_iter().collect();
    let said: Vec<&String> = lines.iter().filter(|l| l.contains("no Google access token")).collect();
    assert_eq!(said.len(), 1, "one clear error: {said:#?}");
    assert!(said[0].contains("ERROR") && said[0].contains("metadata server"), "{}", said[0]);
    let before = auth(&env).await["standings"]["compute"]["current"].as_u64().unwrap();
    env.sim.with(|w| w.accounts.metadata_down = false);
    eventually("tokens again", LIMIT, || async {
        log.try_iter().any(|l| l.contains("Google credentials: tokens again")).then_some(())
    })
    .await;
    eventually("Compute calls resume", LIMIT, || async {
        (auth(&env).await["standings"]["compute"]["current"].as_u64().unwrap() > before).then_some(())
    })
    .await;
    assert_every_call_authenticated(&auth(&env).await);
    env.stop(std::slice::from_mut(&mut child));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_account_key_file_buys_tokens_of_each_scope_at_its_token_endpoint() {
    let env = start().await;
    let key =
        reqwest::get(format!("http://{}/sim/auth/key-file", env.addr)).await.unwrap().text().await.unwrap();
    let path = env.dir.join("key.json");
    std::fs::write(&path, key).unwrap();
    let (mut child, _log) = spawn(&env, &[("GOOGLE_APPLICATION_CREDENTIALS", path.display().to_string())]);
    converged(&env).await;
    let a = auth(&env).await;
    assert_every_call_authenticated(&a);
    assert_eq!(a["requests"]["metadata"], Value::Null, "the key file, not the metadata server: {a}");
    let sources: Vec<(&str, Value)> = a["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["source"].as_str().unwrap(), t["scopes"].clone()))
        .collect();
    for scope in [CLOUD_PLATFORM, USERINFO_EMAIL] {
        assert!(
            sources.iter().any(|(s, sc)| *s == "key_file" && *sc == serde_json::json!([scope])),
            "{scope}: {sources:?}"
        );
    }
    env.stop(std::slice::from_mut(&mut child));
}
