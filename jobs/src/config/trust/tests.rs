//! The settings' trust: server origins, tenants' namespaces, projects, accounts and sums.

use super::*;
use crate::config::ServiceAccount;

fn trust(servers: &[&str], tenants: &str) -> Result<Trust, String> {
    let tenants: BTreeMap<String, Tenant> = toml::from_str(tenants).map_err(|e| e.to_string())?;
    Trust::new(&SwarmingServers { servers: servers.iter().map(|s| (*s).to_owned()).collect() }, &tenants)
}

fn config(prefix: &str, owner: &[&str], project: &str, amount: u32) -> Config {
    let mut c = crate::testing::config(prefix, amount);
    c.owner = owner.iter().map(|s| (*s).to_owned()).collect();
    c.attributes.project = project.to_owned();
    c
}

fn fields(v: Vec<ConfigError>) -> Vec<String> {
    v.into_iter().map(|e| e.field).collect()
}

#[test]
fn a_server_is_an_origin_and_nothing_more() {
    let ok = Origin::parse("https://chromium-swarm.appspot.com/").unwrap();
    assert_eq!(ok.to_string(), "https://chromium-swarm.appspot.com");
    assert_eq!(Origin::parse("https://s.example.com:443").unwrap().port, None, "the default port is no port");
    assert_eq!(Origin::parse("http://127.0.0.1:19999").unwrap().port, Some(19999));
    for (url, why) in [
        ("http://evil.example@127.0.0.1:19999", "user"),
        ("https://a.example.com/p", "a path"),
        ("https://a.example.com/p?q=", "a path"),
        ("https://a.example.com?q=1", "a query"),
        ("https://a.example.com#x", "a fragment"),
        ("ftp://a.example.com", "https://"),
        ("https://A.example.com", "lower-case"),
        ("https://a%2eexample.com", "lower-case"),
        ("https://a.example.com:0", "port"),
        ("https://a.example.com:99999", "port"),
        ("https://", "lower-case"),
        ("https://a..b", "lower-case"),
        ("https://exa\u{202e}mple.com", "lower-case"),
    ] {
        let e = Origin::parse(url).unwrap_err();
        assert!(e.contains(why), "{url}: {e}");
    }
}

#[test]
fn only_listed_servers_may_be_named() {
    let t = trust(
        &["https://swarm.example.com", "http://127.0.0.1:8787"],
        "[\"*\"]\nprefixes=[\"*\"]\nprojects=[\"*\"]\nservice_accounts=[\"*\"]",
    )
    .unwrap();
    assert!(t.server("https://swarm.example.com/").is_ok());
    assert!(t.server("http://127.0.0.1:8787").is_ok());
    let e = t.server("http://127.0.0.1:19999").unwrap_err();
    assert!(e.contains("not listed") && e.contains("https://swarm.example.com"), "{e}");
    assert!(t.server("https://swarm.example.com:8443").is_err(), "a port not listed");
    assert!(t.server("http://swarm.example.com").is_err(), "another scheme");
    let mut c = config("web", &[], "my-project", 2);
    c.swarming = "http://evil.example@127.0.0.1:19999/p?q=".into();
    assert_eq!(fields(t.problems(&c, [])), ["web.swarming"]);
    assert!(trust(&["https://x.example.com/path"], "").unwrap_err().contains("swarming.servers[0]"));
}

const TEAMS: &str = r#"
["team-a"]
prefixes = ["team-a-*"]
projects = ["team-a-prod", "team-a-ci-*"]
service_accounts = ["bots@team-a-prod.iam.gserviceaccount.com"]
max_vms = 10
["team-b"]
prefixes = ["web-*", "b"]
projects = ["*"]
service_accounts = ["*"]
["*"]
prefixes = ["*"]
projects = ["*"]
service_accounts = ["*"]
"#;

#[test]
fn a_config_stays_in_its_tenants_namespace_and_nobody_squats_another() {
    let t = trust(&["https://swarm.example.com"], TEAMS).unwrap();
    let a = config("team-a-linux", &["team-a"], "team-a-prod", 2);
    assert!(t.problems(&a, []).is_empty(), "{:?}", t.problems(&a, []));
    // Outside its namespace.
    let e = t.problems(&config("linux", &["team-a"], "team-a-prod", 2), []);
    assert_eq!(fields(e.clone()), ["linux.prefix"]);
    assert!(e[0].rule.contains("outside tenant team-a's namespace (team-a-*)"), "{}", e[0]);
    // The open tenant can neither take a prefix of team-b's nor one that would block them all.
    for squat in ["w", "we", "web-x", "b", "team"] {
        let e = t.problems(&config(squat, &["someone"], "p-123456", 1), []);
        assert_eq!(fields(e.clone()), [format!("{squat}.prefix")], "{squat}");
        assert!(e[0].rule.contains("namespace"), "{}", e[0]);
    }
    assert!(t.problems(&config("linux", &["someone"], "p-123456", 1), []).is_empty());
    // Owners of two tenants.
    let e = t.problems(&config("team-a-x", &["team-a", "team-b"], "team-a-prod", 1), []);
    assert_eq!(fields(e), ["team-a-x.owner"]);
}

#[test]
fn projects_accounts_and_the_tenants_sum_are_limited() {
    let t = trust(&["https://swarm.example.com"], TEAMS).unwrap();
    let mut c = config("team-a-ci", &["team-a"], "team-a-ci-7", 4);
    assert!(t.problems(&c, []).is_empty());
    c.attributes.project = "team-b-prod".into();
    c.attributes.service_account = vec![ServiceAccount {
        unknown: Default::default(),
        email: "owner@team-b-prod.iam.gserviceaccount.com".into(),
        scope: vec![],
    }];
    let e = t.problems(&c, []);
    assert_eq!(fields(e), ["team-a-ci.attributes.project", "team-a-ci.attributes.service_account[0].email"]);
    // max_vms counts the others' largest amounts (windows included), not the one replaced.
    let c = config("team-a-ci", &["team-a"], "team-a-ci-7", 4);
    let mut other = config("team-a-web", &["team-a"], "team-a-prod", 1);
    other.amount.max = 6;
    let old_self = config("team-a-ci", &["team-a"], "team-a-ci-7", 9);
    let not_theirs = config("linux", &[], "p-123456", 100);
    assert!(t.problems(&c, [&other, &old_self, &not_theirs]).is_empty(), "6 + 4 = 10");
    let big = config("team-a-ci", &["team-a"], "team-a-ci-7", 5);
    let e = t.problems(&big, [&other]);
    assert_eq!(fields(e.clone()), ["team-a-ci.amount"]);
    assert!(e[0].rule.contains("max_vms is 10"), "{}", e[0]);
}

#[test]
fn settings_refuse_overlapping_namespaces_and_no_tenant_means_refused() {
    let e = trust(&[], "[a]\nprefixes=[\"web*\"]\n[b]\nprefixes=[\"web-b-*\"]").unwrap_err();
    assert!(e.contains("overlap"), "{e}");
    assert!(trust(&[], "[a]\nprefixes=[\"Web*\"]").unwrap_err().contains("tenants.a.prefixes"));
    assert!(trust(&[], "[a]\nprefixes=[\"w*b\"]").is_err());
    assert!(trust(&[], "[\"a/b\"]\nprefixes=[\"x\"]").is_err());
    let closed = trust(
        &["https://swarm.example.com"],
        "[team-a]\nprefixes=[\"team-a-*\"]\nprojects=[\"*\"]\nservice_accounts=[\"*\"]",
    )
    .unwrap();
    let e = closed.problems(&config("linux", &["web"], "p-123456", 1), []);
    assert_eq!(fields(e.clone()), ["linux.owner"]);
    assert!(e[0].rule.contains("no tenant"), "{}", e[0]);
    // The default: the example server and one open tenant.
    assert!(Trust::default().problems(&config("linux", &["web"], "p-123456", 1), []).is_empty());
}

#[test]
fn a_group_of_no_tenant_cannot_ride_along_with_a_tenants_group() {
    let t = trust(&["https://swarm.example.com"], TEAMS).unwrap();
    // A writer of `x` (no tenant) naming team-a as a co-owner would get team-a's box.
    let e = t.problems(&config("team-a-x", &["x", "team-a"], "team-a-prod", 1), []);
    assert_eq!(fields(e.clone()), ["team-a-x.owner"]);
    assert!(e[0].rule.contains("have no tenant beside tenant team-a's"), "{}", e[0]);
}

#[test]
fn a_static_pool_lists_only_its_tenants_machines_and_none_in_another_namespace() {
    let t = trust(
        &["https://swarm.example.com"],
        &TEAMS.replace("max_vms = 10", "max_vms = 10\nmachines = [\"*\"]"),
    )
    .unwrap();
    let mut lab = config("team-a-lab", &["team-a"], "team-a-prod", 0);
    lab.machines = Some(vec!["mac-01".into(), "web-0-abcd".into(), "linux-3-wxyz".into()]);
    let e = t.problems(&lab, []);
    assert_eq!(fields(e.clone()), ["team-a-lab.machines[1]"], "{e:?}");
    assert!(e[0].rule.contains("tenant team-b's namespace web-*"), "{}", e[0]);
    // A tenant lists no machines unless its settings say which.
    let mut b = config("web-lab", &["team-b"], "p-123456", 0);
    b.machines = Some(vec!["mac-01".into()]);
    let e = t.problems(&b, []);
    assert_eq!(fields(e.clone()), ["web-lab.machines[0]"]);
    assert!(e[0].rule.contains("tenant team-b may not list it"), "{}", e[0]);
}

#[test]
fn the_resources_a_vm_is_made_from_are_in_its_tenants_projects() {
    let t = trust(&["https://swarm.example.com"], TEAMS).unwrap();
    let mut c = config("team-a-ci", &["team-a"], "team-a-ci-7", 1);
    c.attributes.disk[0].image = "projects/debian-cloud/global/images/family/debian-12".into();
    c.attributes.network_interface[0].network = "projects/team-a-prod/global/networks/shared".into();
    assert!(t.problems(&c, []).is_empty(), "public images and its own projects");
    c.attributes.disk[0].image = "projects/team-b-prod/global/images/private".into();
    c.attributes.network_interface[0].subnetwork = "projects/team-b-prod/regions/r/subnetworks/s".into();
    c.attributes.machine_type =
        "https://www.googleapis.com/compute/v1/projects/team-b-prod/zones/z/machineTypes/x".into();
    c.fallback_machine_types =
        vec!["zones/z/machineTypes/y".into(), "projects/team-b-prod/zones/z/machineTypes/z".into()];
    let fields = fields(t.problems(&c, []));
    assert_eq!(
        fields,
        [
            "team-a-ci.attributes.machine_type",
            "team-a-ci.fallback_machine_types[1]",
            "team-a-ci.attributes.disk[0].image",
            "team-a-ci.attributes.network_interface[0].subnetwork"
        ]
    );
}
