//! Unit tests of `adapters/gce.rs`.

use super::segments;

#[test]
fn only_plain_segments_reach_a_request_path() {
    assert!(segments(&["google.com:chromecompute", "us-central1-b", "linux-0-abcd"]).is_ok());
    for bad in ["a%2Fb", "a/b", "..", "", "x?alt=json", "A", "x\u{202e}"] {
        assert!(segments(&["my-proj", bad]).is_err(), "{bad:?}");
    }
}
