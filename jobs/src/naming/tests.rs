//! Unit tests of `naming.rs`.

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
