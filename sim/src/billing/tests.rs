//! Page tokens: a token opens only for the list it was issued for.

use super::{open_token, token};

#[test]
fn a_token_opens_for_its_own_list_only() {
    let t = token("skus/6F81-5844-456A", 7);
    assert_eq!(open_token("skus/6F81-5844-456A", &t), Some(7));
    assert_eq!(open_token("services", &t), None);
    assert_eq!(open_token("skus/6F81-5844-456A", "garbage"), None);
    assert_eq!(open_token("skus/6F81-5844-456A", &t[1..]), None);
}
