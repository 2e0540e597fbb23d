//! The dashboard's costs in a real browser: each Config's cost per hour now and spend this month
//! in the Configs table, as the API's `spend` answers them, and the spend chart: a group per
//! tenant, a bar per Config of this month and of the month before, the price date; a reader
//! sees the Configs it may read (the others counted as not shown); at 420 px nothing scrolls
//! sideways.

use serde_json::{Value, json};

use super::service::Service;
use super::webdriver::{Browser, WAIT};
use super::{READER, sign_in_as, still_same_page, wait_cell};
use crate::api::ADMIN;
use gce_backend_queues::testing::eventually;

/// A Config's entry in a `spend` answer.
fn config_of<'a>(v: &'a Value, prefix: &str) -> &'a Value {
    let configs = v["tenants"].as_array().unwrap().iter().flat_map(|t| t["configs"].as_array().unwrap());
    configs.into_iter().find(|c| c["prefix"] == prefix).unwrap_or_else(|| panic!("{prefix} in {v:#}"))
}

/// A script: the chart's rows of tenant `arguments[0]`, each [prefix, this month's bar width,
/// last month's bar width, this month's label].
const ROWS: &str = "const g = document.querySelector(`#spend-chart [data-tenant=\"${arguments[0]}\"]`); \
                    if (!g) return null; \
                    return [...g.querySelectorAll('.spend-row')].map(r => [r.dataset.config, \
                      r.querySelector('.spend-bar.this .fill').style.width, \
                      r.querySelector('.spend-bar.last .fill').style.width, \
                      r.querySelector('.spend-bar.this .bar-label').textContent]);";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_what_each_config_costs_and_a_spend_chart_per_tenant() {
    super::webdriver::require_browser();
    let svc = Service::start().await;
    let b = Browser::start().await;
    svc.write_pool("linux", 2, &["infra"]);
    svc.write_pool("web", 1, &["web"]);
    b.goto(&format!("{}/ui/#token={ADMIN}", svc.root)).await;
    wait_cell(&b, "data-config", "linux", "connected", "2").await;
    wait_cell(&b, "data-config", "web", "connected", "1").await;
    b.js("window.__marker = 'kept';", json!([])).await;

    // Both running: their cost per hour holds, and the page shows the API's, as the CLI prints
    // it; the month's spend grows from nothing.
    let v = eventually("both Configs billed as running", WAIT, || async {
        let v = svc.get("spend").await;
        let running = |p| config_of(&v, p)["cost_per_hour"].as_f64().unwrap_or(0.0) > 0.0;
        (running("linux") && running("web")).then_some(v)
    })
    .await;
    for prefix in ["linux", "web"] {
        let per_hour = config_of(&v, prefix)["cost_per_hour"].as_f64().unwrap();
        let want = gce_backend_jobs::config::Usd(per_hour).to_string();
        wait_cell(&b, "data-config", prefix, "cost-hour", &want).await;
    }
    let month = b
        .wait(
            "linux's spend this month",
            "const c = document.querySelector('tr[data-config=\"linux\"] [data-field=\"cost-month\"]'); \
             return c && /^\\$\\d+\\.\\d+$/.test(c.textContent) && c.textContent !== '$0.0000' && c.title;",
            json!([]),
        )
        .await;
    assert!(month.as_str().unwrap().contains(" h running"), "its hours in the title: {month}");

    // The chart: the open tenant's group, a row per Config, one scale (the largest bar full).
    let rows = b
        .wait(
            "the spend chart's rows",
            &format!("const rows = (() => {{ {ROWS} }})(); return rows && rows.length === 2 && rows;"),
            json!(["*"]),
        )
        .await;
    let rows = rows.as_array().unwrap();
    assert_eq!((rows[0][0].as_str(), rows[1][0].as_str()), (Some("linux"), Some("web")), "{rows:?}");
    let width = |r: &Value, i: usize| r[i].as_str().unwrap().trim_end_matches('%').parse::<f64>().unwrap();
    assert_eq!(width(&rows[0], 1).max(width(&rows[1], 1)), 100.0, "{rows:?}");
    assert!(rows.iter().all(|r| width(r, 1) > 0.0 && r[3].as_str().unwrap().starts_with('$')), "{rows:?}");
    let head = b.text_of("#spend-chart [data-tenant=\"*\"] .spend-head").await;
    assert!(head.starts_with("tenant *") && head.contains("/h now") && head.contains("no budget"), "{head}");
    let note = b.text_of("#spend-note").await;
    assert!(note.starts_with("List prices (") && note.contains(", read 20"), "{note}");

    // A reader of infra: linux only, web counted as not shown; the table alike.
    sign_in_as(&b, READER, "reader").await;
    let rows = b
        .wait(
            "the reader's chart",
            &format!("const rows = (() => {{ {ROWS} }})(); return rows && rows.length === 1 && rows;"),
            json!(["*"]),
        )
        .await;
    assert_eq!(rows[0][0], "linux");
    let head = b.text_of("#spend-chart [data-tenant=\"*\"] .spend-head").await;
    assert!(head.contains("(1 Config not shown)"), "{head}");
    assert!(b.find_all("tr[data-config=\"web\"]").await.is_empty());

    // 420 px wide: the chart fits.
    b.resize(420, 900).await;
    let v = b.js("return [document.documentElement.scrollWidth, window.innerWidth];", json!([])).await;
    assert!(v[0].as_f64().unwrap() <= v[1].as_f64().unwrap(), "the page scrolls sideways: {v}");
    still_same_page(&b).await;
    b.quit().await;
}
