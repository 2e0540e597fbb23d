//! Reading Config files and the files their `from_file` items name: only regular files of one
//! name under the configs directory, checked on the open file itself; parsed once per content;
//! hashed into the Config's revision.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};

use crate::config::{self, Config, ConfigError, FNV_START, MAX_FILE_BYTES, Metadata, fnv};

/// Why `path` may not be read: it leaves `root` (through `..` or a symbolic link).
const LEAVES: &str =
    "leaves the configs directory (through .. or a symbolic link): files are read from it only";

/// `path` with its `.` and `..` resolved as written (no link followed).
fn lexically(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir if matches!(out.components().next_back(), Some(Component::Normal(_))) => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// Reads `path` if it is a regular file of one name under `root`, of at most `max` bytes
/// (nothing past `max` is read). Refused before opening when its resolved path leaves `root`;
/// then checked again on the open file (its descriptor's path and metadata), so a link swapped
/// in after the first check is caught. A FIFO or a device is never waited on.
pub(super) fn read_confined(root: &Path, path: &Path, max: u64) -> Result<String, String> {
    use std::io::Read as _;
    use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
    // `..` out of the directory is refused before the filesystem is asked anything, so the
    // answer never tells whether a file out there exists.
    if !lexically(path).starts_with(lexically(root)) {
        return Err(LEAVES.into());
    }
    let root = root.canonicalize().map_err(|e| format!("the configs directory: {e}"))?;
    let real = path.canonicalize().map_err(|e| format!("cannot read: {e}"))?;
    if !real.starts_with(&root) {
        return Err(LEAVES.into());
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&real)
        .map_err(|e| format!("cannot read: {e}"))?;
    // What was opened, whatever the path said a moment ago (Linux; elsewhere the check above).
    let opened = std::os::fd::AsRawFd::as_raw_fd(&file);
    if let Ok(at) = std::fs::read_link(format!("/proc/self/fd/{opened}"))
        && !at.starts_with(&root)
    {
        return Err(LEAVES.into());
    }
    let meta = file.metadata().map_err(|e| format!("cannot read: {e}"))?;
    if !meta.is_file() {
        return Err("is not a regular file".into());
    }
    if meta.nlink() > 1 {
        return Err("has other names (hard links): a file is read under one name only".into());
    }
    if meta.len() > max {
        return Err(format!("is {} bytes; at most {max} are read", meta.len()));
    }
    let mut text = String::new();
    file.take(max + 1).read_to_string(&mut text).map_err(|e| format!("cannot read: {e}"))?;
    if text.len() as u64 > max {
        return Err(format!("is over {max} bytes; at most {max} are read"));
    }
    Ok(text)
}

/// A parsed Config file: the hash of its text, the outcome, and how often it was parsed.
type Parsed = (u64, Result<Config, ConfigError>, u32);

/// Parsed Config files of this process by path: an unchanged file is not parsed again.
pub(super) static PARSED: LazyLock<Mutex<HashMap<PathBuf, Parsed>>> = LazyLock::new(Mutex::default);

/// Reads one Config file, resolving `from_file` metadata; returns the Config and its revision.
/// Files over [`MAX_FILE_BYTES`] or nested deeper than [`config::MAX_NESTING`] are refused
/// before they are parsed. The file, and every file its `from_file` items name (relative to its
/// directory), must be regular files under `root` (the configs directory): an absolute path, a
/// `..` or a symbolic link that leaves it is refused, and no error says what a file holds.
pub fn load(path: &Path, root: &Path) -> Result<(Config, String), ConfigError> {
    let origin = path.display().to_string();
    let fail = |rule: String| ConfigError { field: origin.clone(), rule };
    let text = read_confined(root, path, MAX_FILE_BYTES).map_err(fail)?;
    let mut h = fnv(text.as_bytes(), FNV_START);
    let cached = PARSED.lock().unwrap_or_else(|e| e.into_inner()).get(path).cloned();
    let parsed = match cached {
        Some((ph, parsed, _)) if ph == h => parsed,
        other => {
            let parsed = config::check_nesting(&text, &origin).and_then(|()| Config::parse(&text, &origin));
            let n = other.map_or(1, |(_, _, n)| n + 1);
            PARSED.lock().unwrap_or_else(|e| e.into_inner()).insert(path.to_owned(), (h, parsed.clone(), n));
            parsed
        }
    };
    let mut c = parsed?;
    let dir = path.parent().unwrap_or(Path::new("."));
    if c.attributes.metadata.len() > config::MAX_METADATA_ITEMS {
        let rule = format!("{} items; at most {}", c.attributes.metadata.len(), config::MAX_METADATA_ITEMS);
        return Err(ConfigError { field: format!("{}.attributes.metadata", c.prefix), rule });
    }
    let mut read = 0;
    for (i, m) in c.attributes.metadata.iter_mut().enumerate() {
        if let Some(spec) = m.from_file.clone() {
            let (key, file) = spec.split_once(':').unwrap_or((spec.as_str(), ""));
            let field = format!("{}.attributes.metadata[{i}].from_file", c.prefix);
            let fail = |e: String| ConfigError { field: field.clone(), rule: format!("{file:?}: {e}") };
            if file.is_empty() || Path::new(file).is_absolute() {
                return Err(fail("must be a path relative to the Config file's directory".into()));
            }
            // Counted while read, so no number of from_file items reads more than Compute allows.
            let room = config::MAX_METADATA_BYTES.saturating_sub(read).min(config::MAX_METADATA_VALUE);
            let content = read_confined(root, &dir.join(file), room as u64).map_err(fail)?;
            read += content.len();
            h = fnv(content.as_bytes(), h);
            *m = Metadata::text(format!("{key}:{content}"));
        }
    }
    Ok((c, format!("{h:016x}")))
}
