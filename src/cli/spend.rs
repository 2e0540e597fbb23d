//! `gce-backend spend [--tenant T] [--month YYYY-MM]`: the API's `spend` (showback) as a table
//! of each tenant's Configs and its total (VM-hours by state, the month's cost and the month
//! before's, the cost per hour now, the share of its monthly budget used) and the price date;
//! `--json` prints the answer itself.

use gce_backend_jobs::config::Usd;
use gce_backend_jobs::{spend::report::Month, spend::report::MonthSpend, spend::report::SpendReport};

use super::call::{Target, call, client, show, usage};
use super::client::CallError;

/// `gce-backend spend`.
pub async fn spend(t: &Target, tenant: Option<&str>, month: Option<&str>) -> anyhow::Result<()> {
    if let Some(m) = month {
        Month::parse(m).map_err(|e| usage(format!("--month: {e}")))?;
    }
    let mut c = client(t)?;
    let mut a = Vec::new();
    if let Some(t) = tenant {
        a.push(("tenant", t));
    }
    if let Some(m) = month {
        a.push(("month", m));
    }
    let v = match call(&mut c, "spend", &a, None).await {
        // What is asked is refused (an unknown tenant): the caller's mistake.
        Err(e) => match e.downcast::<CallError>() {
            Ok(CallError::Api { status: 400, message, .. }) => return Err(usage(message)),
            Ok(other) => return Err(other.into()),
            Err(e) => return Err(e),
        },
        Ok(v) => v,
    };
    show(t, &v, |v| match serde_json::from_value::<SpendReport>(v.clone()) {
        Ok(r) => table(&r),
        Err(e) => format!("the API's answer is not a spend report ({e}); --json prints it"),
    })
}

fn usd(v: f64) -> String {
    Usd(v).to_string()
}

/// A row's cells: hours running, suspended, stopped; the month's cost and the one before's.
fn months(m: &MonthSpend, before: &MonthSpend) -> [String; 5] {
    let h = |v: f64| format!("{v:.1}");
    [h(m.hours.running), h(m.hours.suspended), h(m.hours.stopped), usd(m.usd.0), usd(before.usd.0)]
}

/// Columns aligned, numbers to the right.
fn columns(header: &[String], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in std::iter::once(header).chain(rows.iter().map(Vec::as_slice)) {
        let cells: Vec<String> = r
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, w))| if i < 2 { format!("{c:<w$}") } else { format!("{c:>w$}") })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// The report as a table: a row per Config (a deleted one marked), a total per tenant with the
/// share of its budget used, then the price date.
pub(super) fn table(r: &SpendReport) -> String {
    let header: Vec<String> = [
        "TENANT",
        "CONFIG",
        "RUNNING H",
        "SUSPENDED H",
        "STOPPED H",
        &format!("COST {}", r.month),
        &format!("COST {}", r.previous_month),
        "$/H NOW",
        "BUDGET USED",
    ]
    .iter()
    .map(|h| (*h).to_owned())
    .collect();
    let mut rows = Vec::new();
    for t in &r.tenants {
        for c in &t.configs {
            let name = if c.deleted { format!("{} (deleted)", c.prefix) } else { c.prefix.clone() };
            let mut row = vec![t.tenant.clone(), name];
            row.extend(months(&c.month, &c.previous));
            row.extend([usd(c.cost_per_hour.0), "-".to_owned()]);
            rows.push(row);
        }
        let total = match t.hidden {
            0 => "(total)".to_owned(),
            n => format!("(total, {n} not shown)"),
        };
        let budget = match (t.budget_used_percent, t.budget_per_month) {
            (Some(p), Some(b)) => format!("{p:.1}% of {b}"),
            _ => "-".to_owned(),
        };
        let mut row = vec![t.tenant.clone(), total];
        row.extend(months(&t.month, &t.previous));
        row.extend([usd(t.cost_per_hour.0), budget]);
        rows.push(row);
    }
    let mut out =
        format!("month {} (and {}), to {}\n", r.month, r.previous_month, r.at.format("%Y-%m-%dT%H:%M:%SZ"));
    if rows.is_empty() {
        out.push_str("no Config this token may read\n");
    } else {
        out.push_str(&columns(&header, &rows));
    }
    out.push_str(&format!(
        "prices: {} (read {}); list prices, before any discount\n",
        r.prices.source,
        r.prices.read_at.format("%Y-%m-%d")
    ));
    out
}

#[cfg(test)]
mod tests;
