//! Unit tests of YAML written for YAML 1.1 readers too: which plain scalars they misread, and
//! the quoting of exactly those (keys too), block scalars left alone.

use super::yaml11::{misread, quote};
use crate::config::Config;

#[test]
fn yaml_1_1_misreads_base_60_booleans_numbers_and_dates() {
    for s in [
        "8:00",
        "23:59",
        "1:30:00",
        "yes",
        "No",
        "ON",
        "off",
        "y",
        "N",
        "~",
        "null",
        "",
        "1_000",
        "017",
        "0b101",
        "0x1F",
        "-1",
        "+3",
        "1.5",
        ".5",
        "1e3",
        "6.02e+23",
        ".inf",
        "-.inf",
        ".NaN",
        "2024-01-01",
        "2024-1-1 10:00:00",
        "<<",
    ] {
        assert!(misread(s), "{s:?}");
    }
    for s in
        ["1d", "10m", "90s", "2mo", "8h", "ci", "linux", "1.2.3", "e5", "abc:def", "v1_2", "n1-standard-2"]
    {
        assert!(!misread(s), "{s:?}");
    }
}

#[test]
fn plain_strings_a_yaml_1_1_reader_misreads_are_quoted_keys_too_and_nothing_else() {
    let text = "time: 8:00\nlabel:\n  on: 1_000\n  team: ci\nmin: 3\nflag: true\nlist:\n- 12:30\n- '0777'\n";
    let want =
        "time: '8:00'\nlabel:\n  'on': '1_000'\n  team: ci\nmin: 3\nflag: true\nlist:\n- '12:30'\n- '0777'\n";
    assert_eq!(quote(text), want);
    // The text of a block scalar is the string itself: left alone, to its end.
    let script = "metadata:\n- from_text: |-\n    run: 8:00\n    yes\n  other: 8:00\n- 9:00\n";
    assert_eq!(
        quote(script),
        "metadata:\n- from_text: |-\n    run: 8:00\n    yes\n  other: '8:00'\n- '9:00'\n"
    );
}

#[test]
fn configs_written_as_yaml_read_back_the_same_with_misread_strings_quoted() {
    let mut c = crate::testing::config("pool", 1);
    c.attributes.label.insert("on".into(), "1_000".into());
    c.attributes.label.insert("since".into(), "2024-01-01".into());
    c.attributes.metadata = vec![crate::config::Metadata::text("startup-script:#!/bin/sh\necho 8:00\nyes\n")];
    c.amount.change = crate::config::Config::parse(crate::config::tests::YAML, "t").unwrap().amount.change;
    let yaml = Config::to_yaml_all(std::slice::from_ref(&c)).unwrap();
    for quoted in ["'on': '1_000'", "since: '2024-01-01'", "time: '9:00'"] {
        assert!(yaml.contains(quoted), "{quoted}:\n{yaml}");
    }
    assert!(yaml.contains("\n      echo 8:00\n      yes\n"), "the script as it is:\n{yaml}");
    assert_eq!(Config::parse_all(&yaml, "t").unwrap(), [c]);
}
