//! Dimension parsing and matching.

use super::*;
use serde_json::json;

#[test]
fn parses_strings_lists_and_alternatives() {
    let d = parse(&json!({"pool": "ci", "os": ["Linux", "Mac|Win"]}), "t").unwrap();
    assert_eq!(d["os"], vec!["Linux", "Mac", "Win"]);
    assert!(parse(&json!({"pool": 1}), "t").is_err());
    assert!(parse(&json!({"1bad": "x"}), "t").is_err());
    assert!(parse(&json!({"pool": ""}), "t").is_err());
}

#[test]
fn a_task_matches_a_bot_with_a_superset() {
    let bot = parse(&json!({"pool": "ci", "os": ["Linux", "Ubuntu"], "id": "b"}), "b").unwrap();
    assert!(matches(&parse(&json!({"pool": "ci", "os": "Mac|Linux"}), "t").unwrap(), &bot));
    assert!(!matches(&parse(&json!({"pool": "ci", "os": "Mac"}), "t").unwrap(), &bot));
    assert!(!matches(&parse(&json!({"gpu": "none"}), "t").unwrap(), &bot));
    let f = Filter::tags(&["os:Mac|Ubuntu".into(), "pool:ci".into()]).unwrap();
    assert!(f.matches(&bot));
    assert!(Filter::tags(&["nocolon".into()]).is_err());
}
