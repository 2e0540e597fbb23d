//! What a `--redis` URL asks for, parsed strictly: the mode (one server, Sentinel, Cluster), TLS
//! and its CA file, and where the password comes from (the URL, a file, IAM tokens).
//!
//! ```text
//! redis://[user[:password]@]host[:port][/db][?options]
//! rediss://…                                                TLS
//! redis+sentinel://[user[:password]@]s1[:port],s2…/master[/db][?options]
//! redis+cluster://[user[:password]@]n1[:port],n2…[?options]
//! rediss+sentinel://…, rediss+cluster://…                   the same over TLS
//! options: ca_file=PATH  password_file=PATH  auth=iam  replicas=N  (joined with &)
//! ```

use std::fmt;
use std::path::PathBuf;

/// How the service reaches Redis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// One server (a Memorystore for Redis instance, with or without a replica behind it).
    Single(Host),
    /// A primary found through sentinels by its master name, followed on promotion.
    Sentinel {
        /// The sentinels.
        sentinels: Vec<Host>,
        /// The master name the sentinels monitor.
        master: String,
    },
    /// A Redis Cluster, found from its seed nodes.
    Cluster(Vec<Host>),
}

/// Where the AUTH password comes from.
#[derive(Clone, PartialEq, Eq)]
pub enum Password {
    /// None: the server needs no AUTH.
    None,
    /// Given in the URL.
    Inline(String),
    /// Read from a file, and again when it changes (a rotated secret needs no restart).
    File(PathBuf),
    /// An OAuth access token from the service's Google credentials, renewed before it expires
    /// (Memorystore's IAM authentication).
    Iam,
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Password::None => f.write_str("None"),
            Password::Inline(_) => f.write_str("Inline(***)"),
            Password::File(p) => write!(f, "File({})", p.display()),
            Password::Iam => f.write_str("Iam"),
        }
    }
}

/// A server's host and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// A DNS name or an IP address (without brackets).
    pub host: String,
    /// Its port.
    pub port: u16,
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// A parsed `--redis` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// One server, Sentinel or Cluster.
    pub mode: Mode,
    /// Whether the connections use TLS (`rediss…`).
    pub tls: bool,
    /// The CA that signed the servers' certificates (PEM), instead of the system's roots.
    pub ca_file: Option<PathBuf>,
    /// The ACL user (`default` when none is given).
    pub user: Option<String>,
    /// Where the password comes from.
    pub password: Password,
    /// The database number (0 in Cluster mode, the only one a cluster has).
    pub db: i64,
    /// How many replicas must acknowledge an operator's write before it is answered (`WAIT`):
    /// 1 behind sentinels, else 0 unless `replicas=N` says otherwise.
    pub replicas: u32,
}

/// The default port of a Redis server and of a sentinel.
const REDIS_PORT: u16 = 6379;
const SENTINEL_PORT: u16 = 26379;
/// The options a URL may carry.
const OPTIONS: [&str; 4] = ["ca_file", "password_file", "auth", "replicas"];

impl Target {
    /// Parses `url`; an error names what is wrong (never the password).
    pub fn parse(url: &str) -> Result<Self, String> {
        let (scheme, rest) = url.split_once("://").ok_or_else(|| {
            "expected redis://, rediss://, redis+sentinel:// or redis+cluster://".to_owned()
        })?;
        let (tls, kind) = match scheme {
            "redis" => (false, ""),
            "rediss" => (true, ""),
            "redis+sentinel" => (false, "sentinel"),
            "rediss+sentinel" => (true, "sentinel"),
            "redis+cluster" => (false, "cluster"),
            "rediss+cluster" => (true, "cluster"),
            other => {
                return Err(format!(
                    "unknown scheme {other:?}: expected redis, rediss, redis+sentinel, rediss+sentinel, \
                     redis+cluster or rediss+cluster"
                ));
            }
        };
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (userinfo, hosts) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let (user, inline) = match userinfo {
            None => (None, None),
            Some(u) => {
                let (user, pass) = match u.split_once(':') {
                    Some((user, pass)) => (user, Some(decode(pass, "the password")?)),
                    None => (u, None),
                };
                let user = decode(user, "the user")?;
                (Some(user).filter(|u| !u.is_empty()), pass.filter(|p| !p.is_empty()))
            }
        };
        let default_port = if kind == "sentinel" { SENTINEL_PORT } else { REDIS_PORT };
        let hosts = hosts.split(',').map(|h| host(h, default_port)).collect::<Result<Vec<_>, _>>()?;
        let mut segments = path.split('/').filter(|s| !s.is_empty());
        let (mode, db) = match kind {
            "" => {
                let [one] = hosts.as_slice() else {
                    return Err(format!(
                        "{} hosts given: a redis:// URL names one server (several sentinels: \
                         redis+sentinel://, cluster nodes: redis+cluster://)",
                        hosts.len()
                    ));
                };
                (Mode::Single(one.clone()), db_of(segments.next())?)
            }
            "sentinel" => {
                let master = segments.next().ok_or_else(|| {
                    "a redis+sentinel:// URL names the master after the sentinels: \
                     redis+sentinel://host:26379/mymaster"
                        .to_owned()
                })?;
                let master = decode(master, "the master name")?;
                (Mode::Sentinel { sentinels: hosts, master }, db_of(segments.next())?)
            }
            _ => {
                if segments.next().is_some_and(|s| s != "0") {
                    return Err("a cluster has only database 0".into());
                }
                (Mode::Cluster(hosts), 0)
            }
        };
        if let Some(extra) = segments.next() {
            return Err(format!("unexpected path segment {extra:?}"));
        }
        let replicas = u32::from(matches!(mode, Mode::Sentinel { .. }));
        let mut target = Target { mode, tls, ca_file: None, user, password: Password::None, db, replicas };
        if let Some(p) = inline {
            target.password = Password::Inline(p);
        }
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            target.option(pair)?;
        }
        target.check()?;
        Ok(target)
    }

    fn option(&mut self, pair: &str) -> Result<(), String> {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = decode(value, name)?;
        if value.is_empty() {
            return Err(format!("option {name} needs a value ({name}=…)"));
        }
        let taken = !matches!(self.password, Password::None);
        match name {
            "ca_file" => self.ca_file = Some(PathBuf::from(value)),
            "password_file" if taken => {
                return Err("two passwords given: one in the URL or a file, or IAM".into());
            }
            "password_file" => self.password = Password::File(PathBuf::from(value)),
            "auth" if value != "iam" => return Err(format!("auth={value}: the only value is iam")),
            "auth" if taken => return Err("auth=iam takes no other password".into()),
            "auth" => self.password = Password::Iam,
            "replicas" => {
                self.replicas = value
                    .parse()
                    .ok()
                    .filter(|n| *n <= 16)
                    .ok_or_else(|| format!("replicas={value}: a number of replicas, 0 to 16"))?
            }
            other => return Err(format!("unknown option {other:?}: expected one of {}", OPTIONS.join(", "))),
        }
        Ok(())
    }

    fn check(&self) -> Result<(), String> {
        if self.ca_file.is_some() && !self.tls {
            return Err("ca_file is for TLS: use rediss://".into());
        }
        if self.password == Password::Iam && !self.tls {
            return Err("auth=iam needs TLS (Memorystore refuses IAM auth without it): use rediss://".into());
        }
        Ok(())
    }

    /// The URL as given, with the password left out (what messages and logs show).
    pub fn redacted(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = if self.tls { "s" } else { "" };
        let (kind, hosts) = match &self.mode {
            Mode::Single(h) => ("", vec![h.clone()]),
            Mode::Sentinel { sentinels, .. } => ("+sentinel", sentinels.clone()),
            Mode::Cluster(nodes) => ("+cluster", nodes.clone()),
        };
        write!(f, "redis{s}{kind}://")?;
        match (&self.user, &self.password) {
            (Some(u), Password::Inline(_)) => write!(f, "{u}:***@")?,
            (None, Password::Inline(_)) => write!(f, ":***@")?,
            (Some(u), _) => write!(f, "{u}@")?,
            (None, _) => {}
        }
        let hosts: Vec<String> = hosts.iter().map(Host::to_string).collect();
        f.write_str(&hosts.join(","))?;
        if let Mode::Sentinel { master, .. } = &self.mode {
            write!(f, "/{master}")?;
        }
        if self.db != 0 {
            write!(f, "/{}", self.db)?;
        }
        let mut options = Vec::new();
        if let Some(ca) = &self.ca_file {
            options.push(format!("ca_file={}", ca.display()));
        }
        match &self.password {
            Password::File(p) => options.push(format!("password_file={}", p.display())),
            Password::Iam => options.push("auth=iam".into()),
            _ => {}
        }
        if self.replicas != u32::from(matches!(self.mode, Mode::Sentinel { .. })) {
            options.push(format!("replicas={}", self.replicas));
        }
        if !options.is_empty() {
            write!(f, "?{}", options.join("&"))?;
        }
        Ok(())
    }
}

fn host(s: &str, default_port: u16) -> Result<Host, String> {
    if s.is_empty() {
        return Err("a host is missing".into());
    }
    let not_a_host = || format!("host {s:?} is not a host name or an address");
    let (host, port) = if let Some(v6) = s.strip_prefix('[') {
        let (h, after) = v6.split_once(']').ok_or_else(not_a_host)?;
        h.parse::<std::net::Ipv6Addr>().map_err(|_| not_a_host())?;
        (h, after.strip_prefix(':'))
    } else {
        let (h, p) = match s.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        };
        if h.is_empty() || !h.chars().all(|c| c.is_ascii_alphanumeric() || "-._".contains(c)) {
            return Err(not_a_host());
        }
        (h, p)
    };
    let port = match port {
        None => default_port,
        Some(p) => p.parse().ok().filter(|p| *p > 0).ok_or_else(|| format!("port {p:?} is not a port"))?,
    };
    Ok(Host { host: host.to_owned(), port })
}

fn db_of(segment: Option<&str>) -> Result<i64, String> {
    match segment {
        None => Ok(0),
        Some(s) => s
            .parse()
            .ok()
            .filter(|d| (0..=1_000_000).contains(d))
            .ok_or_else(|| format!("database {s:?} is not a number")),
    }
}

/// Percent-decodes `s` (what URLs escape in a user, password or path), refusing a bad escape.
fn decode(s: &str, what: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok());
            out.push(hex.ok_or_else(|| format!("{what}: a bad %-escape"))?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{what}: not UTF-8 once %-decoded"))
}

#[cfg(test)]
mod tests;
