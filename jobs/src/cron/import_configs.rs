//! `import_configs`: syncs Config records with the files in the configs directory (`*.yaml`,
//! `*.yml`, `*.json`, one Config each).
//!
//! * The revision is a hash of the file and the files its metadata reads: an unchanged revision
//!   leaves the record untouched; a changed one replaces the Config and keeps the current amount.
//! * An invalid file changes nothing of its Config and records the error on its status.
//! * A prefix whose file is gone: the Config is deleted and its VMs drained. Nothing is deleted
//!   in a round where some file could not be read, since its prefix is unknown.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use gce_backend_queues::payload::{DrainVm, ExpandConfig};

use crate::config::{Config, ConfigError, Metadata, check_prefixes};
use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::model::ConfigRecord;
use crate::ports::store::{Expect, VmIndex};

/// FNV-1a, 64 bits: a stable content hash.
fn fnv(bytes: &[u8], mut h: u64) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// Reads one Config file, resolving `from_file` metadata; returns the Config and its revision.
pub fn load(path: &Path) -> Result<(Config, String), ConfigError> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError { field: origin.clone(), rule: format!("cannot read: {e}") })?;
    let mut c = Config::parse(&text, &origin)?;
    let mut h = fnv(text.as_bytes(), 0xcbf2_9ce4_8422_2325);
    let dir = path.parent().unwrap_or(Path::new("."));
    for (i, m) in c.attributes.metadata.iter_mut().enumerate() {
        if let Some(spec) = m.from_file.clone() {
            let (key, file) = spec.split_once(':').unwrap_or((spec.as_str(), ""));
            let content = std::fs::read_to_string(dir.join(file)).map_err(|e| ConfigError {
                field: format!("{}.attributes.metadata[{i}]", c.prefix),
                rule: format!("from_file {file}: {e}"),
            })?;
            h = fnv(content.as_bytes(), h);
            *m = Metadata::text(format!("{key}:{content}"));
        }
    }
    Ok((c, format!("{h:016x}")))
}

/// Runs once.
pub async fn run(ctx: &Ctx) -> Result<usize, TaskError> {
    let dir = &ctx.configs_dir;
    let entries = std::fs::read_dir(dir)
        .map_err(|e| TaskError::Invalid(format!("configs directory {}: {e}", dir.display())))?;
    let mut paths: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml" || x == "json"))
        .collect();
    paths.sort();
    let mut valid: BTreeMap<String, (Config, String)> = BTreeMap::new();
    let mut known = BTreeSet::new();
    let mut unreadable = false;
    for path in &paths {
        match load(path) {
            Ok((c, rev)) => {
                known.insert(c.prefix.clone());
                let all: Vec<Config> = valid.values().map(|(c, _)| c.clone()).chain([c.clone()]).collect();
                match c.validate().and_then(|()| check_prefixes(&all)) {
                    Ok(()) => {
                        valid.insert(c.prefix.clone(), (c, rev));
                    }
                    Err(e) => {
                        let msg = format!("{}: {e}", path.display());
                        ctx.record(&c.prefix, "import_configs", "invalid", &msg, &c.attributes.zone, "")
                            .await?;
                    }
                }
            }
            Err(e) => {
                unreadable = true;
                tracing::error!(file = %path.display(), "{e}");
            }
        }
    }
    let mut pushed = 0;
    for (prefix, (config, revision)) in valid {
        let cur = ctx.store.config(&prefix).await?;
        if cur.as_ref().is_some_and(|c| c.value.revision == revision) {
            continue;
        }
        let rec = ConfigRecord {
            config,
            revision,
            current_amount: cur.as_ref().map_or(0, |c| c.value.current_amount),
        };
        let expect = cur.as_ref().map_or(Expect::Absent, |c| Expect::Version(c.version));
        if ctx.store.put_config(&rec, expect).await? {
            tracing::info!(config = %prefix, revision = %rec.revision, "imported");
            pushed += ctx.push_many(&[ExpandConfig { prefix }]).await?;
        }
    }
    if unreadable {
        return Ok(pushed);
    }
    for cur in ctx.store.configs().await? {
        let prefix = cur.value.config.prefix.clone();
        if known.contains(&prefix) {
            continue;
        }
        if ctx.store.delete_config(&prefix, cur.version).await? {
            tracing::info!(config = %prefix, "file removed: config deleted, draining its VMs");
            let ids = ctx.store.vm_ids(VmIndex::OfConfig(prefix)).await?;
            pushed += ctx.push_many(&ids.into_iter().map(|id| DrainVm { id }).collect::<Vec<_>>()).await?;
        }
    }
    Ok(pushed)
}
