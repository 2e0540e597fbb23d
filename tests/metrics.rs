//! `/metrics` end to end: a Config converges on Redis and the simulator, then one scrape shows
//! the fleet per Config (states that add up to its VMs), the lifecycle latencies, the queues,
//! outbound calls, cron runs, API requests, the build and the process, with no label naming a VM
//! or hostname, and serves every metric the shipped alert rules and Grafana dashboard name; a
//! workers-only process serves its own, each queue's series at zero before its first task.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Stdio;
use std::time::Duration;

use gce_backend_queues::testing::{RedisServer, eventually};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::{Backend, Env, pool, sim_config};

/// One sample of a scrape: metric name and labels → value.
type Samples = BTreeMap<(String, BTreeMap<String, String>), f64>;

/// Parses the text format (no escaped quotes in our label values).
fn parse(text: &str) -> Samples {
    let mut out = Samples::new();
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
        let (series, value) = line.rsplit_once(' ').expect("a sample line");
        let (name, labels) = match series.split_once('{') {
            Some((n, rest)) => (n, rest.trim_end_matches('}')),
            None => (series, ""),
        };
        let labels = labels
            .split(',')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').expect("label=value");
                (k.to_owned(), v.trim_matches('"').to_owned())
            })
            .collect();
        out.insert((name.to_owned(), labels), value.parse().expect("a number"));
    }
    out
}

/// The value of `name` with exactly `labels`.
fn value(s: &Samples, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let l = labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    s.get(&(name.to_owned(), l)).copied()
}

/// The sum of `name` over the samples that carry `labels` (and any others).
fn sum(s: &Samples, name: &str, labels: &[(&str, &str)]) -> f64 {
    s.iter()
        .filter(|((n, l), _)| {
            n == name && labels.iter().all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|(_, v)| v)
        .sum()
}

/// `url/metrics`, with `token` if given.
async fn scrape(url: &str, token: Option<&str>) -> (String, String) {
    let req = reqwest::Client::new().get(format!("{url}/metrics"));
    let res = match token {
        Some(t) => req.bearer_auth(t),
        None => req,
    }
    .send()
    .await
    .expect("scrape");
    assert_eq!(res.status(), 200);
    let ct = res.headers()["content-type"].to_str().unwrap().to_owned();
    (ct, res.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_scrape_shows_fleet_lifecycle_queues_calls_cron_and_api_with_bounded_labels() {
    let env =
        Env::start(Backend::Redis, sim_config(), &[("metrics", pool("metrics", 3, "1h", "10m"))], true).await;
    env.converged("metrics", 3).await;
    let api = env.api_url.clone().expect("the API");
    let http = reqwest::Client::new();
    let configs = format!("{api}/api/gce-backend/v1/configs");
    let ok = http.get(&configs).bearer_auth(crate::api::ADMIN).send().await.unwrap();
    assert_eq!(ok.status(), 200);
    let refused = http.get(&configs).send().await.unwrap();
    assert_eq!(refused.status(), 401);
    let anonymous = http.get(format!("{api}/metrics")).send().await.unwrap();
    assert_eq!(anonymous.status(), 401, "the API's listener serves /metrics to a token only");

    // The fleet gauges read the store's sums at the scrape; the cron's own counters come with
    // its first tick (every second here, later on a loaded machine); the ledger counts whole
    // seconds, so a VM billed in the scrape's own second has cost nothing yet: wait for all three.
    let (ct, text) =
        eventually("3 connected, a count_vms tick, a second billed", Duration::from_secs(30), || async {
            let (ct, text) = scrape(&api, Some(crate::api::METRICS)).await;
            let s = parse(&text);
            let ticked = [("job", "count_vms"), ("result", "ok")];
            let billed = [("config", "metrics"), ("tenant", "*"), ("state", "running")];
            (value(&s, "gce_backend_fleet_vms", &[("config", "metrics"), ("state", "connected")])
                == Some(3.0)
                && value(&s, "gce_backend_cron_runs_total", &ticked).is_some_and(|n| n >= 1.0)
                && value(&s, "gce_backend_fleet_cost_dollars_total", &billed).is_some_and(|usd| usd > 0.0))
            .then_some((ct, text))
        })
        .await;
    assert!(ct.starts_with("application/openmetrics-text"), "{ct}");
    let s = parse(&text);
    let fleet = |state| value(&s, "gce_backend_fleet_vms", &[("config", "metrics"), ("state", state)]);
    assert_eq!(fleet("connected"), Some(3.0));
    for state in ["creating", "down", "booting"] {
        assert_eq!(fleet(state), Some(0.0), "{state}");
    }
    assert_eq!(value(&s, "gce_backend_fleet_amount", &[("config", "metrics")]), Some(3.0));
    for flag in ["draining", "unhealthy", "bot_dead"] {
        let flagged = value(&s, "gce_backend_fleet_vms_flagged", &[("config", "metrics"), ("flag", flag)]);
        assert_eq!(flagged, Some(0.0), "{flag}");
    }
    assert_eq!(value(&s, "gce_backend_config_paused", &[("config", "metrics")]), Some(0.0));
    // What it costs, from its ledger: dollars ever by billed state (its VMs have run since they
    // were made, never suspended or stopped), per hour now, and its tenant's month (the open
    // tenant sets no budget: no budget series).
    let of = [("config", "metrics"), ("tenant", "*")];
    let cost = |state| value(&s, "gce_backend_fleet_cost_dollars_total", &[of[0], of[1], ("state", state)]);
    assert!(cost("running").is_some_and(|usd| usd > 0.0), "{:?}", cost("running"));
    assert_eq!((cost("suspended"), cost("stopped")), (Some(0.0), Some(0.0)));
    let rate = value(&s, "gce_backend_fleet_cost_rate_dollars_per_hour", &of);
    assert!(rate.is_some_and(|r| r > 0.0), "{rate:?}");
    let month = value(&s, "gce_backend_fleet_tenant_spend_month_dollars", &[("tenant", "*")]);
    assert!(month.is_some_and(|usd| usd > 0.0), "{month:?}");
    assert!(!s.keys().any(|(n, _)| n == "gce_backend_fleet_tenant_budget_month_dollars"), "{text}");
    for stage in ["change_to_insert", "insert_to_created", "created_to_connected"] {
        let n =
            value(&s, "gce_backend_vm_lifecycle_seconds_count", &[("config", "metrics"), ("stage", stage)]);
        assert!(n.is_some_and(|n| n >= 3.0), "{stage}: {n:?}");
    }
    let inserted = sum(
        &s,
        "gce_backend_instance_operations_total",
        &[("config", "metrics"), ("op", "insert"), ("result", "ok")],
    );
    assert!(inserted >= 3.0, "{inserted}");
    let q = [("queue", "create_instance")];
    assert!(
        sum(&s, "gce_backend_task_runs_total", &[("queue", "create_instance"), ("result", "done")]) >= 3.0
    );
    assert!(value(&s, "gce_backend_task_wait_seconds_count", &q).is_some_and(|n| n >= 3.0));
    assert!(value(&s, "gce_backend_task_run_seconds_count", &q).is_some_and(|n| n >= 3.0));
    for state in ["pending", "delayed", "running", "dead"] {
        assert!(
            value(&s, "gce_backend_queue_tasks", &[("queue", "create_instance"), ("state", state)]).is_some(),
            "{state}"
        );
    }
    assert!(
        value(&s, "gce_backend_queue_events_total", &[("queue", "create_instance"), ("event", "done")])
            .is_some_and(|n| n >= 3.0)
    );
    let inserts = [("service", "compute"), ("method", "instances.insert"), ("code", "ok")];
    assert!(value(&s, "gce_backend_outbound_calls_total", &inserts).is_some_and(|n| n >= 3.0));
    assert!(sum(&s, "gce_backend_outbound_calls_total", &[("service", "swarming")]) >= 1.0);
    assert!(
        value(
            &s,
            "gce_backend_outbound_call_seconds_count",
            &[("service", "compute"), ("method", "instances.insert")]
        )
        .is_some()
    );
    assert!(
        value(&s, "gce_backend_cron_runs_total", &[("job", "count_vms"), ("result", "ok")])
            .is_some_and(|n| n >= 1.0)
    );
    assert!(
        value(&s, "gce_backend_cron_last_run_timestamp_seconds", &[("job", "count_vms")])
            .is_some_and(|t| t > 1.7e9)
    );
    assert!(value(&s, "gce_backend_cron_pushed_tasks_total", &[("job", "expand_configs")]).is_some());
    assert!(
        value(&s, "gce_backend_api_requests_total", &[("method", "listConfigs"), ("status", "200")])
            .is_some_and(|n| n >= 1.0)
    );
    assert!(
        value(&s, "gce_backend_api_requests_total", &[("method", "listConfigs"), ("status", "401")])
            .is_some_and(|n| n >= 1.0)
    );

    // The build, the process, and zero series from the start for what has not happened.
    let version = [("version", env!("CARGO_PKG_VERSION"))];
    assert_eq!(value(&s, "gce_backend_build_info", &version), Some(1.0));
    for name in ["process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds"] {
        assert!(value(&s, name, &[]).is_some_and(|v| v > 0.0), "{name}");
    }
    assert!(value(&s, "process_start_time_seconds", &[]).is_some_and(|t| t > 1.7e9));
    for job in gce_backend_jobs::cron::names() {
        assert!(
            value(&s, "gce_backend_cron_runs_total", &[("job", job), ("result", "error")]).is_some(),
            "{job}"
        );
    }
    assert!(value(&s, "gce_backend_leases_lost_total", &q).is_some());
    assert!(value(&s, "gce_backend_registrations_total", &[("result", "ok")]).is_some());
    let held = [("project", "my-proj"), ("class", "mutate")];
    assert!(value(&s, "gce_backend_compute_throttled_total", &held).is_some());
    assert_serves_the_kit(&text);

    // Bounded labels: no value names a VM or its hostname.
    let vms = env.vms("metrics").await;
    assert_eq!(vms.len(), 3);
    assert_eq!(sum(&s, "gce_backend_fleet_vms", &[("config", "metrics")]), 3.0, "each VM in one state");
    let mut names: Vec<String> = vms.iter().flat_map(|v| [v.id.clone(), v.hostname.clone()]).collect();
    names.sort();
    for (metric, labels) in s.keys() {
        for (k, v) in labels {
            assert!(
                !names.iter().any(|n| v.contains(n.as_str())),
                "{metric}: label {k}={v:?} names a VM or hostname"
            );
        }
    }
    let families: std::collections::BTreeSet<&str> = s.keys().map(|(n, _)| n.as_str()).collect();
    assert!(families.len() > 20, "{families:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workers_process_serves_its_own_metrics_on_metrics_listen() {
    gce_backend::adapters::install_crypto();
    let redis = RedisServer::start();
    let (sim, _sim) = gce_backend::sim::spawn(sim_config()).await.unwrap();
    let mut child = tokio::process::Command::new(crate::support::BIN)
        .args([
            "run",
            "--redis",
            &redis.url(),
            "--role",
            "workers",
            "--quiet",
            "--metrics-listen",
            "127.0.0.1:0",
        ])
        .args(["--gce-endpoint", &format!("http://{sim}")])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(rest) = line.split("metrics on ").nth(1) {
                return rest.split_whitespace().next().unwrap().trim_end_matches("/metrics").to_owned();
            }
        }
        panic!("no `metrics on` line");
    })
    .await
    .expect("the metrics line within 60s");
    // Before any task: every queue's series at zero, the build and the process (read from /proc).
    let (_, text) = scrape(&url, None).await;
    let s = parse(&text);
    for queue in gce_backend_jobs::tasks::QUEUES {
        let q = [("queue", *queue)];
        assert_eq!(
            value(&s, "gce_backend_task_runs_total", &[q[0], ("result", "done")]),
            Some(0.0),
            "{queue}"
        );
        assert_eq!(value(&s, "gce_backend_leases_lost_total", &q), Some(0.0), "{queue}");
        assert_eq!(value(&s, "gce_backend_task_wait_seconds_count", &q), Some(0.0), "{queue}");
    }
    let version = [("version", env!("CARGO_PKG_VERSION"))];
    assert_eq!(value(&s, "gce_backend_build_info", &version), Some(1.0), "{text}");
    assert!(value(&s, "process_resident_memory_bytes", &[]).is_some_and(|b| b > 0.0), "{text}");
    assert!(value(&s, "process_open_fds", &[]).is_some_and(|n| n > 0.0), "{text}");
    assert!(value(&s, "process_threads", &[]).is_some_and(|n| n > 0.0), "{text}");
    // A task for it: reading a project's quotas.
    let engine = gce_backend::adapters::backends::redis_engine(&redis.url(), "gce-backend").await.unwrap();
    let queue = gce_backend_queues::Queue::new(
        std::sync::Arc::new(engine),
        gce_backend_queues::QueueSpec::new("report_quota", Default::default()).unwrap(),
    );
    let task = gce_backend_jobs::tasks::ReportQuota { project: "p".into() };
    queue.push("p", &task, gce_backend_queues::When::Now).await.unwrap();
    let text = eventually("the worker's run is measured", Duration::from_secs(30), || async {
        let (_, text) = scrape(&url, None).await;
        let s = parse(&text);
        // Its series is there from the start (at 0): wait for the run itself.
        let done = value(&s, "gce_backend_task_runs_total", &[("queue", "report_quota"), ("result", "done")]);
        done.is_some_and(|n| n >= 1.0).then_some(text)
    })
    .await;
    let s = parse(&text);
    let calls = [("service", "compute"), ("method", "regions.list"), ("code", "ok")];
    assert!(value(&s, "gce_backend_outbound_calls_total", &calls).is_some(), "{text}");
    assert!(sum(&s, "gce_backend_quota_limit", &[("project", "p")]) > 0.0, "{text}");
    assert!(
        value(&s, "gce_backend_task_wait_seconds_count", &[("queue", "report_quota")]).is_some(),
        "{text}"
    );
    let ready = reqwest::get(format!("{url}/readyz")).await.unwrap();
    assert_eq!(ready.status(), 200, "its Redis answers");
    // The shared state is the API's to report, not every worker's.
    assert!(!text.contains("gce_backend_fleet_vms"), "{text}");
    assert!(!text.contains("gce_backend_queue_tasks"), "{text}");
    child.kill().await.unwrap();
}

/// The metric names a scrape serves: each sample's, and each family's as its samples are named
/// (a counter `x_total`, a histogram `x_bucket`, `x_count`, `x_sum`), with or without samples.
fn served(text: &str) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = parse(text).into_keys().map(|(name, _)| name).collect();
    for (name, kind) in text.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.split_once(' ')) {
        let suffixes: &[&str] = match kind {
            "counter" => &["_total"],
            "histogram" => &["_bucket", "_count", "_sum"],
            _ => &[""],
        };
        out.extend(suffixes.iter().map(|x| format!("{name}{x}")));
    }
    out
}

/// The metric names a query names: ours (`gce_backend_*`) and the process's (`process_*`).
fn named(expr: &str) -> Vec<String> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|t| t.starts_with("gce_backend_") || t.starts_with("process_"))
        .map(str::to_owned)
        .collect()
}

/// Every metric the shipped alert rules and Grafana dashboard name is served in `scrape`, so
/// they cannot drift from what the service exports.
fn assert_serves_the_kit(scrape: &str) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    let rules: yaml_serde::Value =
        yaml_serde::from_str(&std::fs::read_to_string(root.join("prometheus/alerts.yml")).unwrap()).unwrap();
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("grafana/gce-backend.json")).unwrap())
            .unwrap();
    let mut queries: Vec<(String, String)> = Vec::new();
    for rule in rules["groups"].as_sequence().unwrap().iter().flat_map(|g| g["rules"].as_sequence().unwrap())
    {
        let name = rule["alert"].as_str().unwrap().to_owned();
        queries.push((name, rule["expr"].as_str().unwrap().to_owned()));
    }
    let panels = dashboard["panels"].as_array().unwrap();
    for p in panels.iter().filter(|p| p["type"] != "row") {
        for t in p["targets"].as_array().unwrap() {
            queries.push((p["title"].as_str().unwrap().to_owned(), t["expr"].as_str().unwrap().to_owned()));
        }
    }
    for v in dashboard["templating"]["list"].as_array().unwrap() {
        if let Some(q) = v["query"]["query"].as_str() {
            queries.push((format!("variable {}", v["name"]), q.to_owned()));
        }
    }
    assert!(queries.len() > 40, "{}", queries.len());
    let served = served(scrape);
    let mut unserved = Vec::new();
    for (what, expr) in &queries {
        let names = named(expr);
        // Every query reads a metric of ours but the ones on Prometheus's own `up`.
        assert!(!names.is_empty() || expr.contains("up{"), "{what}: {expr}");
        unserved.extend(names.into_iter().filter(|n| !served.contains(n)).map(|n| format!("{what}: {n}")));
    }
    assert!(unserved.is_empty(), "named but not served by /metrics: {unserved:#?}");
}
