//! Names and the rules about them, shared by the configuration, the world and the routes: zones
//! and regions, resource names, hostnames, Swarming server keys, and the metadata items the
//! simulated agent reads.

/// The region of a zone: `us-central1-b` → `us-central1`.
pub fn region_of(zone: &str) -> &str {
    zone.rsplit_once('-').map_or(zone, |(r, _)| r)
}

/// A valid Compute Engine resource name: `[a-z]([-a-z0-9]*[a-z0-9])?`, at most 63 characters
/// (the simulator's own rule, so it checks the service rather than sharing its code).
pub fn valid_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_lowercase()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[b.len() - 1] != b'-'
}

/// The host of a Swarming server URL: `https://x.appspot.com/` → `x.appspot.com`.
pub fn server_key(url: &str) -> String {
    let s = url.trim();
    let s = s.strip_prefix("https://").or_else(|| s.strip_prefix("http://")).unwrap_or(s);
    s.trim_end_matches('/').to_owned()
}

/// A hostname: letters, digits, `-` and `.`, at most 253 characters.
pub fn valid_hostname(h: &str) -> bool {
    !h.is_empty() && h.len() <= 253 && h.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'.')
}

/// The Config an instance belongs to, by the service's naming (`<prefix>-<index>-<suffix>`):
/// `ci-linux-3-ab12` → `ci-linux`. Names not so made are grouped together under `""` (so the
/// number of groups stays the number of Configs, however instances are named).
pub fn config_of(name: &str) -> &str {
    let mut parts = name.rsplitn(3, '-');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(_), Some(index), Some(prefix))
            if !index.is_empty() && !prefix.is_empty() && index.bytes().all(|c| c.is_ascii_digit()) =>
        {
            prefix
        }
        _ => "",
    }
}

/// The metadata item naming where the agent registers.
pub const REGISTER_URL: &str = "register-url";
/// The metadata item naming the audience of its token, when not the URL's root.
pub const REGISTER_AUDIENCE: &str = "register-audience";

/// The audience of a registration URL: `ROOT` of `ROOT/api/...`, else the URL itself.
pub fn audience(url: &str) -> &str {
    url.find("/api/").map_or(url, |i| &url[..i])
}
