//! What the scanning cron jobs walk: the Compute projects and Swarming servers of every Config,
//! and of the candidates marked for cleanup (of removed Configs too).

use std::collections::BTreeSet;

use crate::ctx::Ctx;
use crate::error::TaskError;

/// Swarming servers of every Config, and of stale-bot candidates (of removed Configs too).
pub(super) async fn servers(ctx: &Ctx) -> Result<BTreeSet<String>, TaskError> {
    let mut s: BTreeSet<String> =
        ctx.ports.store.configs().await?.into_iter().map(|c| c.value.config.swarming).collect();
    let marks = ctx.ports.store.marks(crate::model::marks::STALE_BOTS).await?;
    s.extend(marks.into_iter().filter_map(|(k, _)| k.split_once('|').map(|(server, _)| server.to_owned())));
    Ok(s)
}

/// Projects of every Config, of leak candidates and of templates made (of removed Configs too).
pub(super) async fn projects(ctx: &Ctx) -> Result<BTreeSet<String>, TaskError> {
    // A static pool has no project: its machines are not Compute Engine's.
    let mut p: BTreeSet<String> = ctx
        .ports
        .store
        .configs()
        .await?
        .into_iter()
        .map(|c| c.value.config.attributes.project)
        .filter(|p| !p.is_empty())
        .collect();
    let marks = ctx.ports.store.marks(crate::model::marks::LEAKS).await?;
    p.extend(marks.into_iter().filter_map(|(k, _)| k.split_once('/').map(|(project, _)| project.to_owned())));
    p.extend(
        ctx.ports.store.marks(crate::model::marks::TEMPLATE_PROJECTS).await?.into_iter().map(|(k, _)| k),
    );
    Ok(p)
}
