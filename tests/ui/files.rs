//! The dashboard shows the Config files the service does not follow, as the API lists them: a
//! file not applied (why, since when) and a file gone whose Config's deletion is held, with that
//! Config's state saying so; a Config page of a prefix not applied says why.

use serde_json::{Value, json};

use super::service::Service;
use super::webdriver::Browser;

/// The files table's rows as "file name | Config | problem | why".
const ROWS: &str = "return [...document.querySelectorAll('#files tr[data-file]')].map(r => \
    ['path', 'prefix', 'problem', 'why'].map(f => { \
      const t = r.querySelector('[data-field=\"' + f + '\"]').textContent; \
      return f === 'path' ? t.split('/').pop() : t; }).join(' | ')).sort();";

/// A file with a mistake (`broken`) and `gap`'s file removed the same round: both listed, gap's
/// state says its deletion is held, and the page of `broken` says why it is not there; fixed,
/// the list goes.
pub(super) async fn files_not_followed_are_listed(svc: &Service, b: &Browser) {
    let broken = crate::support::pool("broken", 1, "1d", "10m")
        .replace("amount: {min: 1, max: 1}", "amount: {min: 3, max: 1}");
    svc.write_yaml("broken", &broken);
    let gap = std::fs::read_to_string(svc.configs.join("gap.yaml")).unwrap();
    std::fs::remove_file(svc.configs.join("gap.yaml")).unwrap();
    let rows = b
        .wait(
            "both files listed",
            &format!(
                "const rows = (() => {{ {ROWS} }})(); \
                      return !document.querySelector('#files-box').hidden && rows.length === 2 && rows;"
            ),
            json!([]),
        )
        .await;
    let rows: Vec<String> = serde_json::from_value(rows).unwrap();
    assert!(
        rows[0].starts_with("broken.yaml | broken | not applied | ") && rows[0].contains("amount"),
        "{rows:?}"
    );
    assert!(
        rows[1].starts_with("gap.yaml | gap | deletion held | ") && rows[1].contains("broken.yaml"),
        "{rows:?}"
    );
    let state = b
        .wait(
            "gap's state says its deletion is held",
            "const c = document.querySelector('tr[data-config=\"gap\"] [data-field=\"state\"]'); \
             return c && c.textContent.includes('deletion held') && c.textContent;",
            json!([]),
        )
        .await;
    assert!(state.as_str().unwrap().starts_with("active"), "{state}");

    b.js("location.hash = '#/configs/broken';", json!([])).await;
    let missing: Value = b
        .wait(
            "the page of broken says why",
            "const m = document.querySelector('#config-missing'); \
             return !m.hidden && m.textContent.includes('not applied') && m.textContent;",
            json!([]),
        )
        .await;
    let text = missing.as_str().unwrap();
    assert!(
        text.contains("broken.yaml is not applied")
            && text.lines().nth(1).is_some_and(|l| l.contains("amount")),
        "{text}"
    );

    // Fixed: gap's file back, broken's gone: nothing listed.
    std::fs::remove_file(svc.configs.join("broken.yaml")).unwrap();
    svc.write_yaml("gap", &gap);
    b.js("location.hash = '#/';", json!([])).await;
    b.wait("the list goes", "return document.querySelector('#files-box').hidden;", json!([])).await;
}
