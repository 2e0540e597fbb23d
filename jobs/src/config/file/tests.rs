//! Unit tests of a `vms.cfg` written as YAML: durations as the file wrote them, times quoted, and
//! the text read the same by our reader and by a YAML 1.1 one (PyYAML).

use super::*;
use crate::config::luci::tests::VMS_CFG;

/// The Python interpreter with PyYAML: `$GCE_BACKEND_PYTHON` (scripts/test's venv), else
/// `python3`.
fn python() -> String {
    let name = std::env::var("GCE_BACKEND_PYTHON").unwrap_or_else(|_| "python3".into());
    let found = std::process::Command::new(&name)
        .args(["-c", "import yaml"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(found, "{name} cannot import yaml (PyYAML): scripts/test installs it (scripts/requirements.txt)");
    name
}

/// Every document of `text` as PyYAML (YAML 1.1) reads it, as JSON.
fn pyyaml(text: &str) -> serde_json::Value {
    use std::io::Write as _;
    let script = "import json, sys, yaml\nprint(json.dumps(list(yaml.safe_load_all(sys.stdin))))";
    let mut child = std::process::Command::new(python())
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "PyYAML could not read:\n{text}");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_vms_cfg_as_yaml_keeps_its_durations_quotes_its_times_and_reads_back_the_same() {
    let all = parse(VMS_CFG, "vms.cfg", true).unwrap();
    let yaml = to_yaml(&all).unwrap();
    // As written: `duration: "1d"` is 1d, `seconds: 600` stays 600.
    for written in ["lifetime: 1d", "length: 8h", "timeout: 600", "lifetime: 43200", "lifetime: 2h"] {
        assert!(
            yaml.contains(&format!("\n{written}\n")) || yaml.contains(&format!(" {written}\n")),
            "{written}:\n{yaml}"
        );
    }
    assert!(!yaml.contains("86400"), "{yaml}");
    // A time is quoted: unquoted, a YAML 1.1 reader takes 9:00 for 540.
    assert!(yaml.contains("time: '9:00'"), "{yaml}");
    // Our reader: the same Configs.
    let configs: Vec<Config> = all.into_iter().map(|(c, _)| c).collect();
    assert_eq!(Config::parse_all(&yaml, "out.yaml").unwrap(), configs);
    // A YAML 1.1 reader: the same values as ours, document by document.
    let ours: Vec<serde_json::Value> = yaml
        .split("---\n")
        .map(|doc| serde_json::to_value(yaml_serde::from_str::<yaml_serde::Value>(doc).unwrap()).unwrap())
        .collect();
    let theirs = pyyaml(&yaml);
    assert_eq!(theirs, serde_json::Value::Array(ours));
    assert_eq!(theirs[0]["amount"]["change"][0]["start"]["time"], "9:00");
    assert_eq!(theirs[0]["lifetime"], "1d");
}

#[test]
fn a_duration_is_written_as_seconds_unless_its_text_reads_as_the_same() {
    let mut all = parse(VMS_CFG, "vms.cfg", true).unwrap();
    // The Config changed after reading (its text no longer says its value): seconds.
    all[0].0.lifetime = Secs(7200);
    let yaml = to_yaml(&all[..1]).unwrap();
    assert!(yaml.contains("\nlifetime: 7200\n"), "{yaml}");
    assert!(yaml.contains("length: 8h"), "{yaml}");
}
