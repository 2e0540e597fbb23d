//! The dashboard as a cockpit, in a real browser: the search box filters Configs and VMs; an
//! admin sets a Config's amount, pauses and resumes it and recycles a VM from the page, each
//! confirmed, the effect in the records and on the page without a reload; a VM made from older
//! attributes is marked outdated; a VM stuck in `creating` shows its attempts and the error
//! names it, a link that filters the VMs to it; the last hour is charted; a reader gets no
//! control; at 420 px nothing scrolls sideways; when the API goes away the data is greyed and
//! a banner says since when.

use serde_json::json;

use super::service::Service;
use super::webdriver::Browser;
use super::{READER, sign_in_as, still_same_page, wait_cell, wait_flash};
use crate::api::ADMIN;

/// A script: the ids (`attr`) of the rows of `tbody` shown (not hidden by the search box).
const SHOWN: &str = "return [...document.querySelectorAll(arguments[0] + ' tr')].filter(r => !r.hidden) \
                     .map(r => r.getAttribute(arguments[1]));";

/// A script: whether the page scrolls sideways (the document wider than the window).
const SIDEWAYS: &str = "return [document.documentElement.scrollWidth, window.innerWidth];";

/// Types `text` into the search box (replacing what it held) and waits until the rows of
/// `tbody` shown are `want`.
async fn filter(b: &Browser, text: &str, tbody: &str, attr: &str, want: &[&str]) {
    b.js("const f = document.querySelector('#filter'); f.value = ''; f.focus();", json!([])).await;
    if !text.is_empty() {
        b.type_in(&b.find("#filter").await, text).await;
    } else {
        b.js("document.querySelector('#filter').dispatchEvent(new Event('input'));", json!([])).await;
    }
    let check = format!(
        "const s = (() => {{ {} }})(); return JSON.stringify(s) === JSON.stringify(arguments[2]);",
        SHOWN.trim_end_matches(';')
    );
    b.wait(&format!("{tbody} shows {want:?} for {text:?}"), &check, json!([tbody, attr, want])).await;
}

/// Asserts that the view at `hash` does not scroll sideways at the window's width.
async fn fits(b: &Browser, hash: &str, ready: &str) {
    b.js(&format!("location.hash = '{hash}';"), json!([])).await;
    b.find(ready).await;
    let v = b.js(SIDEWAYS, json!([])).await;
    let (scroll, inner) = (v[0].as_f64().unwrap(), v[1].as_f64().unwrap());
    assert!(inner <= 420.0, "the window is {inner} px wide");
    assert!(scroll <= inner, "{hash} scrolls sideways at {inner} px: {scroll} px wide");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cockpit_filters_controls_charts_and_greys_stale_data() {
    super::webdriver::require_browser();
    let mut svc = Service::start().await;
    let b = Browser::start().await;
    // linux: between 1 and 4 VMs (1 at first; an amount of 3 is in its bounds), infra's.
    let linux = crate::support::pool("linux", 1, "1d", "10m").replace("{min: 1, max: 1}", "{min: 1, max: 4}");
    svc.write_yaml("linux", &format!("{linux}owner: [infra]\n"));
    svc.write_pool("web", 1, &["web"]);
    b.goto(&format!("{}/ui/#token={ADMIN}", svc.root)).await;
    wait_cell(&b, "data-config", "linux", "connected", "1").await;
    wait_cell(&b, "data-config", "web", "connected", "1").await;
    b.js("window.__marker = 'kept';", json!([])).await;

    // The search box: by prefix, by state; cleared, every Config again.
    filter(&b, "web", "#configs tbody", "data-config", &["web"]).await;
    let count = b.text_of("#filter-count").await;
    assert_eq!(count, "1 of 2 shown");
    filter(&b, "active", "#configs tbody", "data-config", &["linux", "web"]).await;
    filter(&b, "nothing-like-it", "#configs tbody", "data-config", &[]).await;
    filter(&b, "", "#configs tbody", "data-config", &["linux", "web"]).await;

    // linux's page: its chart of the last hour (sampled each minute, read every 30 s).
    b.click_on("tr[data-config=\"linux\"] [data-field=\"prefix\"] a").await;
    let chart = b
        .wait(
            "linux's chart with a sample of 1 connected",
            "const s = document.querySelector('#config-chart svg.spark'); \
             const t = s && s.querySelector('title').textContent; \
             return s && Number(s.dataset.points) >= 1 && /connected 1$/.test(t) && t;",
            json!([]),
        )
        .await;
    assert!(chart.as_str().unwrap().contains("amount 1"), "{chart}");

    // Set the amount to 3, confirmed: the record says 3 and a third VM shows, no reload.
    b.find("#config-controls:not([hidden]) #amount-input").await;
    b.js("const i = document.querySelector('#amount-input'); i.value = ''; i.focus();", json!([])).await;
    b.type_in(&b.find("#amount-input").await, "3").await;
    b.click_on("button[data-action=\"set-amount\"]").await;
    b.accept_alert().await;
    wait_flash(&b, "The amount of linux is 3.").await;
    assert_eq!(svc.get("configs/linux").await["amount"], 3, "the record");
    b.find("#vms tr[data-vm=\"linux-2\"]").await;

    // Pause, with a reason, confirmed; then resume: the record follows, the button changes.
    b.type_in(&b.find("#pause-reason").await, "maintenance").await;
    b.click_on("button[data-action=\"pause\"]").await;
    b.accept_alert().await;
    wait_flash(&b, "linux is paused.").await;
    let paused = svc.get("configs/linux").await["status"]["paused"].clone();
    assert_eq!(paused["reason"], "maintenance", "{paused}");
    b.click_on("button[data-action=\"resume\"]").await;
    b.accept_alert().await;
    wait_flash(&b, "linux is resumed.").await;
    assert!(svc.get("configs/linux").await["status"]["paused"].is_null(), "resumed in the record");
    b.find("button[data-action=\"pause\"]").await;

    // Recycle linux-0, confirmed: it drains and a new incarnation replaces it on the page.
    wait_cell(&b, "data-vm", "linux-0", "bot", "connected").await;
    let host = b.text_of("tr[data-vm=\"linux-0\"] [data-field=\"hostname\"]").await;
    b.click_on("tr[data-vm=\"linux-0\"] button[data-action=\"recycle\"]").await;
    b.accept_alert().await;
    wait_flash(&b, "linux-0 is recycled").await;
    b.wait(
        "linux-0's next incarnation",
        "const c = document.querySelector('tr[data-vm=\"linux-0\"] [data-field=\"hostname\"]'); \
         return c && c.textContent !== arguments[0];",
        json!([host]),
    )
    .await;
    let vm = svc.get("vms/linux-0").await;
    assert_ne!(vm["vm"]["vm"]["hostname"], host, "the record is a new incarnation: {vm}");
    still_same_page(&b).await;

    // A Config whose VM is made from older attributes (replaced at its lifetime only): outdated.
    let rolled = crate::support::pool("rolled", 1, "1d", "10m") + "update: {mode: on_lifetime}\n";
    svc.write_yaml("rolled", &rolled);
    b.js("location.hash = '#/configs/rolled';", json!([])).await;
    wait_cell(&b, "data-vm", "rolled-0", "state", "connected").await;
    wait_cell(&b, "data-vm", "rolled-0", "rollout", "").await;
    svc.write_yaml("rolled", &rolled.replace("e2-standard-2", "e2-standard-4"));
    wait_cell(&b, "data-vm", "rolled-0", "rollout", "outdated").await;

    // VMs that cannot be made (no CPU quota in their region): their next try on their rows
    // (held back by the quota backoff, a task waits with no attempt of its own: "waiting", not
    // "0 attempts"); an error names its VM, a link that filters the VMs to it.
    svc.faults(json!({"quotas": {"europe-west1": {"cpus": 0, "instances": 100}}})).await;
    svc.write_yaml(
        "stuck",
        &crate::support::pool("stuck", 2, "1d", "10m").replace("us-central1-b", "europe-west1-b"),
    );
    b.js("location.hash = '#/configs/stuck';", json!([])).await;
    b.wait(
        "stuck-0's attempts",
        "const c = document.querySelector('tr[data-vm=\"stuck-0\"] [data-field=\"work\"]'); \
         return c && /^(waiting|[1-9]\\d* attempts?), next /.test(c.textContent) && c.textContent;",
        json!([]),
    )
    .await;
    let named = b
        .wait(
            "an error naming a VM of stuck",
            "const a = document.querySelector('#errors a[data-show-vm]'); return a && a.dataset.showVm;",
            json!([]),
        )
        .await;
    let named = named.as_str().unwrap().to_owned();
    assert!(named == "stuck-0" || named == "stuck-1", "{named}");
    b.click_on(&format!("#errors a[data-show-vm=\"{named}\"]")).await;
    let only =
        format!("const s = (() => {{ {} }})(); return s.length === 1 && s;", SHOWN.trim_end_matches(';'));
    let shown =
        b.wait(&format!("the VMs filtered to {named}"), &only, json!(["#vms tbody", "data-vm"])).await;
    assert_eq!(shown, json!([named]));
    assert_eq!(b.js("return document.querySelector('#filter').value;", json!([])).await, named);
    filter(&b, "", "#vms tbody", "data-vm", &["stuck-0", "stuck-1"]).await;

    // The queues: a sparkline of each queue's retries over the last hour.
    b.click_on("a[data-nav=\"queues\"]").await;
    b.find("tr[data-queue=\"create_instance\"] [data-field=\"retries-hour\"] svg.spark").await;

    // A reader (of infra) sees linux's page without a control.
    sign_in_as(&b, READER, "reader").await;
    b.js("location.hash = '#/configs/linux';", json!([])).await;
    b.find("#vms tr[data-vm=\"linux-1\"]").await;
    assert!(
        b.find_all("#config-controls:not([hidden]), #config-controls button, #vms button").await.is_empty(),
        "a reader gets no control"
    );

    // 420 px wide: no view scrolls sideways.
    sign_in_as(&b, ADMIN, "admin").await;
    b.resize(420, 900).await;
    fits(&b, "#/", "tr[data-config=\"stuck\"]").await;
    fits(&b, "#/configs/linux", "#config-controls:not([hidden])").await;
    fits(&b, "#/queues", "tr[data-queue=\"create_instance\"]").await;
    b.resize(1280, 900).await;

    // The API cannot be reached (every call fails in the page): the data stays, greyed, and
    // the banner says since when; the next good refresh brings it back to normal.
    b.js("location.hash = '#/';", json!([])).await;
    wait_cell(&b, "data-config", "linux", "connected", "3").await;
    assert_eq!(b.js("return document.body.classList.contains('stale');", json!([])).await, false);
    b.js(
        "window.__origFetch = window.__origFetch || window.fetch; \
         window.fetch = () => Promise.reject(new TypeError('offline'));",
        json!([]),
    )
    .await;
    let msg = b
        .wait(
            "the stale banner",
            "const e = document.querySelector('#banner'); \
             return !e.hidden && document.body.classList.contains('stale') && e.textContent;",
            json!([]),
        )
        .await;
    let msg = msg.as_str().unwrap();
    assert!(msg.starts_with("Cannot reach the API since ") && msg.contains("greyed"), "{msg}");
    let look = b
        .js(
            "const s = getComputedStyle(document.querySelector('main')); return [s.opacity, s.filter];",
            json!([]),
        )
        .await;
    assert_eq!(look, json!(["0.55", "grayscale(1)"]), "the data is greyed");
    assert_eq!(b.find_all("tr[data-config=\"linux\"]").await.len(), 1, "the last data stays");
    b.js("window.fetch = window.__origFetch;", json!([])).await;
    b.wait(
        "back to normal",
        "return document.querySelector('#banner').hidden && !document.body.classList.contains('stale');",
        json!([]),
    )
    .await;
    still_same_page(&b).await;
    let _ = svc.child.kill();
    b.quit().await;
}
