//! Unit tests of `config.rs`.

use super::*;

#[test]
fn machine_types_map_to_cpus() {
    let cfg = SimConfig { machine_cpus: vec![("weird-box".into(), 7.0)], ..SimConfig::default() };
    assert_eq!(cfg.cpus_of("zones/us-central1-b/machineTypes/e2-small"), 2.0);
    assert_eq!(cfg.cpus_of("n1-standard-8"), 8.0);
    assert_eq!(cfg.cpus_of("custom-6-23040"), 6.0);
    assert_eq!(cfg.cpus_of("weird-box"), 7.0);
    assert_eq!(cfg.cpus_of("f1-micro"), 1.0);
}

#[test]
fn fault_patches_are_checked_and_replace_only_what_they_name() {
    let mut f = Faults::default();
    let p: FaultsPatch =
        serde_json::from_str(r#"{"stockout_zones":["us-east1-b"],"never_boot_rate":0.5}"#).unwrap();
    f.apply(p).unwrap();
    let p: FaultsPatch = serde_json::from_str(r#"{"errors":{"*":{"rate":0.3,"status":503}}}"#).unwrap();
    f.apply(p).unwrap();
    assert_eq!(f.never_boot_rate, 0.5);
    assert!(f.stockout_zones.contains("us-east1-b"));
    assert_eq!(f.error_for("compute.instances.get").unwrap().status, 503);
    let bad: FaultsPatch = serde_json::from_str(r#"{"never_boot_rate":2,"stockout_zones":[]}"#).unwrap();
    assert!(f.apply(bad).unwrap_err().contains("never_boot_rate"));
    assert!(f.stockout_zones.contains("us-east1-b"), "a rejected patch changes nothing");
    let bad: FaultsPatch = serde_json::from_str(r#"{"errors":{"*":{"rate":0.1,"status":500}}}"#).unwrap();
    assert!(f.apply(bad).unwrap_err().contains("status"));
    let typo = r#"{"errors":{"compute.instance.insert":{"rate":1,"status":503}}}"#;
    let e = f.apply(serde_json::from_str(typo).unwrap()).unwrap_err();
    assert!(e.contains("compute.instance.insert: no such method"), "{e}");
    let typo: FaultsPatch = serde_json::from_str(r#"{"latency_ms":{"swarming.getbot":5}}"#).unwrap();
    assert!(f.apply(typo).is_err());
    assert!(serde_json::from_str::<FaultsPatch>(r#"{"typo":1}"#).is_err());
}

#[test]
fn swarming_server_faults_are_checked_and_keyed_by_host() {
    let mut f = Faults::default();
    let p = r#"{"swarming_servers":{"https://hang.example.com/":"hang","bad.example.com":"malformed"}}"#;
    f.apply(serde_json::from_str(p).unwrap()).unwrap();
    assert_eq!(f.server_fault("hang.example.com"), Some(ServerFault::Hang));
    assert_eq!(f.server_fault("https://bad.example.com"), Some(ServerFault::Malformed));
    assert_eq!(f.server_fault("swarm.example.com"), None);
    let typo = serde_json::from_str::<FaultsPatch>(r#"{"swarming_servers":{"x.example.com":"hung"}}"#);
    assert!(typo.unwrap_err().to_string().contains("unknown variant"));
    let bad: FaultsPatch = serde_json::from_str(r#"{"swarming_servers":{"a.com/path":"hang"}}"#).unwrap();
    assert!(f.apply(bad).unwrap_err().contains("swarming_servers.a.com/path"));
    let empty: FaultsPatch = serde_json::from_str(r#"{"swarming_servers":{"https://":"hang"}}"#).unwrap();
    assert!(f.apply(empty).is_err());
    assert_eq!(
        f.server_fault("hang.example.com"),
        Some(ServerFault::Hang),
        "a rejected patch changes nothing"
    );
    f.apply(serde_json::from_str(r#"{"swarming_servers":{}}"#).unwrap()).unwrap();
    assert_eq!(f.server_fault("hang.example.com"), None);
    let cli = parse_faults(r#"{"swarming_servers":{"m.example.com":"malformed"}}"#).unwrap();
    assert_eq!(cli.server_fault("m.example.com"), Some(ServerFault::Malformed));
}

#[test]
fn active_faults_are_named_by_field_and_key() {
    let mut f = Faults::default();
    assert!(f.active().is_empty(), "no faults at start");
    let patch = serde_json::from_value(serde_json::json!({
        "errors": {"compute.instances.insert": {"rate": 0.5, "status": 503}, "*": {"rate": 0.0, "status": 429}},
        "latency_ms": {"swarming.ListBots": 200}, "never_boot_rate": 0.1, "bot_early_death_rate": 0.0,
        "stockout_zones": ["us-east1-b"], "quotas": {"us-central1": {"cpus": 8.0, "instances": 4}},
        "swarming_servers": {"https://hang.example.com/": "hang"}}))
    .unwrap();
    f.apply(patch).unwrap();
    assert_eq!(
        f.active(),
        [
            "errors.compute.instances.insert",
            "latency_ms.swarming.ListBots",
            "never_boot_rate",
            "stockout_zones.us-east1-b",
            "quotas.us-central1",
            "swarming_servers.hang.example.com"
        ],
        "a zero rate is no fault"
    );
}

#[test]
fn project_quota_overrides_region_quota_overrides_defaults() {
    let cfg = SimConfig { cpu_quota: 10.0, instance_quota: 5, ..SimConfig::default() };
    let mut f = Faults::default();
    f.quotas.insert("us-east1".into(), QuotaLimits { cpus: 4.0, instances: 2 });
    f.quotas.insert("p1/us-east1".into(), QuotaLimits { cpus: 1.0, instances: 1 });
    assert_eq!(f.limits("p0", "us-central1", &cfg).cpus, 10.0);
    assert_eq!(f.limits("p0", "us-east1", &cfg).cpus, 4.0);
    assert_eq!(f.limits("p1", "us-east1", &cfg).instances, 1);
}

#[test]
fn compute_is_made_silent_and_back() {
    let mut f = Faults::default();
    f.apply(serde_json::from_str(r#"{"compute_hang": true}"#).unwrap()).unwrap();
    assert!(f.compute_hang && f.active() == ["compute_hang"], "{:?}", f.active());
    f.apply(serde_json::from_str(r#"{"never_boot_rate": 0.5}"#).unwrap()).unwrap();
    assert!(f.compute_hang, "a patch without it leaves it");
    f.apply(serde_json::from_str(r#"{"compute_hang": false}"#).unwrap()).unwrap();
    assert!(!f.compute_hang && f.active() == ["never_boot_rate"]);
}

#[test]
fn stockouts_name_a_zone_or_a_machine_type_in_it() {
    let mut f = Faults::default();
    let p = r#"{"stockouts": ["us-central1-b/n2-standard-8", "us-central1-c"], "stockout_zones": ["us-east1-b"]}"#;
    f.apply(serde_json::from_str(p).unwrap()).unwrap();
    assert!(f.stocked_out("us-central1-b", "zones/us-central1-b/machineTypes/n2-standard-8"));
    assert!(!f.stocked_out("us-central1-b", "n2d-standard-8"));
    assert!(f.stocked_out("us-central1-c", "e2-small") && f.stocked_out("us-east1-b", "e2-small"));
    assert!(!f.stocked_out("us-central1-a", "n2-standard-8"));
    assert!(f.active().contains(&"stockouts.us-central1-b/n2-standard-8".to_owned()), "{:?}", f.active());
    for bad in [r#"{"stockouts": ["us-central1-b/N2"]}"#, r#"{"stockouts": ["nozone"]}"#] {
        let e = f.apply(serde_json::from_str(bad).unwrap()).unwrap_err();
        assert!(e.starts_with("stockouts:"), "{e}");
    }
    assert!(f.stocked_out("us-central1-c", "e2-small"), "a rejected patch changes nothing");
}

#[test]
fn the_quota_flag_defaults_to_gce_default_and_a_bad_file_stops_the_start() {
    #[derive(clap::Parser)]
    struct Wrap {
        #[command(flatten)]
        cfg: SimConfig,
    }
    use clap::Parser;
    assert_eq!(SimConfig::default().quota.source, "gce-default");
    let none = Wrap::try_parse_from(["sim", "--quota", "none"]).unwrap().cfg;
    assert_eq!(none.quota.limits("p"), None);
    let e = Wrap::try_parse_from(["sim", "--quota", "/no/such/quota.json"]).err().unwrap().to_string();
    assert!(e.contains("--quota") && e.contains("/no/such/quota.json"), "{e}");
}
