//! Tenants' budgets in the audit trail: the settings give each tenant's `budget_per_month` and
//! `max_cost_per_hour`; at start, a tenant whose budget differs from the last one the global
//! audit list says (or that has one, when it says none) gets an entry (`budget`, actor
//! `settings`), once across the processes that start together (under the admission lease).

use crate::config::{Tenant, Trust};
use crate::env::Env;
use crate::error::TaskError;
use crate::model::{AuditAction, AuditEntry, GLOBAL_AUDIT};

/// The actor of a budget's entries.
pub const SETTINGS: &str = "settings";

/// A tenant's budget in words: `budget_per_month $1000, max_cost_per_hour none`.
pub fn described(t: &Tenant) -> String {
    let or_none = |v: Option<crate::config::Usd>| v.map_or_else(|| "none".to_owned(), |u| u.to_string());
    format!(
        "budget_per_month {}, max_cost_per_hour {}",
        or_none(t.budget_per_month),
        or_none(t.max_cost_per_hour)
    )
}

/// What the newest budget entry of tenant `name` in `entries` (newest first) set it to.
fn last_said<'a>(entries: &'a [AuditEntry], name: &str) -> Option<&'a str> {
    let head = format!("tenant {name}: ");
    entries.iter().filter(|e| e.action == AuditAction::Budget).find_map(|e| {
        let rest = e.detail.strip_prefix(&head)?;
        Some(rest.split_once(" (was ").map_or(rest, |(now, _)| now))
    })
}

/// Records in the global audit list each tenant of `trust` whose budget changed since the last
/// entry (a tenant never recorded is recorded only when it sets one). Returns how many.
pub async fn record_changes(ctx: &Env, trust: &Trust) -> Result<usize, TaskError> {
    ctx.admitting(async |_| {
        let keep = ctx.settings.limits.audit_keep as usize;
        let entries = ctx.ports.store.audit(GLOBAL_AUDIT, 0, keep).await?;
        let none = described(&Tenant::default());
        let mut n = 0;
        for (name, t) in trust.tenants() {
            let now = described(t);
            let was = last_said(&entries, name);
            if was.unwrap_or(&none) == now {
                continue;
            }
            let was = was.unwrap_or("none recorded");
            let e = AuditEntry::global(ctx.now(), SETTINGS, AuditAction::Budget)
                .detail(format!("tenant {name}: {now} (was {was})"));
            tracing::info!(tenant = name, budget = %now, was, "a tenant's budget changed in the settings");
            ctx.audit(e).await;
            n += 1;
        }
        Ok::<_, TaskError>(n)
    })
    .await
}

#[cfg(test)]
mod tests;
