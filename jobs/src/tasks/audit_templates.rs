//! `audit_templates`: one audit of the per-pool resources each provider made in one project
//! (`Provider::audit_resources`; Compute Engine: leaked instance templates, those carrying our
//! deployment label that no Config record names and whose Config has no VM of their revision,
//! deleted once leaked for `leak_grace`: `providers/gce_audit.rs`).

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::work::{AuditTemplates, Next};

/// Handles one task.
pub async fn run(ctx: &Ctx, t: AuditTemplates) -> Result<Next, TaskError> {
    ctx.providers.audit_resources(ctx, &t.project).await
}

#[cfg(test)]
mod tests;
