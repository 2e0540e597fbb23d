//! Unit tests of `config/mistakes.rs`.

use super::*;
use crate::config::Config;

const GOOD: &str = "prefix: web\namount: {min: 1, max: 2}\nlifetime: 1d\ntimeout: 10m\n";

#[test]
fn every_mistake_of_a_document_is_named_at_once_by_its_path_quoting_no_value() {
    let text = GOOD
        .replace("min: 1", "min: s3cret-a")
        .replace("lifetime: 1d", "lifetime: s3cret-b\nbogus: 1\nattributes: {zone: [s3cret-c]}");
    let e = Config::parse(&text, "web.yaml").unwrap_err().to_string();
    assert!(e.contains("4 mistakes: "), "{e}");
    for path in ["amount.min", "lifetime", "bogus", "attributes.zone"] {
        assert!(e.contains(&format!("{path}: ")) || e.contains(&format!("`{path}`")), "{path} in {e}");
    }
    assert!(e.contains("at line 2"), "the first keeps its line: {e}");
    assert!(!e.contains("s3cret"), "{e}");
}

#[test]
fn one_mistake_reads_as_before_and_text_that_is_not_yaml_has_one() {
    let e = Config::parse(&GOOD.replace("min: 1", "min: x"), "web.yaml").unwrap_err().to_string();
    assert!(!e.contains("mistakes"), "{e}");
    assert!(e.contains("amount.min") && e.contains("line 2"), "{e}");
    let e = Config::parse("prefix: web\namount: {min: [\n", "web.yaml").unwrap_err().to_string();
    assert!(e.contains("cannot parse") && !e.contains("mistakes"), "{e}");
    assert!(Config::parse(GOOD, "web.yaml").is_ok());
}

#[test]
fn a_document_of_many_mistakes_names_at_most_the_bound() {
    let many: String = (0..3 * MAX_MISTAKES).map(|i| format!("extra{i}: 1\n")).collect();
    let e = Config::parse(&format!("{GOOD}{many}"), "web.yaml").unwrap_err().to_string();
    assert!(e.contains(&format!("{MAX_MISTAKES} mistakes: ")), "{e}");
}

#[test]
fn an_unknown_field_is_named_by_its_path_with_the_fields_of_its_place_and_its_line() {
    let text = format!("{GOOD}attributes:\n  project: p\n  zone: z\n  labls: {{a: b}}\n");
    let e = Config::parse(&text, "web.yaml").unwrap_err().to_string();
    assert!(e.contains("attributes.labls: unknown field `labls`, expected one of "), "{e}");
    assert!(e.contains("`label`") && e.contains("`machine_type`") && !e.contains("`lifetime`"), "{e}");
    assert!(e.contains("at line 8"), "the line of the key, not of its mapping: {e}");
    // At the top, and among other mistakes: each named once, by its path.
    let e = Config::parse(&GOOD.replace("lifetime: 1d", "lifetime: x\namout: 2"), "web.yaml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("2 mistakes") && e.contains("amout: unknown field `amout`, expected one of"), "{e}");
    assert!(e.contains("`amount`"), "{e}");
}
