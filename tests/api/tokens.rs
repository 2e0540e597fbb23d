//! Tokens that end, on a running service: a token removed from the tokens file is refused within
//! seconds, one added is accepted, an expired one is refused by name, also when the file is a
//! Kubernetes Secret updated under it; `gce-backend run` reads the file again on SIGHUP (and is not
//! ended by it).

use std::path::Path;
use std::process::{Child, Command};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use gce_backend::api::auth::{Role, TokenEntry};
use gce_backend_queues::testing::eventually;
use serde_json::Value;

use super::{ADMIN, READER, entry, tokens_text};
use crate::support::tokens::tokens_text_without_reader;
use crate::support::{Backend, Env, sim_config, spawn_run, terminate, wait_for};

/// `GET path` on `api` with `token`: the status and the body (JSON when it is).
async fn get(api: &str, path: &str, token: &str) -> (u16, Value) {
    let res = reqwest::Client::new().get(format!("{api}{path}")).bearer_auth(token).send().await.unwrap();
    let status = res.status().as_u16();
    let text = res.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

const WHOAMI: &str = "/api/gce-backend/v1/whoami";

/// `gce-backend run`, the API alone on a free loopback port, on the tokens file at `tokens` and an
/// empty configs directory `dir`/pools, once it runs: the process, its standard output's and
/// error's lines, and the API's base URL. Installs the TLS provider for the test's own HTTP client
/// (reqwest is built without one), so a test that calls it also passes run alone.
fn run_api(dir: &Path, tokens: &Path) -> (Child, Receiver<String>, Receiver<String>, String) {
    gce_backend::adapters::install_crypto();
    let configs = dir.join("pools");
    std::fs::create_dir_all(&configs).unwrap();
    let tokens = tokens.display().to_string();
    let args =
        ["run", "--quiet", "--listen", "127.0.0.1:0", "--root-url", "http://localhost", "--tokens", &tokens];
    let (child, out, err) = spawn_run(&args, &configs);
    let listening = wait_for(&out, "listening on ");
    let addr = listening.split("listening on ").nth(1).unwrap().trim_end_matches(')').to_owned();
    wait_for(&out, "running (configs in");
    (child, out, err, format!("http://{addr}"))
}

/// Waits (20 s at most) until `token`'s `whoami` answers `want`.
async fn until(api: &str, token: &str, want: u16, what: &str) {
    eventually(what, Duration::from_secs(20), || async {
        (get(api, WHOAMI, token).await.0 == want).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_removed_added_or_expired_in_the_file_take_effect_while_the_service_runs() {
    let env = Env::start(Backend::Memory, sim_config(), &[], true).await;
    let api = env.api_url.clone().expect("the API");
    let path = env.dir.join("tokens.toml");
    assert_eq!(get(&api, WHOAMI, READER).await.0, 200);
    assert_eq!(get(&api, WHOAMI, "gbt_new").await.0, 401);

    // Written in place: reader-infra removed; a new reader, an expired one and one that expires
    // in a year added.
    let year = env.ctx.now() + chrono::Duration::days(365);
    let expiring =
        |token, name, at| TokenEntry { expires: Some(at), ..entry(token, name, Role::Reader, &[]) };
    let more = vec![
        entry("gbt_new", "new", Role::Reader, &["infra"]),
        expiring("gbt_old", "old", "2001-02-03T04:05:06Z".parse().unwrap()),
        expiring("gbt_year", "year", year),
    ];
    std::fs::write(&path, tokens_text_without_reader(more)).unwrap();
    until(&api, READER, 401, "the removed token is refused").await;
    let (status, v) = get(&api, WHOAMI, READER).await;
    assert_eq!((status, v["message"].as_str()), (401, Some("unknown token")));
    let (status, v) = get(&api, WHOAMI, "gbt_new").await;
    assert_eq!((status, v["name"].as_str()), (200, Some("new")), "the added token is accepted: {v}");
    let (status, v) = get(&api, WHOAMI, "gbt_old").await;
    assert_eq!((status, v["message"].as_str()), (401, Some("token \"old\" expired at 2001-02-03T04:05:06Z")));
    assert!(!v.to_string().contains("gbt_old"), "the secret is never echoed: {v}");
    assert_eq!(get(&api, WHOAMI, "gbt_year").await.0, 200, "not expired yet");
    assert_eq!(get(&api, WHOAMI, ADMIN).await.0, 200, "untouched tokens go on");

    // Replaced by a rename (as an editor or a secret store does): back to the first set.
    let tmp = env.dir.join("tokens.toml.tmp");
    std::fs::write(&tmp, tokens_text(Vec::new())).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    until(&api, "gbt_new", 401, "the new token is gone again").await;
    assert_eq!(get(&api, WHOAMI, READER).await.0, 200, "reader-infra is back");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reads_the_tokens_file_again_and_a_broken_file_keeps_the_tokens_in_force() {
    let dir = crate::support::temp_dir();
    let path = super::write_tokens(&dir);
    let (mut child, _out, err, api) = run_api(&dir, &path);
    let hup = || Command::new("kill").args(["-HUP", &child.id().to_string()]).status().unwrap();

    // Nothing changed: a SIGHUP still reads the file, says so, and the process serves on.
    assert!(hup().success());
    let line = wait_for(&err, "tokens reloaded");
    assert!(line.contains("INFO") && line.contains("SIGHUP") && line.contains("removed=[]"), "{line}");
    assert_eq!(get(&api, WHOAMI, ADMIN).await.0, 200);

    // A broken file (seen by the watch, and on SIGHUP): one ERROR line naming the file and the
    // problem, never a hash; the tokens in force stay.
    let broken = tokens_text(Vec::new()).replace("role = \"admin\"", "role = \"root\"");
    std::fs::write(&path, &broken).unwrap();
    assert!(hup().success());
    let line = wait_for(&err, "tokens file not reloaded");
    assert!(
        line.contains("ERROR") && line.contains(&path.display().to_string()) && line.contains("root"),
        "{line}"
    );
    let admin_hash = entry(ADMIN, "admin", Role::Admin, &[]).sha256;
    assert!(!line.contains(&admin_hash) && !line.contains(ADMIN), "{line}");
    assert_eq!(get(&api, WHOAMI, ADMIN).await.0, 200, "the admin token is still in force");

    terminate(child.id());
    assert!(child.wait().unwrap().success(), "ended by SIGTERM, not by a SIGHUP");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_token_command_makes_an_entry_with_a_role_and_an_expiry_that_the_service_reads() {
    let token = |args: &[&str]| {
        let bin = crate::support::BIN;
        Command::new(bin).args(["token", "--name", "prom", "--role", "metrics"]).args(args).output().unwrap()
    };
    let out = token(&["--expires", "2999-01-31T00:00:00+01:00"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let secret = text.lines().nth(1).unwrap().trim_start_matches("# ").to_owned();
    assert!(secret.starts_with("gbt_"), "{text}");
    let tokens = gce_backend::api::auth::Tokens::parse(&text, "printed").unwrap();
    let at = |s: &str| chrono::DateTime::parse_from_rfc3339(s).unwrap().to_utc();
    let caller = tokens.check(&secret, at("2999-01-30T22:59:59Z")).unwrap();
    assert_eq!((caller.name.as_str(), caller.role), ("prom", Role::Metrics));
    assert!(tokens.check(&secret, at("2999-01-30T23:00:00Z")).is_err(), "expires in UTC: {text}");
    for (bad, why) in [("2001-01-01T00:00:00Z", "already past"), ("next week", "RFC 3339")] {
        let out = token(&["--expires", bad]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains(why), "{bad}: {err}");
    }
}

/// The tokens file as Kubernetes mounts a Secret: the kubelet keeps the data in a timestamped
/// directory, `..data` links to it and the key's name links through `..data`; an update writes
/// a new timestamped directory, renames a new link over `..data` and removes the old directory
/// (its atomic writer), so the path the service was given, and the link it is, never change.
/// The running service reads the file through the links and takes the new tokens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubernetes_secret_updated_under_the_tokens_file_takes_effect_while_the_service_runs() {
    use std::os::unix::fs::symlink;
    let dir = crate::support::temp_dir();
    let secret = dir.join("tokens");
    let (first, second) = ("..2026_12_07_00_00_00.1", "..2026_12_07_00_01_00.2");
    std::fs::create_dir_all(secret.join(first)).unwrap();
    std::fs::write(secret.join(first).join("tokens.toml"), tokens_text(Vec::new())).unwrap();
    symlink(first, secret.join("..data")).unwrap();
    symlink("..data/tokens.toml", secret.join("tokens.toml")).unwrap();
    let path = secret.join("tokens.toml");
    let (mut child, _out, err, api) = run_api(&dir, &path);
    assert_eq!(get(&api, WHOAMI, READER).await.0, 200);
    assert_eq!(get(&api, WHOAMI, "gbt_new").await.0, 401);

    // The Secret changes (reader-infra removed, `new` added), as the kubelet writes it: only
    // `..data` is replaced; the key's own link (`path`) stays as it was.
    let text = tokens_text_without_reader(vec![entry("gbt_new", "new", Role::Reader, &["infra"])]);
    std::fs::create_dir_all(secret.join(second)).unwrap();
    std::fs::write(secret.join(second).join("tokens.toml"), text).unwrap();
    symlink(second, secret.join("..data_tmp")).unwrap();
    std::fs::rename(secret.join("..data_tmp"), secret.join("..data")).unwrap();
    std::fs::remove_dir_all(secret.join(first)).unwrap();

    until(&api, "gbt_new", 200, "the token added to the Secret is accepted").await;
    assert_eq!(get(&api, WHOAMI, READER).await.0, 401, "the token removed from the Secret is refused");
    let line = wait_for(&err, "tokens reloaded");
    assert!(line.contains(r#"added=["new"]"#) && line.contains(r#"removed=["reader-infra"]"#), "{line}");
    assert_eq!(get(&api, WHOAMI, ADMIN).await.0, 200, "untouched tokens go on");

    terminate(child.id());
    assert!(child.wait().unwrap().success());
    let _ = std::fs::remove_dir_all(&dir);
}
