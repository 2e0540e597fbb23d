//! `spend` over HTTP on Redis: the showback of tenants and Configs (a deleted one included), each
//! answer checked against its schema and the OpenAPI document; a caller sees the Configs it may
//! read and the tenants of its groups; a bad month or an unknown tenant is a 400 saying why.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Datelike, Duration, TimeZone, Utc};
use gce_backend_jobs::config::{SwarmingServers, Tenant, Trust, Usd};
use gce_backend_jobs::ports::store::Expect;
use gce_backend_jobs::{model::ledger::Billed, model::ledger::Metered, model::ledger::spend};
use serde_json::Value;

use super::{ADMIN, Client, READER};
use crate::support::{Backend, Env, sim_config};

/// A reader of group web.
const READER_WEB: &str = "gbt_reader_web";

fn meter(state: Billed, since: DateTime<Utc>, usd_per_hour: f64) -> Metered {
    Metered { state, since, rate: (usd_per_hour * 1e6) as u64, unknown: Default::default() }
}

/// Writes VM `id` metered from `m.since`, closed (and the record deleted) at `end` if given: the
/// store changes its Config's ledger with each write, as the service's writes do.
async fn metered(env: &Env, id: &str, m: Metered, end: Option<DateTime<Utc>>) {
    let mut vm = env.ctx.seed_vm(id, |_| {}).await;
    vm.meter = Some(m.clone());
    let store = &env.ctx.ports.store;
    let v = store.vm(id).await.unwrap().unwrap().version;
    assert!(store.put_vm_spending(&vm, Expect::Version(v), &spend(None, Some(&m), m.since)).await.unwrap());
    if let Some(end) = end {
        let v = store.vm(id).await.unwrap().unwrap().version;
        assert!(store.delete_vm_spending(id, v, &spend(Some(&m), None, end)).await.unwrap());
    }
}

fn tenant(prefix: &str, budget: Option<f64>) -> Tenant {
    Tenant {
        prefixes: vec![format!("{prefix}-*")],
        projects: vec!["*".into()],
        service_accounts: vec!["*".into()],
        budget_per_month: budget.map(Usd),
        ..Tenant::default()
    }
}

fn prefixes(t: &Value) -> Vec<String> {
    t["configs"].as_array().unwrap().iter().map(|c| c["prefix"].as_str().unwrap().to_owned()).collect()
}

fn names(v: &Value) -> Vec<String> {
    v["tenants"].as_array().unwrap().iter().map(|t| t["tenant"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spend_shows_each_tenant_and_config_a_caller_may_read_with_its_budget() {
    let mut env = Env::start(Backend::Redis, sim_config(), &[], false).await;
    let tenants = BTreeMap::from([
        ("infra".to_owned(), tenant("infra", Some(1000.0))),
        ("web".to_owned(), tenant("web", None)),
        ("*".to_owned(), Tenant::open()),
    ]);
    env.ctx.settings.trust = Arc::new(Trust::new(&SwarmingServers::default(), &tenants).unwrap());
    let now = env.ctx.now();
    let this = Utc.with_ymd_and_hms(now.year(), now.month(), 1, 0, 0, 0).unwrap();
    let last = (this - Duration::days(1)).with_day(1).unwrap();
    let owned = |g: &'static str| move |c: &mut gce_backend_jobs::config::Config| c.owner = vec![g.into()];
    env.ctx.seed_config_with("infra-a", 1, owned("infra")).await;
    env.ctx.seed_config_with("web-a", 1, owned("web")).await;
    // infra-a: running at $1/h since this month began; web-a: stopped at $0.02/h, 10 h last month
    // and since; infra-old (deleted since): 5 h at $2/h last month.
    metered(&env, "infra-a-0", meter(Billed::Running, this, 1.0), None).await;
    metered(&env, "web-a-0", meter(Billed::Stopped, this - Duration::hours(10), 0.02), None).await;
    let gone = last + Duration::days(2);
    metered(&env, "infra-old-0", meter(Billed::Running, gone, 2.0), Some(gone + Duration::hours(5))).await;

    let url = super::serve(env.ctx.clone()).await;
    let api = Client::new(&url).await;
    let v = api.ok(ADMIN, "spend", &[], None).await;
    let month = format!("{:04}-{:02}", now.year(), now.month());
    assert_eq!(v["month"], month.as_str());
    let previous = format!("{:04}-{:02}", last.year(), last.month());
    assert_eq!(v["previous_month"], previous.as_str());
    assert!(v["prices"]["source"].as_str().unwrap().starts_with("snapshot "), "{v:#}");
    assert!(v["prices"]["read_at"].is_string(), "the price date: {v:#}");
    assert_eq!(names(&v), ["infra", "web"]);
    let infra = &v["tenants"][0];
    assert_eq!(prefixes(infra), ["infra-a", "infra-old"]);
    let hours = (v["at"].as_str().unwrap().parse::<DateTime<Utc>>().unwrap() - this).num_milliseconds()
        as f64
        / 3_600_000.0;
    let a = &infra["configs"][0];
    assert!((a["month"]["hours"]["running"].as_f64().unwrap() - hours).abs() < 0.01, "{a:#}");
    assert!((a["month"]["usd"].as_f64().unwrap() - hours).abs() < 0.01, "{a:#}");
    assert_eq!((a["cost_per_hour"].as_f64(), a["deleted"].as_bool()), (Some(1.0), Some(false)));
    let old = &infra["configs"][1];
    assert_eq!((old["deleted"].as_bool(), old["cost_per_hour"].as_f64()), (Some(true), Some(0.0)));
    assert_eq!(
        (old["previous"]["hours"]["running"].as_f64(), old["previous"]["usd"].as_f64()),
        (Some(5.0), Some(10.0))
    );
    assert_eq!(infra["budget_per_month"].as_f64(), Some(1000.0));
    let used = infra["budget_used_percent"].as_f64().unwrap();
    assert!((used - hours / 10.0).abs() < 0.01, "{used} of {hours} h at $1/h of $1000");
    let web = &v["tenants"][1];
    assert!(web["budget_used_percent"].is_null() && web["budget_per_month"].is_null(), "{web:#}");
    assert!((web["previous"]["usd"].as_f64().unwrap() - 0.2).abs() < 1e-6, "{web:#}");
    assert!((web["previous"]["hours"]["stopped"].as_f64().unwrap() - 10.0).abs() < 1e-6, "{web:#}");

    // A reader of infra: its tenant only (the deleted Config too: its group's); of web: web's.
    let v = api.ok(READER, "spend", &[], None).await;
    assert_eq!(
        (names(&v), prefixes(&v["tenants"][0])),
        (vec!["infra".to_owned()], vec!["infra-a".to_owned(), "infra-old".to_owned()])
    );
    let v = api.ok(READER_WEB, "spend", &[], None).await;
    assert_eq!((names(&v), prefixes(&v["tenants"][0])), (vec!["web".to_owned()], vec!["web-a".to_owned()]));
    // Another tenant asked by name reads as one that does not exist.
    let (status, denied) = api.call(Some(READER), "spend", &[("tenant", "web")], None).await;
    let (_, unknown) = api.call(Some(ADMIN), "spend", &[("tenant", "nobody")], None).await;
    assert_eq!(status, 400, "{denied}");
    assert_eq!(denied["message"], "no tenant \"web\" in the settings ([tenants.<group>])");
    assert_eq!(unknown["message"], "no tenant \"nobody\" in the settings ([tenants.<group>])");

    // A month asked, and its month before; a month that is not one.
    let v = api.ok(ADMIN, "spend", &[("tenant", "infra"), ("month", &previous)], None).await;
    assert_eq!(names(&v), ["infra"]);
    assert_eq!(v["tenants"][0]["month"]["usd"].as_f64(), Some(10.0), "{v:#}");
    assert_eq!(v["tenants"][0]["budget_used_percent"].as_f64(), Some(1.0), "{v:#}");
    for bad in ["2026-13", "2026-1", "2026-11-01", "11-2026"] {
        let (status, e) = api.call(Some(ADMIN), "spend", &[("month", bad)], None).await;
        assert_eq!(status, 400, "{bad}: {e}");
        assert_eq!(
            e["message"],
            format!("month {bad:?} is not a month: YYYY-MM, from 01 to 12 (e.g. 2026-11)")
        );
    }
    let (status, e) = api.call(Some(ADMIN), "spend", &[("months", "2026-11")], None).await;
    assert_eq!(status, 400, "{e}");

    // The CLI: the table, the answer itself with --json, and the caller's mistakes as usage
    // errors (exit 2).
    let cli = |args: &[&str]| {
        let o = std::process::Command::new(crate::support::BIN)
            .arg("spend")
            .args(args)
            .env("GCE_BACKEND_ROOT_URL", &url)
            .env("GCE_BACKEND_TOKEN", ADMIN)
            .output()
            .unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (o.status.code(), text(&o.stdout), text(&o.stderr))
    };
    let (code, out, err) = cli(&["--month", &previous]);
    assert_eq!(code, Some(0), "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[1].starts_with("TENANT  CONFIG") && lines[1].contains(&format!("COST {previous}")),
        "{out}"
    );
    assert!(lines.iter().any(|l| l.starts_with("infra   infra-old (deleted)") && l.contains("$10")), "{out}");
    assert!(lines.iter().any(|l| l.starts_with("infra   (total)") && l.ends_with("1.0% of $1000")), "{out}");
    assert!(lines.last().unwrap().starts_with("prices: snapshot "), "{out}");
    let (code, out, _) = cli(&["--json", "--tenant", "web"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!((code, names(&v)), (Some(0), vec!["web".to_owned()]));
    for (args, says) in [
        (["--month", "2026-13"], "gce-backend: --month: month \"2026-13\" is not a month: YYYY-MM"),
        (["--tenant", "nobody"], "gce-backend: no tenant \"nobody\" in the settings"),
    ] {
        let (code, _, err) = cli(&args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.starts_with(says), "{args:?}: {err}");
    }
}
