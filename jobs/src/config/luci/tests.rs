//! Unit tests of `vms.cfg` reading: LUCI's shapes, the field map, refused fields with their
//! block and line, and the round trips YAML → text proto → YAML and back.

use super::*;

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

fn error(text: &str) -> String {
    crate::config::file::parse(text, "vms.cfg", true).unwrap_err().to_string()
}

#[test]
fn a_field_this_service_cannot_honour_names_the_block_the_field_and_the_line() {
    let block =
        |extra: &str| format!("vms {{\n  prefix: \"linux\"\n  attributes {{\n    {extra}\n  }}\n}}\n");
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
        let e = error(&format!("vms {{\n  prefix: \"p\"\n  {field}\n}}"));
        assert!(e.starts_with("vms.cfg:3: vms block \"p\" (line 1): "), "{e}");
        assert!(e.contains(why), "{e}");
    }
    // Defaults of server-set fields take nothing away: accepted.
    parse_vms("vms { prefix: \"p\" current_amount: 0 revision: \"\" }", "f").unwrap();
}

#[test]
fn file_level_errors_say_where() {
    assert!(error("").contains("holds no vms block"));
    assert!(error("# only a comment\n").contains("holds no vms block"));
    assert!(error("kinds { }").starts_with("vms.cfg:1: kinds is not a field"));
    assert!(error("vms: 1").contains("vms must be a message"));
    let twice = "vms { prefix: \"a\" }\n\nvms { prefix: \"a\" }";
    assert!(
        error(twice)
            .starts_with("vms.cfg:3: vms block \"a\" (line 3): prefix also in the vms block at line 1")
    );
    assert!(
        error("vms {\n  prefix: \"a\"\n  lifetime { duration: \"1d\" seconds: 5 }\n}")
            .contains("exactly one of duration or seconds")
    );
    assert!(error("vms { amount { change { min: 1 } } }").contains("amount.change[0].start: is required"));
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
        "{}vms {{ prefix: \"p0\" }}",
        (0..999).map(|i| format!("vms {{ prefix: \"p{i}\" }}\n")).collect::<String>()
    );
    assert!(error(&text).contains("vms block \"p0\" (line 1000): prefix also in the vms block at line 1"));
}
