//! The CLI as an operator runs it, against a running service's API: apply a Config file, list,
//! change the amount, the generic `api` command, and exit codes 0/1/2; `status` and queue
//! inspection on the embedded default; client commands list client flags only.

use std::process::{Command, Output};

use gce_backend_queues::testing::eventually;
use serde_json::Value;

use super::WRITER;
use crate::support::{BIN, Backend, Env, sim_config};

/// The binary as a client of the API at `root` with `token`; no Redis in sight.
fn client(root: &str, token: &str, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args)
        .env("GCE_BACKEND_ROOT_URL", root)
        .env("GCE_BACKEND_TOKEN", token)
        .env_remove("GCE_BACKEND_REDIS")
        .env_remove("RUST_BACKTRACE");
    c
}

/// The binary as a client of `env`'s API with `token`.
pub(super) fn cli(env: &Env, token: &str, args: &[&str]) -> Output {
    client(env.api_url.as_deref().unwrap(), token, args).output().unwrap()
}

/// Runs `c` with `input` on its standard input; its output.
fn with_stdin(mut c: Command, input: &str) -> Output {
    use std::io::Write as _;
    let mut child = c
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// Standard output and error as text.
pub(super) fn text(o: &Output) -> (String, String) {
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
    let o = cli(&env, WRITER, &["configs", "get", "web"]);
    let shown = text(&o).0;
    assert!(
        shown.contains("project my-proj  zone us-central1-b  machine type zones/"),
        "the attributes: {shown}"
    );
    // A plan past the bounds says it is clamped, as `configs amount` does.
    let o = cli(&env, WRITER, &["configs", "plan", "web", "--amount", "9"]);
    assert!(
        text(&o).0.contains("asked 9; the Config's bounds (min 1, max 4, or an open window) make it 4"),
        "{:?}",
        text(&o)
    );

    // Who did it: the audit trail, newest first.
    let o = cli(&env, WRITER, &["configs", "history", "web"]);
    let (out, _) = text(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("AT ") && lines[0].contains("ACTOR"), "{out}");
    assert!(
        lines[1].contains(" writer-infra ")
            && lines[1].contains(" amount ")
            && lines[1].ends_with("amount 1 → 3"),
        "{out}"
    );
    assert!(lines[2].contains(" writer-infra ") && lines[2].contains(" create "), "{out}");
    assert_eq!(lines.len(), 3, "{out}");

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
    assert!(text(&o).1.contains("the token in GCE_BACKEND_TOKEN was refused"), "what to do: {:?}", text(&o));
    let o = cli(&env, "", &["configs", "list"]);
    assert!(text(&o).1.contains("no token was sent: set GCE_BACKEND_TOKEN"), "{:?}", text(&o));
    // The API's own URL given as the root: refused, naming the root to give (usage: exit 2).
    let root = env.api_url.as_deref().unwrap();
    let o = client(&format!("{root}/api/gce-backend/v1"), WRITER, &["configs", "list"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{:?}", text(&o));
    assert!(text(&o).1.contains(&format!("give the deployment's root, {root:?}")), "{:?}", text(&o));
    let o = cli(&env, WRITER, &["configs", "get", "nosuch"]);
    assert_eq!(o.status.code(), Some(1));
    // A dot segment would be dropped from the URL and reach another route: refused first.
    let o = cli(&env, WRITER, &["vms", "recycle", ".."]);
    assert_eq!(o.status.code(), Some(2), "{:?}", text(&o));
    assert!(text(&o).1.contains("names nothing"), "{:?}", text(&o));
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
    // `-f -`: the Config from standard input, as a file's.
    let piped = |input: String| {
        with_stdin(client(env.api_url.as_deref().unwrap(), WRITER, &["configs", "apply", "-f", "-"]), &input)
    };
    let o = piped(format!("{}owner: [infra]\n", crate::support::pool("piped", 1, "1d", "10m")));
    assert!(o.status.success(), "{:?}", text(&o));
    env.converged("piped", 1).await;
    let with_file = crate::support::pool("p2", 1, "1d", "10m").replace(
        "  label: {team: e2e}\n",
        "  label: {team: e2e}\n  metadata: [{from_file: \"k:secret.txt\"}]\n",
    );
    let o = piped(with_file);
    assert_eq!(o.status.code(), Some(2), "{:?}", text(&o));
    assert!(text(&o).1.contains("from_file metadata needs a file"), "{:?}", text(&o));
    let _ = std::fs::remove_dir_all(&files);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_names_the_replaced_vms_and_fails_when_the_change_would_be_refused() {
    let held = format!("{}owner: [infra]\n", crate::support::pool("held", 1, "1d", "10m"));
    let env = Env::start(Backend::Redis, sim_config(), &[("held", held.clone())], true).await;
    env.converged("held", 1).await;
    let files = crate::support::temp_dir();
    let larger = |yaml: &str| yaml.replace("machineTypes/e2-standard-2", "machineTypes/e2-standard-4");
    // A Config file holds `held`: a plan of another body for it is refused, and says why.
    let file = files.join("held.yaml");
    std::fs::write(&file, larger(&held)).unwrap();
    let o = cli(&env, WRITER, &["configs", "plan", "-f", file.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    assert!(out.contains("problem: prefix held is held by a Config file"), "{out}");
    assert!(err.contains("held: applying this would be refused (1 problem: see above)"), "{err}");
    let o = cli(&env, WRITER, &["configs", "plan", "-f", file.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(1), "{:?}", text(&o));

    // A Config of the API: a new machine type replaces each VM, one at a time after a surge.
    let web = crate::support::pool("web", 2, "1d", "10m").replace("max: 2", "max: 4") + "owner: [infra]\n";
    let file = files.join("web.yaml");
    std::fs::write(&file, &web).unwrap();
    let o = cli(&env, WRITER, &["configs", "apply", "-f", file.to_str().unwrap()]);
    assert!(o.status.success(), "{:?}", text(&o));
    env.converged("web", 2).await;
    std::fs::write(&file, larger(&web)).unwrap();
    let o = cli(&env, WRITER, &["configs", "plan", "-f", file.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "web: amount 2; create 0, drain 0, replace 2, recycle 0, keep 0", "{out}");
    assert!(
        lines[1].starts_with("  replace 2 (rolling update: web-2 made first from the new attributes and drained at the end; at most 1 at a time, keeping at least 2 bots connected")
            && lines[1].ends_with("): web-0, web-1"),
        "{out}"
    );
    assert!(out.contains("(applies to existing VMs, replaced now)"), "{out}");
    let _ = std::fs::remove_dir_all(&files);
    env.stop().await;
}

/// Runs the binary against the API at `root` with `token`; no Redis in sight.
fn cli_at(root: &str, token: &str, args: &[&str]) -> Output {
    client(root, token, args).output().unwrap()
}

#[test]
fn status_and_queues_answer_over_the_api_of_the_embedded_default() {
    use std::time::Duration;
    use tokio::time::Instant;
    let dir = crate::support::temp_dir();
    std::fs::write(dir.join("linux.yaml"), crate::support::pool("linux", 1, "1d", "10m")).unwrap();
    // `gce-backend run` as the README says: no Redis, the API on loopback, an admin token made;
    // in a shell that still exports the client's root URL of another run, which the server must
    // not take for its own.
    let stale = ("GCE_BACKEND_ROOT_URL", "http://127.0.0.1:1");
    let (mut child, out, root, token) = crate::support::embedded_default(&dir, &[stale]);
    assert_ne!(root, stale.1, "the server took the client's root URL from the environment");
    let cli = |args: &[&str]| cli_at(&root, &token, args);

    let started = Instant::now();
    let linux = loop {
        let o = cli(&["status", "--live", "linux"]);
        if o.status.success() {
            let v: Value = serde_json::from_slice(&o.stdout).unwrap();
            if v["configs"][0]["counts"]["configured"] == 1 {
                break v["configs"][0].clone();
            }
        }
        assert!(started.elapsed() < Duration::from_secs(60), "status never showed linux: {:?}", text(&o));
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!((linux["prefix"].as_str(), linux["state"].as_str()), (Some("linux"), Some("active")));
    let o = cli(&["status"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["files"].is_array() && v["configs"].as_array().unwrap().len() == 1, "{v}");
    let o = cli(&["status", "nosuch"]);
    assert_eq!(o.status.code(), Some(1), "{:?}", text(&o));
    assert!(text(&o).1.contains("404"), "{:?}", text(&o));

    // Queue inspection: every queue, one queue's counts, its pending tasks, one task.
    let o = cli(&["queues", "list"]);
    assert!(o.status.success() && text(&o).0.contains("create_vm"), "{:?}", text(&o));
    let o = cli(&["queues", "counts", "create_vm", "--json"]);
    let counts: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(counts["pushed"].is_u64() && counts["pending"].is_u64(), "{counts}");
    let o = cli(&["queues", "pending", "manage_bot", "--json"]);
    let pending: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(pending["tasks"].is_array(), "{pending}");
    let o = cli(&["queues", "counts", "typo"]);
    assert_eq!(o.status.code(), Some(2), "{:?}", text(&o));
    let o = cli(&["queues", "task", "create_vm", "nosuch"]);
    assert_eq!(o.status.code(), Some(1), "{:?}", text(&o));

    // Stopped, it says that what was in memory ends with it (nothing stays queued anywhere).
    crate::support::terminate(child.id());
    let stopping = crate::support::wait_for(&out, "stopping:");
    assert!(stopping.contains("end with this process") && !stopping.contains("stay queued"), "{stopping}");
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn client_commands_list_client_flags_only_and_servers_their_own() {
    let help = |args: &[&str]| {
        let o = Command::new(BIN).args(args).arg("--help").output().unwrap();
        assert!(o.status.success(), "{args:?}: {:?}", text(&o));
        text(&o).0
    };
    let server_flags = ["--threads", "--log-format", "--listen", "--settings", "--configs", "--quiet"];
    for cmd in ["status", "spend", "configs", "vms", "queues", "api", "token", "recover"] {
        let h = help(&[cmd]);
        for flag in server_flags {
            assert!(!h.contains(flag), "`gce-backend {cmd} --help` lists {flag}:\n{h}");
        }
        if cmd != "recover" {
            assert!(!h.contains("--redis"), "`gce-backend {cmd} --help` lists --redis:\n{h}");
        }
    }
    assert!(help(&["queues", "list"]).contains("--root-url"));
    let run = help(&["run"]);
    assert!(run.contains("--threads") && run.contains("--log-format"), "{run}");
    let top = help(&[]);
    for gone in ["queue-demo", "\n  queue "] {
        assert!(!top.contains(gone), "{gone:?} is still a command:\n{top}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_operations_ask_first_and_say_what_they_did_per_config_and_errors_name_their_cause() {
    use super::ADMIN;
    let linux = crate::support::pool("linux", 1, "1d", "10m");
    let env = Env::start(Backend::Redis, sim_config(), &[("linux", linux)], true).await;
    env.converged("linux", 1).await;
    // Two tasks this build cannot read die: one of linux's VMs, one of no Config.
    let queue = env.ctx.queues.get("create_instance");
    for key in ["linux-7", "bogus"] {
        queue.push(key, &serde_json::json!({"bogus": 1}), gce_backend_queues::When::Now).await.unwrap();
    }
    let dead = || async { queue.counts().await.unwrap().dead };
    eventually("both are dead", std::time::Duration::from_secs(30), || async {
        (dead().await == 2).then_some(())
    })
    .await;

    // Without --yes and without a terminal to ask on: refused, saying what it would drop.
    let o = cli(&env, ADMIN, &["queues", "purge", "create_instance"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}{err}");
    assert!(err.contains("drop 2 dead task(s) of queue create_instance (linux 1, no Config 1)?"), "{err}");
    assert!(err.contains("Add --yes"), "{err}");
    assert_eq!(dead().await, 2, "nothing dropped");
    let o = cli(&env, ADMIN, &["queues", "purge", "create_instance", "--yes"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    assert_eq!(out.trim(), "2 dead task(s) of create_instance dropped (linux 1, no Config 1)");
    assert_eq!(dead().await, 0);
    let o = cli(&env, ADMIN, &["queues", "purge", "create_instance"]);
    assert!(o.status.success() && text(&o).0.contains("nothing to drop"), "{:?}", text(&o));

    // The global pause says what it did to each Config, and its lifting too.
    let o = cli(&env, ADMIN, &["configs", "pause", "--all", "--reason", "maintenance"]);
    let (out, err) = text(&o);
    assert!(out.starts_with("every Config paused by admin at "), "{out}{err}");
    assert!(out.lines().any(|l| l.starts_with("linux") && l.ends_with("all (admin: maintenance)")), "{out}");
    let o = cli(&env, ADMIN, &["configs", "list"]);
    let (out, _) = text(&o);
    assert!(out.lines().next().unwrap().contains("FAILURES (EVER)  DEAD (EVER)  PAUSED"), "{out}");
    let o = cli(&env, ADMIN, &["configs", "resume", "--all"]);
    let (out, _) = text(&o);
    assert!(out.starts_with("global pause lifted"), "{out}");
    assert!(out.lines().any(|l| l.starts_with("linux") && l.ends_with(" -")), "{out}");

    // A file with two mistakes names both.
    let files = crate::support::temp_dir();
    let two =
        crate::support::pool("two", 1, "1d", "10m").replace("lifetime: 1d", "lifetime: forever\nbogus: 1");
    std::fs::write(files.join("two.yaml"), two).unwrap();
    let o = cli(&env, ADMIN, &["configs", "plan", "-f", files.join("two.yaml").to_str().unwrap()]);
    let (_, err) = text(&o);
    assert!(err.contains("2 mistakes: ") && err.contains("lifetime") && err.contains("bogus"), "{err}");

    // An API that is not there: the cause, not just "error sending request".
    let closed = format!("http://127.0.0.1:{}", crate::support::free_port());
    let o = cli_at(&closed, ADMIN, &["configs", "list"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).1.to_lowercase().contains("connection refused"), "{:?}", text(&o));
    let _ = std::fs::remove_dir_all(&files);
}

/// A `vms.cfg` of two blocks in LUCI's shapes.
const VMS_CFG: &str = r#"# Two pools.
vms {
  prefix: "linux"
  amount { min: 1 max: 3 change { start { day: FRIDAY time: "18:00" location: "Europe/Paris" } length { duration: "2d" } min: 0 max: 1 } }
  attributes {
    project: "google.com:ci-bots"
    zone: "us-central1-b"
    machine_type: "zones/{{.Zone}}/machineTypes/e2-small"
    disk { image: "global/images/x" size: 10 }
    network_interface { network: "global/networks/default" access_config { type: ONE_TO_ONE_NAT } }
    metadata { from_file: "startup-script:startup.sh" }
    label { key: "pool" value: "ci" }
  }
  lifetime { duration: "1d" }
  swarming: 'https://swarm.example.com'
}
vms <
  prefix: "mac"
  attributes < project: "mac-bots" zone: "z" machine_type: "n2-standard-4" disk < image: "global/images/mac" > network_interface < > >
  lifetime < seconds: 3600 >
  swarming: "https://swarm.example.com"
>
"#;

#[test]
fn configs_convert_turns_a_vms_cfg_into_yaml_and_back_without_the_api() {
    use gce_backend_jobs::config::{Config, luci};
    let dir = crate::support::temp_dir();
    let cfg = dir.join("vms.cfg");
    std::fs::write(&cfg, VMS_CFG).unwrap();
    let local = |args: &[&str], input: Option<&str>| {
        let mut c = Command::new(BIN);
        c.args(args).env_remove("GCE_BACKEND_ROOT_URL").env_remove("GCE_BACKEND_TOKEN");
        with_stdin(c, input.unwrap_or_default())
    };
    let o = local(&["configs", "convert", cfg.to_str().unwrap()], None);
    assert!(o.status.success(), "{:?}", text(&o));
    let yaml = text(&o).0;
    assert_eq!(yaml.matches("\n---\n").count(), 1, "a document per block:\n{yaml}");
    let want: Vec<Config> =
        luci::parse_vms(VMS_CFG, "vms.cfg").unwrap().into_iter().map(|(c, _)| c).collect();
    assert_eq!(Config::parse_all(&yaml, "out.yaml").unwrap(), want);
    assert!(yaml.contains("from_file: startup-script:startup.sh"), "from_file stays a reference:\n{yaml}");
    // Durations as the file wrote them; a time quoted (YAML 1.1 reads 18:00 as 1080).
    for written in ["lifetime: 1d", "length: 2d", "lifetime: 3600", "time: '18:00'"] {
        assert!(yaml.contains(written), "{written}:\n{yaml}");
    }
    // YAML back to vms.cfg, from standard input, and that reads as the same Configs.
    let o = local(&["configs", "convert", "--to", "cfg", "-"], Some(&yaml));
    assert!(o.status.success(), "{:?}", text(&o));
    let back: Vec<Config> =
        luci::parse_vms(&text(&o).0, "back.cfg").unwrap().into_iter().map(|(c, _)| c).collect();
    assert_eq!(back, want);
    // A mistake: exit 2, with the block's prefix and the field's line.
    std::fs::write(&cfg, VMS_CFG.replace("zone: \"z\" ", "")).unwrap();
    let o = local(&["configs", "convert", cfg.to_str().unwrap()], None);
    assert_eq!(o.status.code(), Some(2), "{:?}", text(&o));
    let err = text(&o).1;
    assert!(
        err.contains("vms.cfg:19: vms block \"mac\" (line 17): mac.attributes.zone: is required"),
        "{err}"
    );
    assert!(text(&o).0.is_empty());
    // Every mistake at once: two in "linux" (one found reading it), one in "mac".
    let three = VMS_CFG
        .replace("zone: \"z\" ", "")
        .replace("size: 10", "size: -10")
        .replace("amount { min: 1 max: 3", "amount { min: 4 max: 3");
    std::fs::write(&cfg, three).unwrap();
    let o = local(&["configs", "convert", cfg.to_str().unwrap()], None);
    assert_eq!(o.status.code(), Some(2), "{:?}", text(&o));
    let err = text(&o).1;
    assert!(err.contains("3 mistakes:"), "{err}");
    for said in [
        "vms.cfg:4: vms block \"linux\" (line 2): linux.amount: min 4 is above max 3",
        "vms.cfg:9: vms block \"linux\" (line 2): attributes.disk[0].size: must not be negative",
        "vms.cfg:19: vms block \"mac\" (line 17): mac.attributes.zone: is required",
    ] {
        assert!(err.contains(said), "{said}:\n{err}");
    }
    std::fs::write(&cfg, "vms { prefix: \"a\" kind: \"old\" }").unwrap();
    let o = local(&["configs", "convert", cfg.to_str().unwrap()], None);
    assert!(
        text(&o).1.contains("vms.cfg:1: vms block \"a\" (line 1): kind: is not supported"),
        "{:?}",
        text(&o)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
