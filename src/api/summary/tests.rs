//! Unit tests of `api/summary.rs`.

use super::*;

#[test]
fn the_first_of_a_reason_is_logged_then_a_minute_of_them_is_one_count() {
    let s = Summary::new("thing refused");
    assert!(s.note("a", Level::WARN, String::new));
    for _ in 0..1999 {
        assert!(!s.note("a", Level::WARN, || unreachable!("not formatted when only counted")));
    }
    assert!(s.note("b", Level::DEBUG, String::new), "each reason on its own");
    assert_eq!(s.flush(), [("a", 1999)], "b came once: logged already, nothing more to say");
    // Still flooding: one line a minute, none at once.
    assert!(!s.note("a", Level::WARN, String::new));
    assert!(s.note("b", Level::DEBUG, String::new), "b was quiet for a minute: at once again");
    assert_eq!(s.flush(), [("a", 1)]);
    // A quiet minute: a is forgotten, and its next one is logged at once.
    assert_eq!(s.flush(), []);
    assert!(s.note("a", Level::WARN, String::new));
}
