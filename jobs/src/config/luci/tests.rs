//! Unit tests of `vms.cfg` reading: LUCI's shapes, the field map, refused fields with their
//! block and line, every mistake of a file in one pass, and the round trips YAML → text proto →
//! YAML and back.

use super::*;
use crate::config::{Day, Metadata, Scheduling, Secs, ServiceAccount};

/// Three blocks in the shapes LUCI's own tests use: a domain-scoped project, `from_file`
/// metadata, a weekly schedule, `< >` delimiters and both quotes.
pub(crate) const VMS_CFG: &str = r#"# Pools of the CI.
vms {
  prefix: "linux"
  amount {
    min: 1
    max: 4
    change {
      start { day: MONDAY time: "9:00" location: "America/Los_Angeles" }
      length { duration: "8h" }
      min: 3
      max: 4
    }
  }
  attributes {
    project: "google.com:chromium-ci"
    zone: "us-central1-b"
    machine_type: "zones/{{.Zone}}/machineTypes/n1-standard-2"
    disk {
      image: "global/images/ubuntu"
      size: 100
      type: "zones/{{.Zone}}/diskTypes/pd-ssd"
      interface: SCSI
    }
    network_interface {
      network: "global/networks/default"
      access_config { type: ONE_TO_ONE_NAT }
    }
    metadata { from_text: 'startup:echo "hi"' }
    metadata < from_file: "token:metadata/token.txt" >
    service_account {
      email: "bot@chromium-ci.iam.gserviceaccount.com"
      scope: "https://www.googleapis.com/auth/cloud-platform"
    }
    tag: "bots"
    label { key: "pool" value: "ci" }
    scheduling { node_affinity { key: "group" operator: IN values: "sole" } }
    enable_secure_boot: true
    gcp_channel: GCP_CHANNEL_STABLE
  }
  lifetime { duration: "1d" }
  timeout { seconds: 600 }
  swarming: "https://swarm.example.com"
  owner: "chrome-ops"
}
vms {
  prefix: "win"
  amount { min: 0 max: 2 }
  attributes {
    project: "example.com:win-bots"
    zone: "us-east1-c"
    machine_type: "n1-standard-8"
    disk { image: "projects/windows-cloud/global/images/win-2019" size: 200 }
    network_interface { network: "global/networks/default" }
  }
  lifetime { seconds: 43200 }
  swarming: "https://swarm.example.com"
}
vms: <
  prefix: "mac"
  amount: < max: 1 >
  attributes: <
    project: "mac-bots-123"
    zone: "us-west1-a"
    machine_type: "n2-standard-4"
    disk: < image: "global/images/mac" >
    network_interface: < >
  >
  lifetime: < duration: "2h" >
  swarming: "https://swarm.example.com"
>
"#;

#[test]
fn every_block_is_a_config_with_luci_fields_mapped() {
    let all = parse_vms(VMS_CFG, "vms.cfg").unwrap();
    let prefixes: Vec<&str> = all.iter().map(|(c, _)| c.prefix.as_str()).collect();
    assert_eq!(prefixes, ["linux", "win", "mac"]);
    assert_eq!(all.iter().map(|(_, at)| at.line).collect::<Vec<_>>(), [2, 45, 58]);
    let (c, _) = &all[0];
    assert_eq!((c.amount.min, c.amount.max), (1, 4));
    let s = &c.amount.change[0];
    assert_eq!(
        (s.start.day, s.start.time.as_str(), s.length, s.min),
        (Day::Monday, "9:00", Secs(8 * 3600), 3)
    );
    assert_eq!(s.start.location, "America/Los_Angeles");
    let a = &c.attributes;
    assert_eq!(a.project, "google.com:chromium-ci");
    assert_eq!((a.disk[0].size, a.disk[0].interface.as_str()), (100, "SCSI"));
    assert_eq!(a.network_interface[0].access_config[0].kind, "ONE_TO_ONE_NAT");
    assert_eq!(a.metadata[0], Metadata::text("startup:echo \"hi\""));
    assert_eq!(a.metadata[1].from_file.as_deref(), Some("token:metadata/token.txt"));
    assert_eq!(a.label["pool"], "ci");
    assert_eq!(a.scheduling.as_ref().unwrap().node_affinity[0].values, ["sole"]);
    assert!(a.enable_secure_boot && !a.disable_vtpm);
    assert_eq!((c.lifetime, c.timeout), (Secs(86_400), Secs(600)));
    assert_eq!(c.owner, ["chrome-ops"]);
    assert_eq!(all[1].0.lifetime, Secs(43_200));
    assert_eq!(all[2].0.attributes.network_interface.len(), 1);
    for (c, _) in &all {
        c.validate().unwrap();
    }
}

/// Every mistake `parse_vms` finds in `text`.
fn errors(text: &str) -> Vec<String> {
    parse_vms(text, "vms.cfg").unwrap_err().all().iter().map(ToString::to_string).collect()
}

/// The one mistake `parse_vms` finds in `text`.
fn error(text: &str) -> String {
    let all = errors(text);
    assert_eq!(all.len(), 1, "{all:#?}");
    all[0].clone()
}

#[test]
fn a_field_this_service_cannot_honour_names_the_block_the_field_and_the_line() {
    let block = |extra: &str| {
        format!("vms {{\n  prefix: \"linux\"\n  attributes {{\n    {extra}\n  }}\n  {SWARMING}\n}}\n")
    };
    let cases = [
        ("gcp_channel: GCP_CHANNEL_ALPHA", "attributes.gcp_channel"),
        ("performance_monitoring_unit: STANDARD", "attributes.performance_monitoring_unit"),
        ("force_send_fields: \"Zone\"", "attributes.force_send_fields"),
        ("guest_accelerator { }", "attributes.guest_accelerator"),
        ("disk { image: \"x\" boot: true }", "attributes.disk[0].boot"),
        ("zone: \"a\"\n    zone: \"b\"", "attributes.zone"),
        ("disk { size: -1 }", "attributes.disk[0].size"),
    ];
    for (extra, path) in cases {
        let e = error(&block(extra));
        let line = if extra.contains('\n') { 5 } else { 4 };
        assert!(e.starts_with(&format!("vms.cfg:{line}: vms block \"linux\" (line 1): {path}: ")), "{e}");
    }
    for (field, why) in [
        ("duts { key: \"d\" value {} }", "CloudBots"),
        ("current_amount: 3", "configs amount"),
        ("revision: \"abc\"", "set by the server"),
        ("swarming_pools: \"p\"", "informational"),
        ("amount { default: 3 }", "reserved"),
    ] {
        let e = error(&format!("vms {{\n  prefix: \"p\"\n  {field}\n  {SWARMING}\n}}"));
        assert!(e.starts_with("vms.cfg:3: vms block \"p\" (line 1): "), "{e}");
        assert!(e.contains(why), "{e}");
    }
    // Defaults of server-set fields take nothing away: accepted.
    parse_vms(&format!("vms {{ prefix: \"p\" current_amount: 0 revision: \"\" {SWARMING} }}"), "f").unwrap();
}

/// The server line the blocks of these tests need.
const SWARMING: &str = "swarming: \"https://swarm.example.com\"";

#[test]
fn file_level_errors_say_where() {
    assert!(error("").contains("holds no vms block"));
    assert!(error("# only a comment\n").contains("holds no vms block"));
    assert!(error("kinds { }").starts_with("vms.cfg:1: kinds is not a field"));
    assert!(error("vms: 1").contains("vms must be a message"));
    let twice = format!("vms {{ prefix: \"a\" {SWARMING} }}\n\nvms {{ prefix: \"a\" {SWARMING} }}");
    assert!(
        error(&twice)
            .starts_with("vms.cfg:3: vms block \"a\" (line 3): prefix also in the vms block at line 1")
    );
    let said = |text: &str, what: &str| errors(text).iter().any(|e| e.contains(what));
    assert!(said(
        "vms {\n  prefix: \"a\"\n  lifetime { duration: \"1d\" seconds: 5 }\n}",
        "vms.cfg:3: vms block \"a\" (line 1): lifetime: exactly one of duration or seconds"
    ));
    assert!(said("vms { amount { change { min: 1 } } }", "amount.change[0].start: is required"));
    assert_eq!(
        error("vms {\n  prefix: 'a'\n  attributes {\n"),
        "vms.cfg:4: the text ends before the closing }"
    );
}

#[test]
fn validation_errors_are_placed_on_the_field_line() {
    let (c, at) = parse_vms(VMS_CFG, "vms.cfg").unwrap().remove(1);
    let mut bad = c.clone();
    bad.attributes.disk[0].kind = "pd-ssd".into();
    let e = bad.validate().unwrap_err();
    assert_eq!(e.field, "win.attributes.disk[0].type");
    let e = at.explain("vms.cfg", &c.prefix, e).to_string();
    assert!(e.starts_with("vms.cfg:52: vms block \"win\" (line 45): win.attributes.disk[0].type: "), "{e}");
    // A field that is not written falls back to its nearest written parent, or the block.
    assert_eq!(at.line_of("win", "win.attributes.zone"), 50);
    assert_eq!(at.line_of("win", "win.timeout"), 45);
    assert_eq!(at.line_of("win", "win.attributes.label.x"), 48);
}

#[test]
fn yaml_to_text_proto_to_yaml_is_the_same() {
    let configs: Vec<Config> = parse_vms(VMS_CFG, "vms.cfg").unwrap().into_iter().map(|(c, _)| c).collect();
    let yaml = Config::to_yaml_all(&configs).unwrap();
    let from_yaml = Config::parse_all(&yaml, "all.yaml").unwrap();
    assert_eq!(from_yaml, configs);
    let cfg = to_text_proto(&from_yaml).unwrap();
    let back: Vec<Config> = parse_vms(&cfg, "back.cfg").unwrap().into_iter().map(|(c, _)| c).collect();
    assert_eq!(back, configs);
    // And the test pool the rest of the tests use.
    let c = crate::testing::config("pool", 3);
    let again = parse_vms(&to_text_proto(std::slice::from_ref(&c)).unwrap(), "t").unwrap();
    assert_eq!(again[0].0, c);
}

#[test]
fn strings_survive_the_round_trip_whatever_they_hold() {
    let mut c = crate::testing::config("pool", 1);
    c.attributes.metadata = vec![Metadata::text("script:#!/bin/sh\necho \"$HOME\" 'q' \\ é\t😀")];
    let back = parse_vms(&to_text_proto(std::slice::from_ref(&c)).unwrap(), "t").unwrap();
    assert_eq!(back[0].0, c);
}

#[test]
fn a_config_luci_cannot_express_is_not_written() {
    let mut c = crate::testing::config("pool", 1);
    c.attributes.provisioning_model = "SPOT".into();
    let e = to_text_proto(&[c]).unwrap_err();
    assert_eq!(e.field, "pool.attributes.provisioning_model");
}

#[test]
fn yaml_leaves_out_empty_defaults_and_keeps_required_fields() {
    let mut c = crate::testing::config("pool", 1);
    c.attributes.service_account =
        vec![ServiceAccount { unknown: Default::default(), email: String::new(), scope: vec![] }];
    c.attributes.scheduling = Some(Scheduling::default());
    let yaml = Config::to_yaml_all(std::slice::from_ref(&c)).unwrap();
    for gone in ["null", "false", "[]", "label"] {
        assert!(!yaml.contains(gone), "{gone}:\n{yaml}");
    }
    assert_eq!(yaml.matches("''").count(), 1, "only the required email:\n{yaml}");
    assert!(yaml.contains("email: ''") && yaml.contains("scheduling: {}"), "{yaml}");
    assert_eq!(Config::parse_all(&yaml, "t").unwrap(), [c]);
}

#[test]
fn a_file_holds_at_most_so_many_configs() {
    let many = "vms { prefix: \"a\" }\n".repeat(crate::config::MAX_FILE_CONFIGS + 1);
    assert!(error(&many).contains("at most 1000 Configs a file"));
    let docs = "prefix: a\n---\n".repeat(crate::config::MAX_FILE_CONFIGS + 1);
    let e = Config::parse_all(&docs, "f.yaml").unwrap_err().to_string();
    assert!(e.contains("at most 1000 Configs a file"), "{e}");
    // Up to the bound, a repeated prefix is found at once, however many blocks come before it.
    let text = format!(
        "{}vms {{ prefix: \"p0\" {SWARMING} }}",
        (0..999).map(|i| format!("vms {{ prefix: \"p{i}\" {SWARMING} }}\n")).collect::<String>()
    );
    assert!(error(&text).contains("vms block \"p0\" (line 1000): prefix also in the vms block at line 1"));
}

/// Two blocks with six mistakes between them: four found reading `linux` or `win`, two rules
/// their Configs break.
pub(crate) const SIX_MISTAKES: &str = r#"vms {
  prefix: "linux"
  amount { min: 5 max: 2 }
  attributes {
    project: "google.com:chromium-ci"
    zone: 5
    machine_type: "n1-standard-2"
    disk { image: "global/images/x" size: -1 }
    network_interface { }
    gpu: 1
  }
  lifetime { duration: "1d" }
  swarming: "https://swarm.example.com"
}
vms {
  prefix: "win"
  attributes {
    project: "example.com:win-bots"
    zone: "us-east1-c"
    machine_type: "n1-standard-8"
    disk { image: "global/images/win" }
    network_interface { }
  }
}
"#;

/// Every mistake of `text` as `configs convert` finds them: reading, then each Config's rules.
fn all_mistakes(text: &str) -> Vec<String> {
    let all = crate::config::file::parse(text, "vms.cfg", true).unwrap();
    all.iter()
        .flat_map(|(c, at)| crate::config::file::mistakes(c, at.as_ref(), "vms.cfg", vec![], c.problems()))
        .map(|e| e.to_string())
        .collect()
}

#[test]
fn every_mistake_of_a_file_is_found_in_one_pass_each_once_on_its_line() {
    let linux = "vms.cfg:{}: vms block \"linux\" (line 1): ";
    let win = "vms.cfg:15: vms block \"win\" (line 15): ";
    let want = [
        format!("{}linux.amount: min 5 is above max 2", linux.replace("{}", "3")),
        format!("{}attributes.zone: must be a quoted string", linux.replace("{}", "6")),
        format!("{}attributes.disk[0].size: must not be negative", linux.replace("{}", "8")),
        format!("{}attributes.gpu: is not a field of LUCI's config.proto here", linux.replace("{}", "10")),
        format!("{win}swarming: {}", fields::NO_SWARMING),
        format!("{win}win.lifetime: is required and must be non-zero"),
    ];
    // The zone that could not be read is said once: not also as missing.
    assert_eq!(all_mistakes(SIX_MISTAKES), want);
    // Read strictly, the four found reading (the rules are the caller's).
    let read: Vec<usize> = vec![1, 2, 3, 4];
    assert_eq!(errors(SIX_MISTAKES), read.iter().map(|&i| want[i].clone()).collect::<Vec<_>>());
    let shown = parse_vms(SIX_MISTAKES, "vms.cfg").unwrap_err().to_string();
    assert!(shown.starts_with("4 mistakes:\n  vms.cfg:6: "), "{shown}");
}

#[test]
fn a_file_that_is_no_list_of_vms_blocks_says_so_with_its_blocks_mistakes() {
    let text = format!("kinds {{ }}\nvms {{ prefix: \"a\" zone: \"z\" {SWARMING} }}\nvms: 1\n");
    assert_eq!(
        errors(&text),
        [
            "vms.cfg:1: kinds is not a field of LUCI's Configs (only vms blocks are)",
            "vms.cfg:2: vms block \"a\" (line 2): zone: is not a field of LUCI's config.proto here",
            "vms.cfg:3: vms must be a message: vms { … }",
        ]
    );
    assert!(crate::config::file::parse(&text, "vms.cfg", true).is_err(), "refused whole");
}

#[test]
fn a_window_that_cannot_be_read_keeps_the_others_in_place() {
    let text = format!(
        "vms {{\n  prefix: \"a\"\n  amount {{\n    change {{ start {{ time: \"8:00\" }} length {{ duration: \"1h\" }} }}\n    \
         change {{ start {{ day: MONDAY time: \"9:00\" }} length {{ duration: \"1h\" }} min: 3 max: 1 }}\n  }}\n  {SWARMING}\n}}\n"
    );
    let all = all_mistakes(&text);
    let day = "vms.cfg:4: vms block \"a\" (line 1): amount.change[0].start.day: is required";
    assert!(all.iter().any(|e| e == day), "{all:#?}");
    // Nothing else about the first window (its time stands for a start not read); the second
    // keeps its index.
    assert!(!all.iter().any(|e| e.contains("change[0].start.time")), "{all:#?}");
    assert!(
        all.iter().any(|e| e.starts_with("vms.cfg:5: ") && e.contains("a.amount.change[1]: min 3")),
        "{all:#?}"
    );
}

/// The `vms.cfg` luci-go's own validation test takes as valid (gce/appengine/config/config_test.go,
/// `TestValidateVMsConfig`): no `swarming`, an empty `access_config`, `from_file` in a folder.
const LUCI_TEST_CFG: &str = r#"
vms {
  amount { min: 1 max: 1 }
  attributes {
    network_interface { access_config { } }
    disk { image: "global/images/chrome-trusty-v1" }
    metadata { from_file: "cipd_deployments:metadata/file.json" }
    metadata { from_text: "enable-oslogin:TRUE" }
    machine_type: "zones/{{.Zone}}/machineTypes/n1-standard-2"
    project: "google.com:chromecompute"
    zone: "us-central1-b"
  }
  lifetime { duration: "1d" }
  prefix: "chrome-trusty"
}
"#;

#[test]
fn luci_s_own_test_file_is_one_clear_error_the_server_and_with_one_it_is_accepted() {
    let want = format!("vms.cfg:2: vms block \"chrome-trusty\" (line 2): swarming: {}", fields::NO_SWARMING);
    assert_eq!(all_mistakes(LUCI_TEST_CFG), std::slice::from_ref(&want));
    // Written empty is not set, as in proto3; written as a number, it is said so, once.
    let empty =
        LUCI_TEST_CFG.replace("prefix: \"chrome-trusty\"", "prefix: \"chrome-trusty\" swarming: \"\"");
    assert_eq!(all_mistakes(&empty), [want]);
    let number = LUCI_TEST_CFG.replace("prefix: \"chrome-trusty\"", "prefix: \"chrome-trusty\" swarming: 5");
    let said = all_mistakes(&number);
    assert_eq!(said.len(), 1, "{said:#?}");
    assert!(said[0].ends_with("swarming: must be a quoted string"), "{said:#?}");
    assert!(fields::NO_SWARMING.contains("watches each VM's bot"), "the reason is said");
    let served =
        LUCI_TEST_CFG.replace("prefix: \"chrome-trusty\"", &format!("prefix: \"chrome-trusty\" {SWARMING}"));
    assert_eq!(all_mistakes(&served), Vec::<String>::new());
    let (c, _) = parse_vms(&served, "vms.cfg").unwrap().remove(0);
    assert_eq!(c.attributes.network_interface[0].access_config[0].kind, "ONE_TO_ONE_NAT");
    assert_eq!(c.swarming, "https://swarm.example.com");
}

#[test]
fn durations_are_kept_as_written() {
    let all = parse_vms(VMS_CFG, "vms.cfg").unwrap();
    let written = |i: usize| all[i].1.durations().to_vec();
    let pair = |p: &str, w: &str| (p.to_owned(), w.to_owned());
    assert_eq!(written(0), [pair("amount.change[0].length", "8h"), pair("lifetime", "1d")]);
    assert_eq!(written(1), [], "seconds are not a duration's text");
    assert_eq!(written(2), [pair("lifetime", "2h")]);
}

#[test]
fn enum_values_are_taken_by_number_too_and_defaults_that_ask_nothing_are_accepted() {
    let text = format!(
        "vms {{\n  prefix: \"n\"\n  amount {{ change {{ start {{ day: 7 time: \"8:00\" }} length {{ seconds: 60 }} }} }}\n  \
         attributes {{\n    disk {{ interface: 1 }}\n    network_interface {{ access_config {{ type: 0 }} }}\n    \
         scheduling {{ node_affinity {{ key: \"k\" operator: 2 values: \"v\" }} }}\n    gcp_channel: 1\n    \
         performance_monitoring_unit: PERFORMANCE_MONITORING_UNIT_UNSPECIFIED\n  }}\n  {SWARMING}\n}}\n"
    );
    let (c, _) = parse_vms(&text, "vms.cfg").unwrap().remove(0);
    assert_eq!(c.amount.change[0].start.day, Day::Sunday);
    let a = &c.attributes;
    assert_eq!(a.disk[0].interface, "NVME");
    assert_eq!(a.network_interface[0].access_config[0].kind, "ONE_TO_ONE_NAT");
    assert_eq!(a.scheduling.as_ref().unwrap().node_affinity[0].operator, "NOT_IN");
    // A number out of the enum, or one this service cannot serve, is refused as its name is.
    let e = error(&text.replace("interface: 1", "interface: 2"));
    assert!(
        e.ends_with("attributes.disk[0].interface: must be one of SCSI, NVME (or its number, 0 to 1)"),
        "{e}"
    );
    assert!(
        error(&text.replace("gcp_channel: 1", "gcp_channel: 3")).contains("stable Compute Engine API only")
    );
    assert!(error(&text.replace("day: 7", "day: 0")).ends_with("must be a day name, MONDAY to SUNDAY"));
}
