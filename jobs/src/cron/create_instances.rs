//! `create_instances`: every VM without an instance → `create_instance`; the VMs of a Config
//! whose provider sends them together now (`making::batch`) → one `bulk_insert` for the Config,
//! which sends them and hands the others (retries, single inserts) on to `create_instance`.

use std::collections::BTreeMap;

use crate::ctx::Ctx;
use crate::env::Ports;
use crate::error::TaskError;
use crate::naming::parse_id;
use crate::ports::store::VmIndex;
use crate::providers::Batch;
use crate::work::CreateInstance;

/// Runs once.
pub async fn run(ctx: &Ctx) -> Result<usize, TaskError> {
    let Ports { store, .. } = &ctx.ports;
    let read = store.vm_ids(VmIndex::Uncreated).await;
    let Some(ids) = crate::safety::heal::or_skip(ctx, "create_instances", None, read).await? else {
        return Ok(0);
    };
    let mut by_config: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for id in ids {
        let prefix = parse_id(&id).map_or_else(String::new, |(p, _)| p.to_owned());
        by_config.entry(prefix).or_default().push(id);
    }
    let (mut bulks, mut alone) = (Vec::new(), Vec::new());
    for (prefix, ids) in by_config {
        let cfg = match prefix.is_empty() {
            true => None,
            false => match store.config(&prefix).await {
                // A newer build's Config: its VMs are left to that build.
                Err(crate::ports::store::StoreError::Newer { key, format }) => {
                    crate::records::writes::left_to_newer(ctx, &key, format).await?;
                    continue;
                }
                read => read?,
            },
        };
        match cfg {
            Some(c) => match crate::making::batch(ctx, &c.value, &ids).await? {
                Batch::Together(bulk) => bulks.push(bulk),
                Batch::Each(each) => alone.extend(each),
            },
            None => alone.extend(ids.into_iter().map(|id| CreateInstance { id })),
        }
    }
    Ok(ctx.push_many(&bulks).await? + ctx.push_many(&alone).await?)
}
