//! Reading Config files (YAML or JSON documents, LUCI `vms.cfg` blocks) and the files their
//! `from_file` items name: only regular files of one
//! name under the configs directory, checked on the open file itself; parsed once per content;
//! hashed into the Config's revision.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};

use crate::config::luci::Located;
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

/// One Config of a parsed file: the Config, the hash its revision starts from, and where in a
/// `vms.cfg` it was written.
type Parsed = (Config, u64, Option<Located>);

/// A parsed Config file: the hash of its text, the outcome, and how often it was parsed.
type Cached = (u64, Result<Vec<Parsed>, ConfigError>, u32);

/// Parsed Config files of this process by path: an unchanged file is not parsed again.
pub(super) static PARSED: LazyLock<Mutex<HashMap<PathBuf, Cached>>> = LazyLock::new(Mutex::default);

/// One Config a file holds, its `from_file` metadata read.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The Config.
    pub config: Config,
    /// Its revision: a hash of what it was read from (its document or `vms` block, and the
    /// files its metadata reads).
    pub revision: String,
    /// Where it is in a `vms.cfg` (`None` in a YAML or JSON file).
    pub at: Option<Located>,
}

impl Loaded {
    /// `e`, about this Config, with its place in the file (a `vms` block's prefix and lines).
    pub fn explain(&self, origin: &str, e: ConfigError) -> ConfigError {
        match &self.at {
            Some(at) => at.explain(origin, &self.config.prefix, e),
            None => e,
        }
    }
}

/// Parses a file's text ([`config::file::parse`]), each Config with the hash its revision starts
/// from: a `vms` block's own text, a YAML document's own content (so editing one Config of a file
/// changes no other's revision), or, for a file of one document, the whole text.
fn parse(path: &Path, text: &str, origin: &str) -> Result<Vec<Parsed>, ConfigError> {
    let all = config::file::parse(text, origin, config::file::is_cfg(path))?;
    let one = all.len() == 1;
    Ok(all
        .into_iter()
        .map(|(c, at)| {
            let h = match (&at, one) {
                (Some(at), _) => fnv(text[at.span.clone()].as_bytes(), FNV_START),
                (None, true) => fnv(text.as_bytes(), FNV_START),
                (None, false) => fnv(&serde_json::to_vec(&c).unwrap_or_default(), FNV_START),
            };
            (c, h, at)
        })
        .collect())
}

/// Reads one Config file holding one Config (see [`load_all`]); returns it and its revision.
pub fn load(path: &Path, root: &Path) -> Result<(Config, String), ConfigError> {
    let mut all = load_all(path, root)?;
    match all.len() {
        1 => {
            let l = all.remove(0);
            Ok((l.config, l.revision))
        }
        n => Err(ConfigError {
            field: path.display().to_string(),
            rule: format!("holds {n} Configs; one is read here"),
        }),
    }
}

/// Reads one Config file, resolving `from_file` metadata: a YAML or JSON file (a Config per
/// document) or a LUCI `vms.cfg` (`*.cfg`, a Config per `vms` block). Files over
/// [`MAX_FILE_BYTES`] or nested deeper than [`config::MAX_NESTING`] are refused before they are
/// parsed. The file, and every file its `from_file` items name (relative to its directory),
/// must be regular files under `root` (the configs directory): an absolute path, a `..` or a
/// symbolic link that leaves it is refused, and no error says what a file holds.
pub fn load_all(path: &Path, root: &Path) -> Result<Vec<Loaded>, ConfigError> {
    let origin = path.display().to_string();
    let fail = |rule: String| ConfigError { field: origin.clone(), rule };
    let text = read_confined(root, path, MAX_FILE_BYTES).map_err(fail)?;
    let h = fnv(text.as_bytes(), FNV_START);
    let cached = PARSED.lock().unwrap_or_else(|e| e.into_inner()).get(path).cloned();
    let parsed = match cached {
        Some((ph, parsed, _)) if ph == h => parsed,
        other => {
            let parsed = parse(path, &text, &origin);
            let n = other.map_or(1, |(_, _, n)| n + 1);
            PARSED.lock().unwrap_or_else(|e| e.into_inner()).insert(path.to_owned(), (h, parsed.clone(), n));
            parsed
        }
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    parsed?
        .into_iter()
        .map(|(config, h, at)| {
            let mut l = Loaded { config, revision: String::new(), at };
            let h = resolve(&mut l.config, dir, root, h).map_err(|e| l.explain(&origin, e))?;
            l.revision = format!("{h:016x}");
            Ok(l)
        })
        .collect()
}

/// Reads the `from_file` metadata of `c` into `from_text` items; returns `h` with what was read
/// hashed in.
fn resolve(c: &mut Config, dir: &Path, root: &Path, mut h: u64) -> Result<u64, ConfigError> {
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
    Ok(h)
}
