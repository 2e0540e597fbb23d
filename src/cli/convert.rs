//! `gce-backend configs convert`: LUCI's `vms.cfg` to YAML (a document per `vms` block, durations
//! as the file wrote them), or YAML back to `vms.cfg` with `--to cfg`. A local command: it reads
//! one file (or standard input), checks every Config as the importer does, says every mistake at
//! once, and prints; no API is called.

use std::io::Read as _;
use std::path::Path;

use gce_backend_jobs::config::file as config_file;
use gce_backend_jobs::config::luci::Located;
use gce_backend_jobs::config::{Config, ConfigError, ConfigErrors, MAX_FILE_BYTES, luci, prefixes_clash};

use crate::error::Usage;
use crate::out;

/// What `configs convert` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum To {
    /// YAML, a document per Config (read from a `*.cfg` file, or standard input as `vms.cfg`).
    Yaml,
    /// LUCI's `vms.cfg` text proto (read from a YAML or JSON file, or standard input as YAML).
    Cfg,
}

fn usage(e: impl std::fmt::Display) -> anyhow::Error {
    Usage(e.to_string()).into()
}

/// Reads `file` (`-`: standard input), at most [`MAX_FILE_BYTES`]; returns its name as errors
/// say it (`<stdin>` for standard input) and its text.
pub(super) fn read(file: &Path) -> anyhow::Result<(String, String)> {
    let origin = if file == Path::new("-") { "<stdin>".to_owned() } else { file.display().to_string() };
    let mut text = String::new();
    let reader: Box<dyn std::io::Read> = match file == Path::new("-") {
        true => Box::new(std::io::stdin()),
        false => Box::new(std::fs::File::open(file).map_err(|e| usage(format!("{origin}: {e}")))?),
    };
    reader.take(MAX_FILE_BYTES + 1).read_to_string(&mut text).map_err(|e| usage(format!("{origin}: {e}")))?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(usage(format!("{origin}: over {MAX_FILE_BYTES} bytes")));
    }
    Ok((origin, text))
}

/// Parses and checks the Configs of `text`: every mistake at once (what cannot be read, every
/// rule each Config breaks, a prefix that is a prefix of another's), each saying where (a `vms`
/// block's line).
fn configs(text: &str, origin: &str, cfg: bool) -> Result<Vec<(Config, Option<Located>)>, ConfigErrors> {
    let all = config_file::parse(text, origin, cfg)?;
    let mut errors = Vec::new();
    for (c, at) in &all {
        errors.extend(config_file::mistakes(c, at.as_ref(), origin, Vec::new(), c.problems()));
    }
    for (i, (c, at)) in all.iter().enumerate() {
        let Some((other, _)) = all[..i].iter().find(|(o, _)| prefixes_clash(&c.prefix, &o.prefix)) else {
            continue;
        };
        let rule = format!("{:?} and {:?}: one is a prefix of the other", other.prefix, c.prefix);
        let e = ConfigError { field: format!("{}.prefix", c.prefix), rule };
        errors.push(match at {
            Some(at) => at.explain(origin, &c.prefix, e),
            None => e,
        });
    }
    ConfigErrors::check(errors)?;
    Ok(all)
}

/// `gce-backend configs convert FILE [--to yaml|cfg]`.
pub fn convert(file: &Path, to: To) -> anyhow::Result<()> {
    let (origin, text) = read(file)?;
    let from_cfg = match file == Path::new("-") {
        true => to == To::Yaml,
        false => config_file::is_cfg(file),
    };
    let all = configs(&text, &origin, from_cfg).map_err(usage)?;
    let printed = match to {
        To::Yaml => config_file::to_yaml(&all),
        To::Cfg => luci::to_text_proto(&all.into_iter().map(|(c, _)| c).collect::<Vec<_>>()),
    };
    let printed = printed.map_err(usage)?;
    out::line(printed.trim_end());
    Ok(())
}
