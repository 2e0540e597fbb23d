//! Unit tests of `engine/id.rs`.

use std::collections::HashSet;

use super::*;

#[test]
fn slug_is_unpadded_url_safe_base64() {
    let counting: [u8; 16] = std::array::from_fn(|i| i as u8);
    assert_eq!(slug(&counting), "AAECAwQFBgcICQoLDA0ODw");
    assert_eq!(slug(&[0xff; 16]), "_____________________w");
    let mut high = [0u8; 16];
    high[..3].copy_from_slice(&[0xfb, 0xef, 0xbe]);
    assert_eq!(slug(&high), "----AAAAAAAAAAAAAAAAAA");
}

#[test]
fn new_ids_are_22_url_safe_characters_and_distinct() {
    let ids: HashSet<String> = (0..10_000).map(|_| new_task_id()).collect();
    assert_eq!(ids.len(), 10_000);
    for id in &ids {
        assert_eq!(id.len(), 22, "{id}");
        assert!(id.bytes().all(|b| ALPHABET.contains(&b)), "{id}");
    }
}
