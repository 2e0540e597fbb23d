//! `docker-compose.yml` without Docker (no engine on this machine): every gce-backend service's
//! command runs as written (hosts, paths and ports mapped to local ones) on a private Redis, and
//! its healthcheck URL answers 200; Prometheus scrapes the ports the services listen on and
//! loads the shipped alert rules.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use gce_backend_queues::testing::{RedisServer, eventually};
use yaml_serde::Value;

use crate::support::free_port;

fn strings(v: &Value) -> Vec<String> {
    v.as_sequence().expect("a list").iter().map(|s| s.as_str().expect("a string").to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_service_runs_as_written_and_its_healthcheck_answers() {
    gce_backend::adapters::install_crypto();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let compose_text = std::fs::read_to_string(root.join("docker-compose.yml")).unwrap();
    let compose: Value = yaml_serde::from_str(&compose_text).unwrap();
    let services = compose["services"].as_mapping().unwrap();
    let redis = RedisServer::start();
    let dir = crate::support::temp_dir();
    // The API's volume, empty as on a fresh clone's first `up`.
    let state = dir.join("var-lib");
    std::fs::create_dir(&state).unwrap();
    // Each container's port becomes a free local one of its own, keyed (service, port).
    let mut ports: BTreeMap<(String, String), u16> = BTreeMap::new();
    let mut port =
        |service: &str, p: &str| *ports.entry((service.to_owned(), p.to_owned())).or_insert_with(free_port);
    let sim = format!("http://127.0.0.1:{}", port("sim", "8787"));
    let mut local = |service: &str, given: &str| -> String {
        let arg = given
            .replace("redis://redis:6379/0", &redis.url())
            .replace("http://sim:8787", &sim)
            .replace("/var/lib/gce-backend/", &format!("{}/", state.display()))
            .replace("/etc/gce-backend/", &format!("{}/config/", root.display()));
        let digits = |p: &str| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit());
        if let Some(p) = arg.strip_prefix("0.0.0.0:").filter(|p| digits(p)) {
            return format!("127.0.0.1:{}", port(service, p));
        }
        // The service's own address as its healthcheck or root URL names it.
        if let Some((p, path)) =
            given.strip_prefix("http://127.0.0.1:").map(|r| r.split_once('/').unwrap_or((r, "")))
            && digits(p)
        {
            let sep = if path.is_empty() && !given.ends_with('/') { "" } else { "/" };
            return format!("http://127.0.0.1:{}{sep}{path}", port(service, p));
        }
        arg
    };
    let mut children = Vec::new();
    let mut checks = Vec::new();
    let mut scrapes = Vec::new();
    // The simulator first: the others depend on it.
    let mut names: Vec<&str> = services.keys().map(|k| k.as_str().unwrap()).collect();
    names.sort_by_key(|n| *n != "sim");
    for name in names {
        let s = &services[name];
        assert_eq!(s["restart"].as_str(), Some("unless-stopped"), "{name}");
        assert!(s.get("healthcheck").is_some(), "{name} has a healthcheck");
        if s.get("build").is_none() {
            continue; // redis, prometheus: images of their own
        }
        let command = strings(&s["command"]);
        let args: Vec<String> = command.iter().map(|a| local(name, a)).collect();
        if let Some(i) = command.iter().position(|a| a == "--metrics-listen") {
            scrapes.push((name.to_owned(), format!("http://{}/metrics", args[i + 1])));
        }
        let child = tokio::process::Command::new(crate::support::BIN)
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        children.push((name.to_owned(), child));
        let test = strings(&s["healthcheck"]["test"]);
        assert_eq!(&test[..2], ["CMD", "curl"], "{name}: {test:?}");
        let url = local(name, test.last().unwrap());
        eventually(&format!("{name}: {url} answers 200"), Duration::from_secs(60), || async {
            reqwest::get(&url).await.ok().filter(|r| r.status() == 200).map(|_| ())
        })
        .await;
        checks.push(name.to_owned());
    }
    assert_eq!(checks.len(), 4, "sim, workers, cron, api: {checks:?}");
    // Each process reports its own work; the API's also the shared fleet state.
    let expect = [
        ("workers", "gce_backend_task_runs_total"),
        ("cron", "gce_backend_cron_runs_total"),
        ("api", "gce_backend_fleet_vms"),
    ];
    for (name, family) in expect {
        let url = &scrapes
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("{name} has --metrics-listen"))
            .1;
        eventually(&format!("{name}: {url} shows {family}"), Duration::from_secs(60), || async {
            let text = reqwest::get(url).await.ok()?.text().await.ok()?;
            text.contains(family).then_some(())
        })
        .await;
    }
    for (name, child) in &mut children {
        assert!(child.try_wait().unwrap().is_none(), "{name} is still running");
    }
    // Prometheus scrapes those ports; the API's own listener wants a token for /metrics.
    let prom: Value =
        yaml_serde::from_str(&std::fs::read_to_string(root.join("config/prometheus.yml")).unwrap()).unwrap();
    let text = yaml_serde::to_string(&prom["scrape_configs"]).unwrap();
    for target in ["api:9100", "cron:9100", "port: 9100"] {
        assert!(text.contains(target), "{target} in {text}");
    }
    // Its rule files are the shipped alert rules, mounted beside its configuration.
    let mounts = strings(&services["prometheus"]["volumes"]);
    let rules = strings(&prom["rule_files"]);
    assert!(!rules.is_empty(), "prometheus.yml loads rule files");
    for file in rules {
        let inside = format!("/etc/prometheus/{file}");
        let host = mounts
            .iter()
            .find_map(|m| m.strip_suffix(":ro")?.strip_suffix(inside.as_str())?.strip_suffix(':'))
            .unwrap_or_else(|| panic!("{inside} is mounted: {mounts:?}"));
        assert_eq!(host, "./deploy/prometheus/alerts.yml", "{file}");
        assert!(root.join(host).is_file(), "{host}");
    }
    let api = format!("http://127.0.0.1:{}", port("api", "8080"));
    assert_eq!(reqwest::get(format!("{api}/metrics")).await.unwrap().status(), 401);
    assert_eq!(reqwest::get(format!("{api}/ui/")).await.unwrap().status(), 200, "the dashboard");
    // The first start made the tokens file and left its admin token beside it, owner-only, as
    // the compose file's comment tells the operator to read it.
    use std::os::unix::fs::PermissionsExt;
    let token_file = state.join("tokens.toml.admin-token");
    assert!(compose_text.contains("cat /var/lib/gce-backend/tokens.toml.admin-token"));
    for f in [&token_file, &state.join("tokens.toml")] {
        assert_eq!(std::fs::metadata(f).unwrap().permissions().mode() & 0o777, 0o600, "{}", f.display());
    }
    let token = std::fs::read_to_string(&token_file).unwrap();
    let whoami = reqwest::Client::new()
        .get(format!("{api}/api/gce-backend/v1/whoami"))
        .bearer_auth(token.trim())
        .send()
        .await
        .unwrap();
    assert_eq!(whoami.status(), 200);
    let me: serde_json::Value = whoami.json().await.unwrap();
    assert_eq!(me["role"], "admin", "{me}");
    drop(children);
    let _ = std::fs::remove_dir_all(&dir);
}
