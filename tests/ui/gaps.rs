//! The dashboard's VM list names the ids a pool let go (docs/configs.md, "VM ids"), as the API's
//! listVms does: a pool shrunk idle first may keep any of its VMs.

use std::time::Duration;

use gce_backend_queues::testing::eventually;
use serde_json::json;

use super::service::Service;
use super::wait_cell;
use super::webdriver::Browser;

/// How long the pool may take to shrink.
const LIMIT: Duration = Duration::from_secs(120);

/// A pool of 3 shrunk to 1: the ids below the one kept are let go, and the Config's page says
/// which (or shows no line when it kept the lowest).
pub(super) async fn the_ids_let_go_are_shown_as_the_api_lists_them(svc: &Service, b: &Browser) {
    // A pool shrunk idle first may keep any of its VMs: the ids below the one kept are let go,
    // and the page says which, as the API's listVms does (docs/configs.md, "VM ids").
    svc.write_pool("gap", 3, &[]);
    wait_cell(b, "data-config", "gap", "connected", "3").await;
    svc.write_pool("gap", 1, &[]);
    b.js("location.hash = '#/configs/gap';", json!([])).await;
    let kept = eventually("gap down to one VM", LIMIT, || async {
        let list = svc.get("configs/gap/vms").await;
        let vms = list["vms"].as_array().cloned().unwrap_or_default();
        (vms.len() == 1).then(|| (vms[0]["vm"]["index"].as_u64().unwrap(), list["letGo"].clone()))
    })
    .await;
    let want: Vec<String> = (0..kept.0).map(|i| format!("gap-{i}")).collect();
    assert_eq!(kept.1, json!(want), "the API lets go the ids below the one kept");
    let shown = b
        .wait(
            "the let-go line as the API has it",
            "const p = document.querySelector('#vms-let-go'); \
             const rows = document.querySelectorAll('#vms tr[data-vm]').length; \
             if (rows !== 1) return null; \
             if (arguments[0].length === 0) return p.hidden ? 'hidden' : null; \
             return !p.hidden && p.textContent.endsWith(': ' + arguments[0].join(' ')) && p.textContent;",
            json!([want]),
        )
        .await;
    assert!(shown == "hidden" || shown.as_str().unwrap().starts_with("Let go (no VM by choice"), "{shown}");
}
