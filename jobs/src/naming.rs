//! How VMs and their incarnations are named, in one place: a VM id is `<prefix>-<index>`, an
//! incarnation's hostname (instance name and bot id) is `<id>-<4 chars>`, new for each one.

use rand::Rng;

/// The id of VM `index` of Config `prefix`.
pub fn vm_id(prefix: &str, index: u32) -> String {
    format!("{prefix}-{index}")
}

/// Splits `<prefix>-<index>`.
pub fn parse_id(id: &str) -> Option<(&str, u32)> {
    let (prefix, index) = id.rsplit_once('-')?;
    Some((prefix, index.parse().ok()?))
}

/// A fresh hostname for an incarnation of VM `id`.
pub fn new_hostname(id: &str) -> String {
    let chars = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    let suffix: String = (0..4).map(|_| chars[rng.random_range(0..chars.len())] as char).collect();
    format!("{id}-{suffix}")
}

/// The VM id a hostname `<prefix>-<index>-<4 chars>` was made for, if it has that shape.
pub fn vm_id_of(hostname: &str) -> Option<&str> {
    let (id, suffix) = hostname.rsplit_once('-')?;
    let ok = suffix.len() == 4 && suffix.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    (ok && parse_id(id).is_some()).then_some(id)
}

#[cfg(test)]
mod tests;
