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
mod tests {
    use super::*;

    #[test]
    fn ids_and_hostnames_round_trip() {
        assert_eq!(parse_id(&vm_id("linux-x", 12)), Some(("linux-x", 12)));
        assert_eq!(parse_id("garbage"), None);
        let h = new_hostname("linux-12");
        assert!(h.starts_with("linux-12-") && h.len() == "linux-12-".len() + 4);
        assert_eq!(vm_id_of(&h), Some("linux-12"));
        assert_eq!(vm_id_of("linux-x-12-0000"), Some("linux-x-12"));
        assert_eq!(vm_id_of("linux-12"), None);
        assert_eq!(vm_id_of("linux-ab-cdef"), None);
        assert_eq!(vm_id_of("build42"), None);
    }
}
