//! Swarming's ListBots cursors: opaque to the caller, as Swarming's are (its `cursor` package
//! encrypts a `Cursor` proto holding the last bot id, URL-safe base64 without padding). Here the
//! last bot id and the request kind are sealed with AES-256-GCM under a fixed key, the server's
//! host bound in as associated data: a cursor that was not issued by that server for ListBots
//! does not open.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::digest::{SHA256, digest};

/// Swarming's `RequestKind.LIST_BOTS`, the first byte of a sealed ListBots cursor.
const LIST_BOTS: u8 = 3;

/// The associated data of `server`'s cursors (Swarming's AEAD context, then the server).
fn aad(server: &str) -> Vec<u8> {
    [b"swarming-cursor\0".as_slice(), server.as_bytes()].concat()
}

/// The fixed sealing key (not a secret: it only keeps cursors opaque).
fn key() -> LessSafeKey {
    let k = digest(&SHA256, b"gce-backend-sim: Swarming cursors");
    LessSafeKey::new(UnboundKey::new(&AES_256_GCM, k.as_ref()).expect("a 32-byte key"))
}

/// The cursor of a ListBots page of `server` that ended at bot `last_bot_id`. The same bot gives
/// the same cursor (its nonce is derived from what it seals).
pub(crate) fn seal_bots(server: &str, last_bot_id: &str) -> String {
    let mut plain = vec![LIST_BOTS];
    plain.extend_from_slice(last_bot_id.as_bytes());
    let seed = digest(&SHA256, &[aad(server).as_slice(), b"\0", &plain].concat());
    let nonce: [u8; NONCE_LEN] = seed.as_ref()[..NONCE_LEN].try_into().expect("12 bytes");
    key()
        .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(aad(server)), &mut plain)
        .expect("sealing into memory cannot fail");
    B64.encode([nonce.as_slice(), &plain].concat())
}

/// The last bot id sealed in `cursor`, if `server` issued it for ListBots.
pub(crate) fn open_bots(server: &str, cursor: &str) -> Option<String> {
    let raw = B64.decode(cursor).ok()?;
    if raw.len() < NONCE_LEN {
        return None;
    }
    let (nonce, sealed) = raw.split_at(NONCE_LEN);
    let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
    let mut sealed = sealed.to_vec();
    let plain = key().open_in_place(nonce, Aad::from(aad(server)), &mut sealed).ok()?;
    match plain.split_first() {
        Some((&LIST_BOTS, id)) => String::from_utf8(id.to_vec()).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
