//! The dashboard in a real browser: the `gce-backend` binary on a private Redis and the
//! simulator, Debian's headless Chromium driven over WebDriver. A Config converges on the page
//! without a reload; its history lists who changed it; a dead task of a guarded key counts on its VM's Config (the API names it);
//! an insert fault makes retries and dead tasks appear, whose buttons survive the polls; "purge
//! dead" drops them; a recycled VM's new incarnation never shows its predecessor's instance
//! status; a late whoami of the previous token never shows on the page; a reader sees no
//! buttons; a writer retries the dead task of a Config its group owns (only that one); an admin's
//! Retry and "retry all" empty the dead set; slow polls do not run back to back; a bad token gets
//! the form back with the API's message; a pool's let-go ids show (`gaps`); Config files not
//! followed are listed and a prefix not applied says why (`files`); each Config's cost and a
//! spend chart per tenant show what the API's `spend` answers (`spend`); when the service
//! goes away a banner says so and the last data stays.
mod cockpit;
mod files;
mod gaps;
mod scripts;
mod service;
mod spend;
mod webdriver;

use serde_json::{Value, json};

use crate::api::{ADMIN, WRITER};
pub(crate) use crate::support::tokens::READER;
use crate::support::{Backend, Env, sim_config};
use scripts::{FAST_FETCH, SLOW_FETCH, WATCH_WHO};
use service::Service;
use webdriver::Browser;

/// A script returning the text of `field` in the row whose `attr` is `key` (null while absent).
const CELL: &str = "const r = document.querySelector(`tr[${arguments[0]}=\"${arguments[1]}\"]`); \
                    const c = r && r.querySelector(`[data-field=\"${arguments[2]}\"]`); return c ? c.textContent : null;";

/// Waits until the cell reads `want`.
pub(crate) async fn wait_cell(b: &Browser, attr: &str, key: &str, field: &str, want: &str) {
    let check =
        CELL.replace("return c ? c.textContent : null;", "return c && c.textContent === arguments[3];");
    b.wait(&format!("{attr}={key} {field} reads {want}"), &check, json!([attr, key, field, want])).await;
}

/// Waits until the dead-task table lists at least `n` tasks of queue create_instance for `key`;
/// returns their ids (as the page lists them).
async fn wait_dead(b: &Browser, key: &str, n: usize) -> Vec<String> {
    let v = b
        .wait(
            &format!("{n} dead create_instance tasks of {key}"),
            "const ids = [...document.querySelectorAll('#dead tr[data-task]')].filter(r => \
               r.querySelector('[data-field=\"queue\"]').textContent === 'create_instance' && \
               r.querySelector('[data-field=\"key\"]').textContent === arguments[0]) \
               .map(r => r.getAttribute('data-task')); \
             return ids.length >= arguments[1] && ids;",
            json!([key, n]),
        )
        .await;
    v.as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_owned()).collect()
}

/// The CSS selector of a dead task's row.
fn dead_row(task: &str) -> String {
    format!("#dead tr[data-task=\"{task}\"]")
}

/// Waits until none of `tasks` is listed on the page.
async fn wait_gone(b: &Browser, what: &str, tasks: &[String]) {
    b.wait(
        what,
        "return arguments[0].every(t => !document.querySelector(`#dead tr[data-task=\"${t}\"]`));",
        json!([tasks]),
    )
    .await;
}

/// Waits until the flash message contains `want`; returns it.
pub(crate) async fn wait_flash(b: &Browser, want: &str) -> String {
    let v = b
        .wait(
            &format!("a flash message with {want:?}"),
            "const f = document.querySelector('#flash'); \
             return !f.hidden && f.textContent.includes(arguments[0]) && f.textContent;",
            json!([want]),
        )
        .await;
    v.as_str().unwrap().to_owned()
}

/// Signs out, then in with `token` (the form), and waits until the page names the role.
pub(crate) async fn sign_in_as(b: &Browser, token: &str, role: &str) {
    b.click_on("#sign-out").await;
    b.wait("the sign-in form", "return !document.querySelector('#view-login').hidden;", json!([])).await;
    b.type_in(&b.find("#token-input").await, token).await;
    b.click_on("[data-testid=\"sign-in\"]").await;
    b.wait(
        &format!("signed in as a {role}"),
        "return document.querySelector('#who-name').textContent.endsWith(' · ' + arguments[0]);",
        json!([role]),
    )
    .await;
}

/// Whether the element `css` is hidden.
async fn document_hidden(b: &Browser, css: &str) -> bool {
    b.js("return document.querySelector(arguments[0]).hidden;", json!([css])).await == json!(true)
}

/// Asserts the page was never reloaded since the marker was set.
pub(crate) async fn still_same_page(b: &Browser) {
    let v = b
        .js(
            "return [window.__marker === 'kept', performance.getEntriesByType('navigation').length];",
            json!([]),
        )
        .await;
    assert_eq!(v, json!([true, 1]), "the page was reloaded (marker, navigations)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_follows_a_config_live_and_retries_a_dead_task() {
    webdriver::require_browser();
    let mut svc = Service::start().await;
    let b = Browser::start().await;
    b.goto(&format!("{}/ui/#token={ADMIN}", svc.root)).await;
    b.wait(
        "signed in as admin",
        "return document.querySelector('#who-name').textContent.includes('admin');",
        json!([]),
    )
    .await;
    let hash = b.js("return location.hash;", json!([])).await;
    assert_eq!(hash, "#/", "the token left the URL");
    b.js("window.__marker = 'kept';", json!([])).await;
    b.wait("no Config yet", "return !document.querySelector('#no-configs').hidden;", json!([])).await;

    // A Config appears and converges while the page stays loaded.
    svc.write_pool("linux", 3, &[]);
    wait_cell(&b, "data-config", "linux", "configured", "3").await;
    wait_cell(&b, "data-config", "linux", "connected", "3").await;
    still_same_page(&b).await;

    // A multi-zone Config's page shows each zone's weight, VMs and connected bots (2:1 of 3).
    svc.write_yaml("zoned", &crate::zones::spread("zoned", 3, 2, 1));
    b.js("location.hash = '#/configs/zoned';", json!([])).await;
    let zones = b
        .wait(
            "the zones of zoned, converged",
            "const f = [...document.querySelectorAll('#config-facts dt')] \
               .filter(d => d.textContent.startsWith('zone ')) \
               .map(d => d.textContent + ': ' + d.nextElementSibling.textContent); \
             const n = f.map(t => /(\\d+) VMs? · \\1 connected/.exec(t)); \
             return f.length === 2 && n.every(m => m) && Number(n[0][1]) + Number(n[1][1]) === 3 && f;",
            json!([]),
        )
        .await;
    assert_eq!(
        zones,
        json!([
            "zone us-central1-a: weight 2 · 2 VMs · 2 connected",
            "zone us-central1-b: weight 1 · 1 VM · 1 connected"
        ]),
    );
    // A demand-driven Config's page says what it read and why, and its warm pool.
    let demand = crate::support::pool("ci", 0, "1d", "10m")
        .replace("amount: {min: 0, max: 0}", "amount: {min: 0, max: 3}")
        + "demand: {dimensions: {pool: ci}, min_idle: 1, idle_timeout: 1m}\nwarm: {suspended: 2}\n";
    svc.write_yaml("ci", &demand);
    b.js("location.hash = '#/configs/ci';", json!([])).await;
    let facts = b
        .wait(
            "ci's demand read with its one idle bot, and its warm pool filled",
            "const f = Object.fromEntries([...document.querySelectorAll('#config-facts dt')] \
               .map(d => [d.textContent, d.nextElementSibling.textContent])); \
             return (f.demand || '').includes(' · idle 1 · ') \
               && (f['warm pool'] || '').startsWith('2 kept warm') && f;",
            json!([]),
        )
        .await;
    let line = facts["demand"].as_str().unwrap();
    assert!(
        line.starts_with(
            "pool:ci · pending 0 · busy 0 · idle 1 · target 1 (busy 0 + pending 0 + min_idle 1)"
        ),
        "{line}"
    );
    // Filled at rest: two VMs made and suspended beyond the one min_idle asks for.
    assert_eq!(facts["warm pool"], "2 kept warm (up to 2 suspended, 0 stopped)");
    b.js("location.hash = '#/';", json!([])).await;
    gaps::the_ids_let_go_are_shown_as_the_api_lists_them(&svc, &b).await;
    b.js("location.hash = '#/';", json!([])).await;
    files::files_not_followed_are_listed(&svc, &b).await;

    // A dead task counts on the Config the API says it belongs to: a guarded key
    // (`<VM id>@<hostname>`) is its VM's Config's.
    svc.push("terminate_bot", "zoned-1@zoned-1-ab12", json!({"bogus": 1})).await;
    wait_cell(&b, "data-config", "zoned", "dead-tasks", "1").await;

    // Its page: three VMs, each bot connected.
    b.click_on("tr[data-config=\"linux\"] [data-field=\"prefix\"] a").await;
    b.wait(
        "three connected VMs",
        "const b = [...document.querySelectorAll('#vms tr[data-vm] [data-field=\"bot\"]')]; \
         return b.length === 3 && b.every(c => c.textContent === 'connected');",
        json!([]),
    )
    .await;

    // Compute's status is shown per incarnation: linux-0's instance is RUNNING; recycled while
    // every insert fails (503), its next incarnation (a new hostname) has no instance and shows
    // none, not its predecessor's RUNNING.
    wait_cell(&b, "data-vm", "linux-0", "instance", "RUNNING").await;
    let host = b.text_of("tr[data-vm=\"linux-0\"] [data-field=\"hostname\"]").await;
    svc.faults(json!({"errors": {"compute.instances.insert": {"rate": 1.0, "status": 503}}})).await;
    svc.post("vms/linux-0/recycle").await;
    let inst = b
        .wait(
            "linux-0's next incarnation",
            "const r = document.querySelector('tr[data-vm=\"linux-0\"]'); \
             const h = r && r.querySelector('[data-field=\"hostname\"]').textContent; \
             return h && h !== arguments[0] && r.querySelector('[data-field=\"instance\"]').textContent;",
            json!([host]),
        )
        .await;
    assert!(inst == "inserting" || inst == "—", "a new incarnation without instance shows {inst}");

    // Its history, from the API's audit trail, newest first: the admin recycled linux-0; its
    // file made it.
    let rows = b
        .wait(
            "linux's history: the recycle, then the file's creation",
            "const rows = [...document.querySelectorAll('#history tr[data-audit]')].map(r => \
               ['actor', 'action', 'detail'].map(f => r.querySelector(`[data-field=\"${f}\"]`).textContent)); \
             return rows.length === 2 && rows[0][1] === 'recycle' && rows;",
            json!([]),
        )
        .await;
    assert_eq!(rows[0][0], "admin", "{rows}");
    assert!(rows[0][2].as_str().unwrap().starts_with("VM linux-0 ("), "{rows}");
    assert_eq!((&rows[1][0], &rows[1][1]), (&json!("file:linux.yaml"), &json!("create")), "{rows}");
    assert!(document_hidden(&b, "#no-history").await, "the empty note is hidden");

    // create_instance retries, then gives up and its task is dead; the cron job queues another
    // for the VM each second, which dies too. So for `owned` (one VM), owned by group infra.
    svc.write_pool("linux", 4, &[]);
    svc.write_pool("owned", 1, &["infra"]);
    b.click_on("a[data-nav=\"queues\"]").await;
    b.wait(
        "create_instance retried",
        &CELL.replace("return c ? c.textContent : null;", "return c && Number(c.textContent) > 0;"),
        json!(["data-queue", "create_instance", "retried"]),
    )
    .await;
    let task = wait_dead(&b, "linux-3", 1).await.remove(0);
    let row = dead_row(&task);
    let error = b.text_of(&format!("{row} [data-field=\"last-error\"]")).await;
    assert!(!error.is_empty(), "the dead task shows its last error");
    wait_dead(&b, "owned-0", 1).await;

    // The buttons outlive the polls: the task's "died" cell and the queue's dead count change,
    // the Retry and the queue's buttons stay the same elements.
    let retry = format!("{row} button[data-action=\"retry\"]");
    let retry_all = "tr[data-queue=\"create_instance\"] button[data-action=\"retry-all\"]";
    let purge = "tr[data-queue=\"create_instance\"] button[data-action=\"purge-dead\"]";
    for css in [retry.as_str(), retry_all, purge] {
        b.find(css).await;
    }
    let before = b
        .js(
            "for (const css of arguments[0]) document.querySelector(css).__kept = true; \
             const died = document.querySelector(arguments[1]).textContent; \
             const dead = document.querySelector('tr[data-queue=\"create_instance\"] [data-field=\"dead\"]').textContent; \
             return [died, dead];",
            json!([[retry, retry_all, purge], format!("{row} [data-field=\"died\"]")]),
        )
        .await;
    b.wait(
        "the died cell and the dead count changed",
        "return document.querySelector(arguments[0]).textContent !== arguments[1][0] && \
           document.querySelector('tr[data-queue=\"create_instance\"] [data-field=\"dead\"]').textContent !== arguments[1][1];",
        json!([format!("{row} [data-field=\"died\"]"), before]),
    )
    .await;
    let kept = b
        .js(
            "return arguments[0].map(css => { const e = document.querySelector(css); return !!(e && e.__kept); });",
            json!([[retry, retry_all, purge]]),
        )
        .await;
    assert_eq!(
        kept,
        json!([true, true, true]),
        "the Retry, retry all and purge dead buttons were replaced by a poll"
    );
    still_same_page(&b).await;

    // "purge dead", confirmed: the dead tasks listed are gone, on the page and in the API.
    let listed = b
        .js(
            "return [...document.querySelectorAll('#dead tr[data-task]')] \
               .filter(r => r.querySelector('[data-field=\"queue\"]').textContent === 'create_instance') \
               .map(r => r.getAttribute('data-task'));",
            json!([]),
        )
        .await;
    let listed: Vec<String> = serde_json::from_value(listed).unwrap();
    assert!(listed.contains(&task), "{task} is listed: {listed:?}");
    b.click_on(purge).await;
    b.accept_alert().await;
    let msg = wait_flash(&b, "of create_instance dropped").await;
    wait_gone(&b, "the purged tasks left the page", &listed).await;
    let dead = svc.dead_ids("create_instance").await;
    assert!(listed.iter().all(|t| !dead.contains(t)), "purged, yet dead: {listed:?} in {dead:?} ({msg})");

    // New dead tasks (the fault is still on): two of linux-3, one of owned-0. Then the fault is
    // lifted and both Configs get their VMs: from then on the dead set changes only by hand.
    let linux = wait_dead(&b, "linux-3", 2).await;
    let owned = wait_dead(&b, "owned-0", 1).await;
    svc.faults(json!({"errors": {}})).await;
    svc.wait_created("linux", 4).await;
    svc.wait_created("owned", 1).await;
    let (linux_row, owned_row) = (dead_row(&linux[0]), dead_row(&owned[0]));

    // Signed out, a bad token gets the form back with the API's message.
    b.click_on("#sign-out").await;
    b.wait("the sign-in form", "return !document.querySelector('#view-login').hidden;", json!([])).await;
    b.type_in(&b.find("#token-input").await, "gbt_nope").await;
    b.click_on("[data-testid=\"sign-in\"]").await;
    let msg = b
        .wait(
            "the API's message on the form",
            "const e = document.querySelector('#login-error'); \
             return !document.querySelector('#view-login').hidden && !e.hidden && e.textContent;",
            json!([]),
        )
        .await;
    assert!(msg.as_str().unwrap().contains("unknown token"), "{msg}");

    // A sign-in as the admin whose whoami is still out (slowed down in the page) when the form
    // signs in as a reader: the admin's late answer is dropped, the page is only ever the
    // reader's. A reader (of group infra) sees both dead tasks, no button, and "read-only".
    b.js(WATCH_WHO, json!([])).await;
    b.js(SLOW_FETCH, json!(["/whoami", ADMIN, 3000])).await;
    b.type_in(&b.find("#token-input").await, ADMIN).await;
    b.click_on("[data-testid=\"sign-in\"]").await;
    b.wait("the admin's whoami is out", "return window.__starts.length === 1;", json!([])).await;
    b.type_in(&b.find("#token-input").await, READER).await;
    b.click_on("[data-testid=\"sign-in\"]").await;
    b.find(&linux_row).await;
    b.find(&owned_row).await;
    b.wait("read-only shown", "return !document.querySelector('#read-only').hidden;", json!([])).await;
    b.wait("the admin's whoami answered", "return window.__landed === 1;", json!([])).await;
    let updated = b.text_of("#updated").await;
    b.wait(
        "a poll after the admin's answer",
        "return document.querySelector('#updated').textContent !== arguments[0];",
        json!([updated]),
    )
    .await;
    b.js(FAST_FETCH, json!([])).await;
    let seen = b.js("return [window.__who, window.__buttons];", json!([])).await;
    let who = b.text_of("#who-name").await;
    assert!(who.contains("reader"), "{who}");
    assert!(
        seen[0].as_array().unwrap().iter().all(|w| !w.as_str().unwrap().contains("admin")),
        "the page showed the admin's identity after a sign-in as a reader: {seen}"
    );
    assert_eq!(seen[1], false, "a reader's page showed a button");
    assert!(b.find_all("button[data-action]").await.is_empty(), "a reader gets no buttons");

    // A writer of group infra retries the dead task of `owned` (infra's), not those of linux (no
    // owner), and has no queue-wide buttons.
    sign_in_as(&b, WRITER, "writer").await;
    let owned_retry = format!("{owned_row} button[data-action=\"retry\"]");
    b.find(&owned_retry).await;
    b.find(&linux_row).await;
    assert!(b.find_all("#read-only:not([hidden])").await.is_empty(), "a writer is not read-only");
    assert!(
        b.find_all(&format!("{linux_row} button, tr[data-queue] button")).await.is_empty(),
        "a writer gets no button on another's task nor on the queues"
    );
    b.click_on(&owned_retry).await;
    wait_flash(&b, &format!("Task {} of create_instance is queued again", owned[0])).await;
    wait_gone(&b, "the writer's task left the dead set", &owned[..1]).await;
    let dead = svc.dead_ids("create_instance").await;
    assert!(!dead.contains(&owned[0]), "{} is still dead: {dead:?}", owned[0]);

    // The admin again: Retry takes a task of linux-3 out of the dead set.
    sign_in_as(&b, ADMIN, "admin").await;
    assert!(b.find_all("#read-only:not([hidden])").await.is_empty(), "an admin is not read-only");
    b.click_on(&format!("{linux_row} button[data-action=\"retry\"]")).await;
    wait_gone(&b, "the task left the dead set", &linux[..1]).await;
    // The API agrees (it ran again, or a newer task of the same key superseded it).
    let dead = svc.dead_ids("create_instance").await;
    assert!(!dead.contains(&linux[0]), "{} is still dead: {dead:?}", linux[0]);

    // The other task(s) of linux-3 are still dead: "retry all", confirmed, empties the dead set.
    b.find(&dead_row(&linux[1])).await;
    b.click_on(retry_all).await;
    b.accept_alert().await;
    wait_flash(&b, "of create_instance queued again").await;
    wait_cell(&b, "data-queue", "create_instance", "dead", "0").await;
    b.wait(
        "no dead create_instance task on the page",
        "return ![...document.querySelectorAll('#dead tr[data-task] [data-field=\"queue\"]')] \
           .some(c => c.textContent === 'create_instance');",
        json!([]),
    )
    .await;
    let dead = svc.dead_ids("create_instance").await;
    assert!(dead.is_empty(), "dead after retry all: {dead:?}");

    // Polls never run back to back: with each read of the queues slowed down to 2.5 s, a poll
    // starts 2 s after the last one ended (4.5 s apart), not as soon as it ends.
    b.js(SLOW_FETCH, json!(["/queues", null, 2500])).await;
    let starts =
        b.wait("three slow polls", "return window.__starts.length >= 3 && window.__starts;", json!([])).await;
    b.js(FAST_FETCH, json!([])).await;
    let starts: Vec<f64> = serde_json::from_value(starts).unwrap();
    for w in starts.windows(2) {
        assert!(w[1] - w[0] >= 4000.0, "polls {:.0} ms apart: {starts:?}", w[1] - w[0]);
    }
    b.click_on("a[data-nav=\"overview\"]").await;
    wait_cell(&b, "data-config", "linux", "connected", "4").await;
    still_same_page(&b).await;
    // The service goes away: a banner says so, the last data stays.
    let _ = svc.child.kill();
    let _ = svc.child.wait();
    let msg = b
        .wait(
            "the error banner",
            "const e = document.querySelector('#banner'); return !e.hidden && e.textContent;",
            json!([]),
        )
        .await;
    assert!(msg.as_str().unwrap().contains("Cannot reach the API"), "{msg}");
    assert_eq!(b.find_all("tr[data-config=\"linux\"]").await.len(), 1, "the last data stays");
    still_same_page(&b).await;
    let png = b.screenshot().await;
    assert!(png.starts_with(b"\x89PNG\r\n"), "a PNG of the page");
    b.quit().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_is_served_without_a_token_and_whoami_names_the_caller() {
    let env = Env::start(Backend::Memory, sim_config(), &[], false).await;
    let root = crate::api::serve(env.ctx.clone()).await;
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    for path in ["/", "/ui"] {
        let res = http.get(format!("{root}{path}")).send().await.unwrap();
        assert!(res.status().is_redirection(), "{path}: {}", res.status());
        assert_eq!(res.headers()["location"], "ui/", "{path}");
    }
    for (path, kind, has) in [
        ("/ui/", "text/html", "app.js"),
        ("/ui/app.js", "text/javascript", "whoami"),
        ("/ui/views.js", "text/javascript", "gbViews"),
        ("/ui/lib.js", "text/javascript", "continuationToken"),
        ("/ui/filter.js", "text/javascript", "gbFilter"),
        ("/ui/charts.js", "text/javascript", "/queues/series"),
        ("/ui/controls.js", "text/javascript", "may_change"),
        ("/ui/style.css", "text/css", ".grid"),
    ] {
        let res = http.get(format!("{root}{path}")).send().await.unwrap();
        assert_eq!(res.status(), 200, "{path}");
        let h = res.headers().clone();
        assert!(h["content-type"].to_str().unwrap().starts_with(kind), "{path}: {h:?}");
        assert_eq!(h["cache-control"], "no-cache", "{path}");
        assert!(res.text().await.unwrap().contains(has), "{path}");
    }
    let res = http.get(format!("{root}/ui/nope.js")).send().await.unwrap();
    assert_eq!(res.status(), 404);
    assert_eq!(res.json::<Value>().await.unwrap()["code"], "ResourceNotFound");
    let api = crate::api::Client::new(&root).await;
    let v = api.ok(READER, "whoami", &[], None).await;
    let may = json!({"read": true, "write": false, "admin": false});
    assert_eq!(v, json!({"name": "reader-infra", "role": "reader", "groups": ["infra"], "may": may}));
    let (status, v) = api.call(Some("gbt_nope"), "whoami", &[], None).await;
    assert_eq!((status, v["message"].as_str()), (401, Some("unknown token")));
}
