//! The names `import_configs` gives: its stage on a Config's status, the file a Config's
//! `source` names, and the actor of what a file does in the audit trail.

use std::path::Path;

/// The stage of `import_configs`'s notes on a Config's status.
pub(super) const STAGE: &str = "import_configs";

/// The file name a Config's `source` names (sources were once whole paths).
pub(super) fn source_name(source: &str) -> String {
    Path::new(source).file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

/// The actor of what a Config file does: `file:<its name in the configs directory>`.
pub(super) fn file_actor(name: &str) -> String {
    format!("file:{name}")
}
