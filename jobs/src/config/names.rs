//! The shapes of a Config's names and values: resource names, DNS names, project ids, resource
//! paths, emails, endpoint URLs, the ranges of durations and counts, and when two prefixes clash.
//! Pure rules, used by the Config's own validation and by the settings' trust.

use super::units::Secs;

/// A valid Compute Engine resource name: `[a-z]([-a-z0-9]*[a-z0-9])?`, at most 63 characters.
pub fn valid_gce_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_lowercase()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[b.len() - 1] != b'-'
}

pub(super) fn valid_label(s: &str, key: bool) -> bool {
    s.len() <= 63
        && (!key || s.as_bytes().first().is_some_and(u8::is_ascii_lowercase))
        && s.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'_')
}

/// A lower-case DNS name or hostname (or dotted IPv4 address): labels of `[a-z0-9-]`, 1-63 each, 253 in all.
pub fn valid_host(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
}

/// The ranges of a Config's durations and counts (beyond them a Config is refused).
pub mod bounds {
    use crate::config::units::Secs;

    /// Longest `lifetime`: a year.
    pub const LIFETIME: Secs = Secs(365 * 86_400);
    /// Longest `timeout`: a day.
    pub const TIMEOUT: Secs = Secs(86_400);
    /// Longest `breaker.within` and `breaker.canary_after`: a day.
    pub const BREAKER_WAIT: Secs = Secs(86_400);
    /// Most `breaker.after`.
    pub const BREAKER_AFTER: u32 = 1_000;
    /// Most `spot_failover.more_than`.
    pub const SPOT_EVENTS: u32 = 100;
    /// Longest `spot_failover.within`: a day.
    pub const SPOT_WITHIN: Secs = Secs(86_400);
    /// Longest `spot_failover.cooldown`: a week.
    pub const SPOT_COOLDOWN: Secs = Secs(7 * 86_400);
    /// Most `update.max_surge` and `update.max_unavailable`.
    pub const SURGE: u32 = 10_000;
    /// Largest disk, in GB (Compute Engine's largest persistent disk).
    pub const DISK_GB: u64 = 65_536;
}

/// A duration as days when whole, else seconds.
pub(super) fn days(s: Secs) -> String {
    match s.0 % 86_400 {
        0 => format!("{}d", s.0 / 86_400),
        _ => format!("{}s", s.0),
    }
}

/// A GCP project id: 6-30 characters of `[a-z0-9-]`, starting with a letter and not ending in
/// `-`, optionally after a domain and a colon (`google.com:chromecompute`).
pub fn valid_project(project: &str) -> bool {
    let (domain, id) = match project.split_once(':') {
        Some((d, id)) => (Some(d), id),
        None => (None, project),
    };
    let domain_ok = domain.is_none_or(|d| d.len() <= 63 && d.contains('.') && valid_host(d));
    domain_ok && (6..=30).contains(&id.len()) && valid_gce_name(id)
}

/// A Compute resource path or URL as a Config names it (`zones/{{.Zone}}/machineTypes/x`,
/// `projects/p/global/images/family/f`, `https://www.googleapis.com/compute/v1/...`): no
/// characters that would change a request's path (`..`, `%`, `?`, `#`, spaces, non-ASCII).
pub(super) fn resource_path(value: &str) -> Result<(), String> {
    let bad = value.chars().find(|c| !(c.is_ascii_alphanumeric() || "-_./{}:".contains(*c)));
    if let Some(c) = bad {
        return Err(format!("must not hold {c:?}: letters, digits and - _ . / {{ }} : only"));
    }
    if value.split('/').any(|seg| seg == ".." || seg == ".") {
        return Err("must not hold . or .. segments".into());
    }
    Ok(())
}

/// An email address as service accounts have them: `name@domain`, ASCII, no spaces.
pub(super) fn valid_email(email: &str) -> bool {
    match email.split_once('@') {
        Some((name, domain)) => {
            !name.is_empty()
                && email.len() <= 254
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b))
                && domain.contains('.')
                && domain.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-.".contains(&b))
        }
        None => false,
    }
}

/// The rule across Configs for two different prefixes: they clash when one is a prefix of the
/// other (VM ids and hostnames of one would be read as the other's).
pub fn prefixes_clash(a: &str, b: &str) -> bool {
    a != b && (a.starts_with(b) || b.starts_with(a))
}

/// An endpoint the operator gives (`--gce-endpoint`, `--certs-url`, `--root-url`, the Swarming
/// endpoint template): an http(s) URL that names a host, with no user, query, fragment or space.
pub fn check_endpoint(what: &str, url: &str) -> Result<(), String> {
    let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://"));
    let authority = rest.map(|r| r.split('/').next().unwrap_or_default());
    match authority {
        None => Err(format!("{what} {url:?}: must be an http:// or https:// URL")),
        Some(a) if a.is_empty() || a.contains('@') => {
            Err(format!("{what} {url:?}: must name a host, without a user or password"))
        }
        Some(_) if url.contains(['?', '#']) || url.chars().any(|c| c.is_whitespace() || c.is_control()) => {
            Err(format!("{what} {url:?}: must have no query, fragment or spaces"))
        }
        Some(_) => Ok(()),
    }
}
