//! Tests of Config parsing, validation and the amount schedule.

use super::*;
use chrono::{TimeZone, Utc};

pub(crate) const YAML: &str = r#"
prefix: linux
amount: {min: 2, max: 5, change: [{start: {day: MONDAY, time: "9:00", location: America/Los_Angeles}, length: 10h, min: 4, max: 5}]}
attributes:
  project: my-project
  zone: us-central1-b
  machine_type: "zones/{{.Zone}}/machineTypes/e2-small"
  disk: [{image: projects/debian-cloud/global/images/debian-12, size: 10, type: "zones/{{.Zone}}/diskTypes/pd-ssd"}]
  metadata: [{from_text: "startup-script:echo hi"}]
  network_interface: [{network: global/networks/default, access_config: [{type: ONE_TO_ONE_NAT}]}]
  label: {team: infra}
lifetime: 1d
timeout: 10m
swarming: https://swarm.example.com
"#;

fn cfg() -> Config {
    Config::parse(YAML, "linux.yaml").unwrap()
}

#[test]
fn durations_parse_with_units_and_clamp() {
    assert_eq!(Secs::parse("90s").unwrap().0, 90);
    assert_eq!(Secs::parse("15m").unwrap().0, 900);
    assert_eq!(Secs::parse("2mo").unwrap().0, 60 * 86_400);
    assert_eq!(Secs::parse("99999999999999999d").unwrap().0, u64::MAX);
    assert!(Secs::parse("1w").is_err() && Secs::parse("h").is_err());
    assert_eq!(cfg().lifetime.0, 86_400);
}

#[test]
fn a_good_config_validates_in_yaml_and_json() {
    cfg().validate().unwrap();
    let json = serde_json::to_string(&cfg()).unwrap();
    Config::parse(&json, "linux.json").unwrap().validate().unwrap();
}

#[test]
fn each_rule_names_its_field() {
    type Breaker = fn(&mut Config);
    let cases: Vec<(Breaker, &str)> = vec![
        (|c| c.prefix.clear(), "prefix"),
        (|c| c.prefix = "Bad_Prefix".into(), "Bad_Prefix.prefix"),
        (|c| c.prefix = "x".repeat(60), ".prefix"),
        (|c| c.amount.min = 9, "linux.amount"),
        (|c| c.amount.change[0].start.time = "25:00".into(), "amount.change[0].start.time"),
        (|c| c.amount.change[0].start.location = "Mars/Base".into(), "amount.change[0].start.location"),
        (|c| c.amount.change[0].length = Secs(0), "amount.change[0].length"),
        (|c| c.attributes.disk.clear(), "attributes.disk"),
        (|c| c.attributes.disk[0].kind = "pd-ssd".into(), "attributes.disk[0].type"),
        (|c| c.attributes.disk[0].image = "debian".into(), "attributes.disk[0].image"),
        (|c| c.attributes.disk[0].provisioned_iops = Some(5), "attributes.disk[0]"),
        (|c| c.attributes.machine_type.clear(), "attributes.machine_type"),
        (|c| c.attributes.metadata = vec![Metadata::text("novalue")], "attributes.metadata[0]"),
        (|c| c.attributes.metadata = vec![Metadata::default()], "attributes.metadata[0]"),
        (|c| c.attributes.network_interface.clear(), "attributes.network_interface"),
        (|c| c.attributes.project.clear(), "attributes.project"),
        (|c| c.attributes.zone.clear(), "attributes.zone"),
        (
            |c| c.attributes.label.insert("gce-backend".into(), "x".into()).map(drop).unwrap_or(()),
            "attributes.label",
        ),
        (|c| c.lifetime = Secs(0), "linux.lifetime"),
        (|c| c.swarming = "swarm.example.com".into(), "linux.swarming"),
    ];
    for (break_it, field) in cases {
        let mut c = cfg();
        break_it(&mut c);
        let e = c.validate().expect_err(field);
        assert!(e.field.contains(field) || e.field.ends_with(field), "{field}: got {e}");
    }
    let e = Config::parse("prefix: x\nbogus: 1\n", "x.yaml").unwrap_err();
    assert!(e.rule.contains("bogus"), "{e}");
    let mut c = cfg();
    c.attributes.zone = "Not_A_Zone".into();
    assert_eq!(c.validate().unwrap_err().field, "linux.attributes.zone");
}

#[test]
fn empty_files_are_errors_of_the_file() {
    for text in ["", "# only a comment\n", "---\n", "{}", "---\n# x\n"] {
        let e = Config::parse(text, "pools/linux.yaml").unwrap_err();
        assert_eq!(e.field, "pools/linux.yaml", "{text:?}");
        assert!(e.rule.contains("empty") || e.rule.contains("cannot parse"), "{text:?}: {e}");
    }
}

#[test]
fn nesting_is_counted_outside_strings_and_comments() {
    check_nesting(&format!("a: \"{}\"", "[".repeat(100)), "f").unwrap();
    check_nesting(&format!("a: '{}'", "{".repeat(100)), "f").unwrap();
    check_nesting(&format!("# {}\nb: 1", "[".repeat(100)), "f").unwrap();
    let sneaky = format!("# don't\nb: {}", "[".repeat(100));
    assert!(check_nesting(&sneaky, "f").unwrap_err().rule.contains("deeper than 32"));
    assert!(check_nesting(&"[".repeat(33), "f").is_err());
    check_nesting(&"[".repeat(32), "f").unwrap();
}

#[test]
fn amounts_above_the_limit_are_refused() {
    let limits = crate::config::Limits { max_amount: 100, ..crate::config::Limits::default() };
    let mut c = cfg();
    c.check_limits(&limits).unwrap();
    c.amount.max = 10_000_000;
    let e = c.check_limits(&limits).unwrap_err();
    assert_eq!(e.field, "linux.amount");
    assert!(e.rule.contains("10000000") && e.rule.contains("max_amount 100"), "{e}");
    let mut c = cfg();
    c.amount.change[0].max = 101;
    assert!(c.check_limits(&limits).is_err(), "a window's max counts too");
    // A warm pool is made too: it counts, and its VMs' indexes fit the hostnames.
    let mut c = cfg();
    c.amount.max = 60;
    c.warm = Some(crate::config::Warm { suspended: 30, ..Default::default() });
    c.check_limits(&limits).unwrap();
    assert_eq!((c.most_vms(), c.index_room()), (90, 100));
    c.warm = Some(crate::config::Warm { suspended: 30, stopped: 11, ..Default::default() });
    let e = c.check_limits(&limits).unwrap_err();
    assert_eq!(e.field, "linux.warm");
    assert!(e.rule.contains("up to 101 VMs (41 of them kept warm)"), "{e}");
    assert_eq!(c.index_room(), 1000, "three digits for index 100");
}

#[test]
fn a_rolling_update_s_surge_has_room_among_the_indexes_and_in_the_hostnames() {
    let mut c = cfg();
    c.amount = crate::config::Amount { min: 10, max: 10, ..Default::default() };
    c.warm = None;
    // Rolling (the default, a surge of 1): 11 VMs at once, index 10 among them.
    assert_eq!((c.most_vms(), c.most_indexes(), c.index_room()), (10, 11, 100));
    c.update.mode = crate::config::UpdateMode::OnLifetime;
    assert_eq!((c.most_indexes(), c.index_room()), (10, 10));
    // A prefix that fits `<prefix>-9-xxxx` in 63 characters but not `<prefix>-10-xxxx` is
    // refused while the surge may take index 10.
    c.prefix = "p".repeat(56);
    assert!(c.problems().iter().all(|e| !e.field.ends_with(".prefix")), "{:?}", c.problems());
    c.update.mode = crate::config::UpdateMode::Rolling;
    let e = c.problems();
    assert!(e.iter().any(|e| e.field.ends_with(".prefix") && e.rule.contains("64 characters")), "{e:?}");
}

#[test]
fn prefixes_may_not_be_prefixes_of_each_other() {
    let a = cfg();
    let mut b = cfg();
    b.prefix = "linux-big".into();
    let e = validate_all(&[a.clone(), b]).unwrap_err();
    assert_eq!(e.field, "linux-big.prefix");
    let mut c = cfg();
    c.prefix = "mac".into();
    validate_all(&[a, c]).unwrap();
}

#[test]
fn overlapping_schedules_are_refused_even_across_the_week_wrap() {
    let mut c = cfg();
    let mut late = c.amount.change[0].clone();
    (late.start.day, late.start.time) = (Day::Monday, "18:00".into());
    late.start.location = "America/Los_Angeles".into();
    c.amount.change.push(late);
    assert!(c.validate().unwrap_err().rule.contains("overlaps"));
    let mut c = cfg();
    c.amount.change[0].start.day = Day::Sunday;
    c.amount.change[0].length = Secs(2 * 86_400);
    let mut monday = c.amount.change[0].clone();
    (monday.start.day, monday.start.time, monday.start.location) =
        (Day::Monday, "12:00".into(), String::new());
    monday.length = Secs(3600);
    c.amount.change.push(monday);
    assert!(c.validate().unwrap_err().rule.contains("overlaps"), "Sunday + 2d reaches Monday noon");
}

#[test]
fn amount_follows_the_open_window() {
    let c = cfg();
    // Monday 2026-11-23 10:00 in Los Angeles is 18:00 UTC: inside the 9:00 + 10h window.
    let inside = Utc.with_ymd_and_hms(2026, 11, 23, 18, 0, 0).unwrap();
    let outside = Utc.with_ymd_and_hms(2026, 11, 24, 18, 0, 0).unwrap();
    assert_eq!(c.amount.at(0, inside), 4);
    assert_eq!(c.amount.at(0, outside), 2);
    assert_eq!(c.amount.at(3, outside), 3, "the current amount is kept within bounds");
    assert_eq!(c.amount.at(9, outside), 5);
}

#[test]
fn problems_lists_every_broken_rule_and_validate_gives_the_first() {
    let mut c = cfg();
    c.attributes.zone = "US Central".into();
    c.attributes.machine_type.clear();
    c.swarming = "ftp://x".into();
    c.amount.change[0].start.time = "25:00".into();
    let fields: Vec<String> = c.problems().into_iter().map(|e| e.field).collect();
    assert_eq!(
        fields,
        [
            "linux.amount.change[0].start.time",
            "linux.attributes.machine_type",
            "linux.attributes.zone",
            "linux.swarming"
        ]
    );
    assert_eq!(c.validate().unwrap_err().field, fields[0]);
    assert!(cfg().problems().is_empty());
    let empty = Config::default();
    assert_eq!(empty.problems()[0], ConfigError { field: "prefix".into(), rule: "is required".into() });
}

#[test]
fn spot_and_preemptible_rules() {
    let mut c = cfg();
    c.attributes.provisioning_model = "SPOT".into();
    c.attributes.instance_termination_action = "DELETE".into();
    assert!(c.problems().is_empty(), "{:?}", c.problems());
    c.attributes.preemptible = true;
    assert_eq!(c.validate().unwrap_err().field, "linux.attributes.preemptible");
    let mut c = cfg();
    c.attributes.provisioning_model = "spot".into();
    assert_eq!(c.validate().unwrap_err().field, "linux.attributes.provisioning_model");
    let mut c = cfg();
    c.attributes.instance_termination_action = "STOP".into();
    assert!(c.validate().unwrap_err().rule.contains("SPOT or preemptible"));
}

#[test]
fn project_ids_follow_gcps_rule_and_paths_hold_no_path_tricks() {
    use super::valid_project;
    for ok in ["my-project", "google.com:chromecompute", "abcdef", "a23456789012345678901234567890"] {
        assert!(valid_project(ok), "{ok}");
    }
    for bad in [
        "proj",
        "../../x",
        "a%2Fb",
        "My-Project",
        "ab-cdef-",
        "1abcdef",
        "x".repeat(2000).as_str(),
        "my-pro\u{202e}ject",
        ":my-project",
        "com:my-project",
        "a31234567890123456789012345678901",
    ] {
        assert!(!valid_project(bad), "{bad}");
    }
    let mut c = crate::testing::config("linux", 1);
    c.attributes.project = "a%2Fb".into();
    c.attributes.machine_type = "zones/{{.Zone}}/machineTypes/../../x".into();
    c.attributes.disk[0].image = "global/images/x?alt=media".into();
    c.attributes.network_interface[0].network = "global/networks/%2e%2e".into();
    c.attributes.service_account = vec![super::ServiceAccount {
        email: "evil@x/y".into(),
        scope: vec!["ftp://x".into()],
        ..Default::default()
    }];
    c.attributes.tag = vec!["Bad Tag".into()];
    let fields: Vec<String> = c.problems().into_iter().map(|e| e.field).collect();
    assert_eq!(
        fields,
        [
            "linux.attributes.machine_type",
            "linux.attributes.disk[0].image",
            "linux.attributes.network_interface[0].network",
            "linux.attributes.service_account[0].email",
            "linux.attributes.service_account[0].scope[0]",
            "linux.attributes.tag[0]",
            "linux.attributes.project",
        ]
    );
}

#[test]
fn every_duration_and_count_has_a_range() {
    let base = yaml_serde::to_string(&crate::testing::config("linux", 1)).unwrap();
    for (from, to, field) in [
        ("lifetime: 86400", "lifetime: 10000000000mo", "linux.lifetime"),
        ("lifetime: 86400", "lifetime: 18446744073709551615", "linux.lifetime"),
        ("timeout: 600", "timeout: 2d", "linux.timeout"),
    ] {
        let c = Config::parse(&base.replace(from, to), "t").unwrap();
        let e = c.validate().unwrap_err();
        assert_eq!(e.field, field, "{to}: {e}");
        // Whatever is stored, time arithmetic never overflows.
        let _ = crate::ports::clock::Clock::now(&crate::ports::clock::SystemClock)
            + c.lifetime.chrono()
            + c.timeout.chrono();
    }
    let mut c = crate::testing::config("linux", 1);
    c.breaker.after = 5000;
    c.breaker.within = Secs(90 * 86_400);
    c.update.max_surge = 1_000_000;
    c.attributes.disk[0].size = 1 << 40;
    let fields: Vec<String> = c.problems().into_iter().map(|e| e.field).collect();
    assert_eq!(
        fields,
        [
            "linux.attributes.disk[0].size",
            "linux.breaker.within",
            "linux.breaker.after",
            "linux.update.max_surge"
        ]
    );
}

#[test]
fn a_swarming_server_is_an_origin() {
    let mut c = crate::testing::config("linux", 1);
    for (url, why) in
        [("http://evil.example@127.0.0.1:19999/p?q=", "user"), ("https://s.example.com/x", "path")]
    {
        c.swarming = url.into();
        let e = c.validate().unwrap_err();
        assert!(e.field == "linux.swarming" && e.rule.contains(why), "{e}");
    }
}

#[test]
fn a_days_name_is_the_one_a_config_file_writes() {
    for d in crate::config::Day::ALL {
        assert_eq!(serde_json::to_value(d).unwrap(), d.name(), "{d:?}");
        assert_eq!(crate::config::Day::from_name(d.name()), Some(d));
    }
    assert_eq!(crate::config::Day::from_name("monday"), None);
}

#[test]
fn demand_and_warm_pools_are_checked_field_by_field() {
    let with = |extra: &str| Config::parse(&format!("{YAML}{extra}"), "linux.yaml").unwrap();
    let fields = |c: Config| -> Vec<String> { c.problems().into_iter().map(|e| e.to_string()).collect() };
    let good = with(
        "demand: {dimensions: {pool: ci, os: Linux}, per_bot: 1, min_idle: 2, idle_timeout: 10m}\nwarm: {suspended: 3, stopped: 1}\n",
    );
    assert_eq!(fields(good.clone()), Vec::<String>::new());
    let d = good.demand.unwrap();
    assert_eq!((d.tags(), d.idle_timeout), (vec!["os:Linux".to_owned(), "pool:ci".to_owned()], Secs(600)));
    // Defaults: one task a bot, no idle bot kept, ten minutes.
    let d = with("demand: {dimensions: {pool: ci}}\n").demand.unwrap();
    assert_eq!((d.per_bot, d.min_idle, d.idle_timeout), (1, 0, Secs(600)));
    let cases = [
        ("demand: {dimensions: {os: Linux}}\n", "linux.demand.dimensions: needs `pool`"),
        ("demand: {dimensions: {pool: \"a|b\"}}\n", "linux.demand.dimensions.pool: must be one value"),
        ("demand: {dimensions: {pool: ci, \"1x\": y}}\n", "is not a dimension key"),
        ("demand: {dimensions: {pool: ci}, per_bot: 0}\n", "linux.demand.per_bot: 0; must be 1 to 64"),
        ("demand: {dimensions: {pool: ci}, idle_timeout: 2d}\n", "linux.demand.idle_timeout"),
        ("demand: {dimensions: {pool: ci}, min_idle: 20000}\n", "linux.demand.min_idle"),
        ("warm: {suspended: 20000}\n", "linux.warm.suspended: 20000; at most"),
    ];
    for (extra, want) in cases {
        let got = fields(with(extra));
        assert!(got.iter().any(|e| e.contains(want)), "{extra}: {got:?}");
    }
    assert!(
        Config::parse(&format!("{YAML}demand: {{dimensions: {{pool: ci}}, typo: 1}}\n"), "l.yaml").is_err()
    );
    // What Compute Engine cannot suspend: said, with the way out.
    let gpu = YAML.replace("e2-small", "a2-highgpu-1g") + "warm: {suspended: 1}\n";
    let got = fields(Config::parse(&gpu, "linux.yaml").unwrap());
    assert!(got.iter().any(|e| e.contains("GPUs attached") && e.contains("warm.stopped")), "{got:?}");
    let stopped = YAML.replace("e2-small", "a2-highgpu-1g") + "warm: {stopped: 1}\n";
    assert_eq!(
        fields(Config::parse(&stopped, "linux.yaml").unwrap()),
        Vec::<String>::new(),
        "stop works for any"
    );
    let ssd = YAML.replace("pd-ssd", "local-ssd") + "warm: {suspended: 1}\n";
    assert!(fields(Config::parse(&ssd, "linux.yaml").unwrap()).iter().any(|e| e.contains("Local SSD")));
    let conf = YAML
        .replace("  label: {team: infra}\n", "  label: {team: infra}\n  enable_confidential_compute: true\n")
        + "warm: {suspended: 1}\n";
    assert!(fields(Config::parse(&conf, "linux.yaml").unwrap()).iter().any(|e| e.contains("Confidential")));
}

#[test]
fn spot_failover_is_for_a_spot_pool_and_its_fields_are_checked() {
    let spot =
        YAML.replace("  label: {team: infra}\n", "  label: {team: infra}\n  provisioning_model: SPOT\n");
    let with = |base: &str, extra: &str| Config::parse(&format!("{base}{extra}"), "linux.yaml").unwrap();
    let fields = |c: Config| -> Vec<String> { c.problems().into_iter().map(|e| e.to_string()).collect() };
    let good = with(&spot, "spot_failover: {more_than: 3, within: 10m, cooldown: 30m}\n");
    assert_eq!(fields(good.clone()), Vec::<String>::new());
    assert_eq!(
        good.spot_failover,
        Some(SpotFailover { more_than: 3, within: Secs(600), cooldown: Secs(1800), ..Default::default() })
    );
    // Defaults: more than 3 within 10 minutes, for 30 minutes; JSON as YAML.
    assert_eq!(with(&spot, "spot_failover: {}\n").spot_failover, Some(SpotFailover::default()));
    let legacy = YAML.replace("  label: {team: infra}\n", "  label: {team: infra}\n  preemptible: true\n");
    assert_eq!(fields(with(&legacy, "spot_failover: {more_than: 0}\n")), Vec::<String>::new());
    let cases = [
        (
            YAML,
            "spot_failover: {}\n",
            "linux.spot_failover: is for a Spot pool: set attributes.provisioning_model: SPOT",
        ),
        (&spot, "spot_failover: {more_than: 101}\n", "linux.spot_failover.more_than: 101; at most 100"),
        (&spot, "spot_failover: {within: 0}\n", "linux.spot_failover.within: must be non-zero"),
        (
            &spot,
            "spot_failover: {within: 2d}\n",
            "linux.spot_failover.within: 172800s is above the most allowed, 86400s (1d)",
        ),
        (&spot, "spot_failover: {cooldown: 0s}\n", "linux.spot_failover.cooldown: must be non-zero"),
        (
            &spot,
            "spot_failover: {cooldown: 8d}\n",
            "linux.spot_failover.cooldown: 691200s is above the most allowed",
        ),
    ];
    for (base, extra, want) in cases {
        let got = fields(with(base, extra));
        assert!(got.iter().any(|e| e.starts_with(want)), "{extra}: {got:?}");
    }
    let e = Config::parse(&format!("{spot}spot_failover: {{after: 3}}\n"), "linux.yaml").unwrap_err();
    assert!(e.to_string().contains("after"), "an unknown field is an error naming it: {e}");
    let e =
        Config::parse(&format!("{spot}spot_failover:\n  within: 10 minutes\n"), "linux.yaml").unwrap_err();
    let e = e.to_string();
    assert!(e.contains("spot_failover") && e.contains("unit must be s, m, h, d or mo"), "{e}");
    // A static pool makes no Spot VMs.
    let mut s = Config {
        prefix: "mac".into(),
        machines: Some(vec!["mac-a.example.com".into()]),
        ..Default::default()
    };
    s.swarming = "https://swarm.example.com".into();
    s.spot_failover = Some(SpotFailover::default());
    assert!(fields(s).iter().any(|e| e.starts_with("mac.spot_failover: a static pool")));
    // LUCI's vms.cfg has no place for it.
    let e = crate::config::luci::to_text_proto(&[Config {
        spot_failover: Some(SpotFailover::default()),
        ..cfg()
    }])
    .unwrap_err();
    assert_eq!(e.field, "linux.spot_failover");
}

#[test]
fn fallback_machine_types_are_ranks_after_the_machine_type_and_are_checked() {
    let with = |extra: &str| Config::parse(&format!("{YAML}{extra}"), "linux.yaml").unwrap();
    let fields = |c: Config| -> Vec<String> { c.problems().into_iter().map(|e| e.to_string()).collect() };
    let good = with("fallback_machine_types: [\"zones/{{.Zone}}/machineTypes/n2d-standard-2\", e2-medium]\n");
    assert_eq!(fields(good.clone()), Vec::<String>::new());
    assert!(good.has_ranks() && !cfg().has_ranks());
    assert_eq!((good.ranks(), cfg().ranks()), (3, 1));
    let on = |rank| good.attributes_on("us-central1-b", rank).map(|a| a.machine_type);
    assert_eq!(on(0).as_deref(), Some("zones/us-central1-b/machineTypes/e2-small"));
    assert_eq!(on(1).as_deref(), Some("zones/us-central1-b/machineTypes/n2d-standard-2"));
    assert_eq!(on(2).as_deref(), Some("e2-medium"));
    assert_eq!(on(3), None);
    assert_eq!(good.attributes_on("us-central1-b", 1).unwrap().zone, "us-central1-b");
    let cases = [
        ("fallback_machine_types: [e2-small]\n", "linux.fallback_machine_types[0]: e2-small is listed twice"),
        ("fallback_machine_types: [a, b, a]\n", "linux.fallback_machine_types[2]: a is listed twice"),
        ("fallback_machine_types: [\"\"]\n", "linux.fallback_machine_types[0]: must name a machine type"),
        (
            "fallback_machine_types: [\"zones/x/machineTypes/../y\"]\n",
            "linux.fallback_machine_types[0]: must not hold",
        ),
        (
            "fallback_machine_types: [a, b, c, d, e]\n",
            "linux.fallback_machine_types: 5 machine types; at most 4",
        ),
    ];
    for (extra, want) in cases {
        let got = fields(with(extra));
        assert!(got.iter().any(|e| e.starts_with(want)), "{extra}: {got:?}");
    }
    // A static pool makes no machines; LUCI's vms.cfg has no place for the list.
    let mut s = Config {
        prefix: "mac".into(),
        machines: Some(vec!["mac-a.example.com".into()]),
        fallback_machine_types: vec!["e2-small".into()],
        ..Default::default()
    };
    s.swarming = "https://swarm.example.com".into();
    assert!(fields(s).iter().any(|e| e.starts_with("mac.fallback_machine_types: a static pool")));
    let e = crate::config::luci::to_text_proto(&[good]).unwrap_err();
    assert_eq!(e.field, "linux.fallback_machine_types");
}
