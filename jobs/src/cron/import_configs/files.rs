//! Reading Config files (YAML or JSON documents, LUCI `vms.cfg` blocks) and the files their
//! `from_file` items name: only regular files of one
//! name under the configs directory, checked on the open file itself; parsed once per content;
//! hashed into the Config's revision. Every mistake of a file is found in one round (`check`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};

use super::ownership::Read;
use crate::config::luci::Located;
use crate::config::{self, Config, ConfigError, ConfigErrors, FNV_START, MAX_FILE_BYTES, Metadata, fnv};

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
type Cached = (u64, Result<Vec<Parsed>, ConfigErrors>, u32);

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
    /// Where it is in a `vms.cfg` (`None` in a YAML or JSON file), with what could not be read
    /// in its block.
    pub at: Option<Located>,
    /// The `from_file` items that could not be read.
    unread: Vec<ConfigError>,
}

impl Loaded {
    /// Every mistake of this Config, in the order of the file (`origin`), each with its block
    /// and line in a `vms.cfg`: what could not be read (in its block, or a file its metadata
    /// names), then each of `problems` (the rules it breaks) not about those. Empty: it may be
    /// applied.
    pub fn mistakes(&self, origin: &str, problems: Vec<ConfigError>) -> Vec<ConfigError> {
        config::file::mistakes(&self.config, self.at.as_ref(), origin, self.unread.clone(), problems)
    }

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
fn parse(path: &Path, text: &str, origin: &str) -> Result<Vec<Parsed>, ConfigErrors> {
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

/// Reads one Config file holding one Config (see [`load_all`]), read whole (its rules are the
/// caller's to check); returns it and its revision, or every mistake found reading it.
pub fn load(path: &Path, root: &Path) -> Result<(Config, String), ConfigErrors> {
    let origin = path.display().to_string();
    let mut all = load_all(path, root)?;
    ConfigErrors::check(all.iter().flat_map(|l| l.mistakes(&origin, Vec::new())).collect())?;
    match all.len() {
        1 => {
            let l = all.remove(0);
            Ok((l.config, l.revision))
        }
        n => Err(ConfigError { field: origin, rule: format!("holds {n} Configs; one is read here") }.into()),
    }
}

/// Reads one Config file, resolving `from_file` metadata: a YAML or JSON file (a Config per
/// document) or a LUCI `vms.cfg` (`*.cfg`, a Config per `vms` block). Files over
/// [`MAX_FILE_BYTES`] or nested deeper than [`config::MAX_NESTING`] are refused before they are
/// parsed. The file, and every file its `from_file` items name (relative to its directory),
/// must be regular files under `root` (the configs directory): an absolute path, a `..` or a
/// symbolic link that leaves it is refused, and no error says what a file holds. A `vms` block
/// that cannot be read whole, or a `from_file` item that cannot be read, is a mistake of its
/// Config ([`Loaded::mistakes`]); the others are read on.
pub fn load_all(path: &Path, root: &Path) -> Result<Vec<Loaded>, ConfigErrors> {
    let origin = path.display().to_string();
    let fail = |rule: String| ConfigErrors::from(ConfigError { field: origin.clone(), rule });
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
    Ok(parsed?
        .into_iter()
        .map(|(mut config, h, at)| {
            let (h, unread) = resolve(&mut config, dir, root, h);
            Loaded { config, revision: format!("{h:016x}"), at, unread }
        })
        .collect())
}

/// Reads the `from_file` metadata of `c` into `from_text` items; returns `h` with what was read
/// hashed in, and the items that could not be read (each left as it was written).
fn resolve(c: &mut Config, dir: &Path, root: &Path, mut h: u64) -> (u64, Vec<ConfigError>) {
    if c.attributes.metadata.len() > config::MAX_METADATA_ITEMS {
        let rule = format!("{} items; at most {}", c.attributes.metadata.len(), config::MAX_METADATA_ITEMS);
        return (h, vec![ConfigError { field: format!("{}.attributes.metadata", c.prefix), rule }]);
    }
    let (mut read, mut unread) = (0, Vec::new());
    for (i, m) in c.attributes.metadata.iter_mut().enumerate() {
        if let Some(spec) = m.from_file.clone() {
            let (key, file) = spec.split_once(':').unwrap_or((spec.as_str(), ""));
            let field = format!("{}.attributes.metadata[{i}].from_file", c.prefix);
            let fail = |e: String| ConfigError { field: field.clone(), rule: format!("{file:?}: {e}") };
            if file.is_empty() || Path::new(file).is_absolute() {
                unread.push(fail("must be a path relative to the Config file's directory".into()));
                continue;
            }
            // Counted while read, so no number of from_file items reads more than Compute allows.
            let room = config::MAX_METADATA_BYTES.saturating_sub(read).min(config::MAX_METADATA_VALUE);
            let content = match read_confined(root, &dir.join(file), room as u64) {
                Ok(content) => content,
                Err(e) => {
                    unread.push(fail(e));
                    continue;
                }
            };
            read += content.len();
            h = fnv(content.as_bytes(), h);
            *m = Metadata::text(format!("{key}:{content}"));
        }
    }
    (h, unread)
}

/// Checks the Configs read from the Config file `name` (at `shown`) for an import round: every
/// rule, and the service's `limits`. Its Configs and their revisions, or every mistake it has,
/// by the prefix of the Config each is about, the mistakes of one Config on its own lines.
pub(super) fn check(all: Vec<Loaded>, name: &str, shown: &str, limits: &config::Limits) -> Read {
    let (mut ok, mut errors) = (Vec::new(), Vec::<(String, String)>::new());
    for l in all {
        let mut problems = l.config.problems();
        problems.extend(l.config.check_limits(limits).err());
        let mistakes = l.mistakes(shown, problems);
        if mistakes.is_empty() {
            ok.push((l.config, l.revision));
            continue;
        }
        let said = say(name, shown, mistakes);
        // Two blocks of one prefix: one entry, as the file's errors are known by prefix.
        match errors.iter_mut().find(|(p, _)| *p == l.config.prefix) {
            Some((_, was)) => *was = format!("{was}\n{said}"),
            None => errors.push((l.config.prefix, said)),
        }
    }
    if errors.is_empty() { Ok(ok) } else { Err(errors) }
}

/// The Config file `name` (at `shown`) refused whole (it cannot be read, or parsed as Configs),
/// with every mistake found.
pub(super) fn refused(name: &str, shown: &str, e: ConfigErrors) -> Read {
    Err(vec![(String::new(), say(name, shown, e.into_vec()))])
}

/// `mistakes` of the file `name` (at `shown`), one a line; the path is said once, by whoever
/// reports them (a line as `name:line`).
fn say(name: &str, shown: &str, mistakes: Vec<ConfigError>) -> String {
    let text = |e: ConfigError| match e.field.strip_prefix(shown) {
        Some("") => e.rule,
        Some(line) => format!("{name}{line}: {}", e.rule),
        None => e.to_string(),
    };
    mistakes.into_iter().map(text).collect::<Vec<_>>().join("\n")
}
