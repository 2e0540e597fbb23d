//! `docker-compose.yml` without Docker (no engine on this machine): every gce-backend service's
//! command runs as written (hosts, paths and ports mapped to local ones) on a private Redis, and
//! its healthcheck URL answers 200; Prometheus scrapes the ports the services listen on.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use gce_backend_queues::testing::{RedisServer, eventually};
use serde_yaml::Value;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_sequence().expect("a list").iter().map(|s| s.as_str().expect("a string").to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_service_runs_as_written_and_its_healthcheck_answers() {
    gce_backend::adapters::install_crypto();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let compose: Value =
        serde_yaml::from_str(&std::fs::read_to_string(root.join("docker-compose.yml")).unwrap()).unwrap();
    let services = compose["services"].as_mapping().unwrap();
    let redis = RedisServer::start();
    let dir = crate::pipeline::temp_dir();
    let tokens = crate::api::write_tokens(&dir);
    // Each in-container port becomes a free local one; `host:port` names become 127.0.0.1.
    let mut ports: BTreeMap<String, u16> = BTreeMap::new();
    let mut port = |p: &str| *ports.entry(p.to_owned()).or_insert_with(free_port);
    let sim_port = port("8787");
    let local = |arg: &str, port: &mut dyn FnMut(&str) -> u16| -> String {
        let arg = arg
            .replace("redis://redis:6379/0", &redis.url())
            .replace("http://sim:8787", &format!("http://127.0.0.1:{sim_port}"))
            .replace("/etc/gce-backend/tokens.toml", tokens.to_str().unwrap())
            .replace("/etc/gce-backend/", &format!("{}/config/", root.display()));
        let digits = |p: &str| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit());
        if let Some(p) = arg.strip_prefix("0.0.0.0:").filter(|p| digits(p)) {
            return format!("127.0.0.1:{}", port(p));
        }
        if let Some(p) = arg.strip_prefix("http://127.0.0.1:").filter(|p| digits(p)) {
            return format!("http://127.0.0.1:{}", port(p));
        }
        arg
    };
    let mut children = Vec::new();
    let mut checks = Vec::new();
    // The simulator first: the others depend on it.
    let mut names: Vec<&str> = services.keys().map(|k| k.as_str().unwrap()).collect();
    names.sort_by_key(|n| *n != "sim");
    for name in names {
        let s = &services[name];
        if s.get("build").is_none() {
            continue; // redis, prometheus: images of their own
        }
        assert_eq!(s["restart"].as_str(), Some("unless-stopped"), "{name}");
        let args: Vec<String> = strings(&s["command"]).iter().map(|a| local(a, &mut port)).collect();
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_gce-backend"))
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        children.push(child);
        let test = strings(&s["healthcheck"]["test"]);
        assert_eq!(&test[..2], ["CMD", "curl"], "{name}: {test:?}");
        let url = test.last().unwrap().to_owned();
        let (base, path) = url.trim_start_matches("http://127.0.0.1:").split_once('/').unwrap();
        checks.push((name.to_owned(), format!("http://127.0.0.1:{}/{path}", port(base))));
        if name == "sim" {
            let url = checks.last().unwrap().1.clone();
            eventually("the simulator answers", Duration::from_secs(30), || async {
                reqwest::get(&url).await.ok().filter(|r| r.status() == 200).map(|_| ())
            })
            .await;
        }
    }
    assert_eq!(checks.len(), 4, "sim, workers, cron, api: {checks:?}");
    for (name, url) in &checks {
        eventually(&format!("{name}: {url} answers 200"), Duration::from_secs(60), || async {
            reqwest::get(url).await.ok().filter(|r| r.status() == 200).map(|_| ())
        })
        .await;
    }
    // Prometheus scrapes the ports the services listen on, and the API serves the dashboard.
    let prom: Value =
        serde_yaml::from_str(&std::fs::read_to_string(root.join("config/prometheus.yml")).unwrap()).unwrap();
    let text = serde_yaml::to_string(&prom["scrape_configs"]).unwrap();
    for target in ["api:8080", "cron:9100", "port: 9100"] {
        assert!(text.contains(target), "{target} in {text}");
    }
    for (name, url) in &checks {
        if name != "sim" {
            let metrics = url.replace("/readyz", "/metrics");
            let res = reqwest::get(&metrics).await.unwrap();
            assert_eq!(res.status(), 200, "{name}: {metrics}");
        }
    }
    let api = checks.iter().find(|(n, _)| n == "api").unwrap().1.replace("/readyz", "/ui/");
    assert_eq!(reqwest::get(&api).await.unwrap().status(), 200, "the dashboard at {api}");
    drop(children);
}
