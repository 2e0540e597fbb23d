//! Task ids: 128 random bits as 22 characters of URL-safe base64 without padding (Taskcluster's
//! slugid), made by the queue so no one can guess or overwrite another's task.
//!
//! [`new_task_id`] is the one place ids are made. The memory engine uses it for each new task;
//! the Redis engine passes its ids to the scripts (one per pushed item and per ack, plus a seed
//! for the few tasks a script makes on its own: see `lua/prelude.lua`). Ids are opaque strings:
//! records written before ids were random carry decimal ids, which stay valid.

use rand::RngCore;

/// The URL-safe base64 alphabet (RFC 4648 §5).
const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// A fresh task id: 128 bits from the thread's CSPRNG, as 22 characters of `[A-Za-z0-9_-]`.
pub fn new_task_id() -> String {
    let mut bytes = [0u8; 16];
    rand::rng().fill_bytes(&mut bytes);
    slug(&bytes)
}

/// URL-safe base64 of `bytes`, unpadded: 4 characters per 3 bytes, 2 for a last single byte.
fn slug(bytes: &[u8; 16]) -> String {
    let mut out = String::with_capacity(22);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
        }
    }
    out
}

#[cfg(test)]
mod tests;
