//! ListBots cursors: opaque, opened only by the server that sealed them, for ListBots.

use super::*;

#[test]
fn a_cursor_opens_to_its_bot_on_its_server_only() {
    let c = seal_bots("swarm.example.com", "vm-1");
    assert!(!c.contains("vm-1"), "{c}");
    let raw = B64.decode(&c).expect("URL-safe base64 without padding");
    assert!(!raw.windows(4).any(|w| w == b"vm-1"), "the bot id is not readable in {c}");
    assert_eq!(c, seal_bots("swarm.example.com", "vm-1"), "the same page end, the same cursor");
    assert_eq!(open_bots("swarm.example.com", &c).as_deref(), Some("vm-1"));
    assert_eq!(open_bots("other.example.com", &c), None, "another server's cursor");

    let mut tampered = raw.clone();
    *tampered.last_mut().unwrap() ^= 1;
    for bad in ["", "vm-1", "1", "!!", &B64.encode(tampered), &B64.encode(&raw[..NONCE_LEN])] {
        assert_eq!(open_bots("swarm.example.com", bad), None, "{bad:?}");
    }
}
