//! `gce-backend spend`'s table: a row per Config (deleted ones marked), a total per tenant with
//! its budget used, months named, numbers to the right, the price date.

use serde_json::json;

use super::*;

fn report() -> SpendReport {
    let month = |m: &str, running: f64, stopped: f64, usd: f64| {
        json!({"month": m, "hours": {"running": running, "suspended": 0.0, "stopped": stopped},
               "usd_by_state": {"running": usd, "suspended": 0.0, "stopped": 0.0}, "usd": usd})
    };
    serde_json::from_value(json!({
        "month": "2026-11",
        "previous_month": "2026-10",
        "at": "2026-11-21T10:00:00.123Z",
        "prices": {"source": "snapshot 2026-12-07", "read_at": "2026-12-07T00:00:00Z"},
        "tenants": [
            {"tenant": "infra", "budget_per_month": 1000.0, "max_cost_per_hour": 5.0,
             "budget_used_percent": 42.04, "cost_per_hour": 1.5,
             "month": month("2026-11", 420.0, 4.0, 420.4), "previous": month("2026-10", 2.0, 0.0, 2.0),
             "configs": [
                 {"prefix": "infra-a", "tenant": "infra", "cost_per_hour": 1.5,
                  "month": month("2026-11", 420.0, 4.0, 420.4), "previous": month("2026-10", 0.0, 0.0, 0.0)},
                 {"prefix": "infra-old", "tenant": "infra", "deleted": true, "cost_per_hour": 0.0,
                  "month": month("2026-11", 0.0, 0.0, 0.0), "previous": month("2026-10", 2.0, 0.0, 2.0)},
             ], "hidden": 1},
            {"tenant": "*", "cost_per_hour": 0.0134,
             "month": month("2026-11", 1.3, 0.0, 0.0168), "previous": month("2026-10", 0.0, 0.0, 0.0),
             "configs": [
                 {"prefix": "linux", "tenant": "*", "cost_per_hour": 0.0134,
                  "month": month("2026-11", 1.3, 0.0, 0.0168), "previous": month("2026-10", 0.0, 0.0, 0.0)},
             ]},
        ],
    }))
    .unwrap()
}

#[test]
fn a_row_per_config_a_total_per_tenant_with_its_budget_and_the_price_date() {
    let got = table(&report());
    let want = "\
month 2026-11 (and 2026-10), to 2026-11-21T10:00:00Z
TENANT  CONFIG                RUNNING H  SUSPENDED H  STOPPED H  COST 2026-11  COST 2026-10  $/H NOW     BUDGET USED
infra   infra-a                   420.0          0.0        4.0          $420       $0.0000    $1.50               -
infra   infra-old (deleted)         0.0          0.0        0.0       $0.0000         $2.00  $0.0000               -
infra   (total, 1 not shown)      420.0          0.0        4.0          $420         $2.00    $1.50  42.0% of $1000
*       linux                       1.3          0.0        0.0       $0.0168       $0.0000  $0.0134               -
*       (total)                     1.3          0.0        0.0       $0.0168       $0.0000  $0.0134               -
prices: snapshot 2026-12-07 (read 2026-12-07); list prices, before any discount
";
    assert_eq!(got, want, "\n{got}");
}

#[test]
fn nothing_to_read_says_so_and_still_names_the_prices() {
    let mut r = report();
    r.tenants.clear();
    let got = table(&r);
    assert!(got.contains("no Config this token may read\n"), "{got}");
    assert!(
        got.ends_with("prices: snapshot 2026-12-07 (read 2026-12-07); list prices, before any discount\n"),
        "{got}"
    );
}
