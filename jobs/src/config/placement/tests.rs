//! Tests of where a Config's VMs go: the rules of `zone`, `zones` and `region`, and a region's
//! zones filled in from a project's.

use super::super::tests::YAML;
use super::*;

fn regional(region: &str, zones: &[(&str, u32)]) -> Config {
    let mut c = crate::testing::zoned(Config::parse(YAML, "linux.yaml").unwrap(), zones);
    c.region = region.into();
    c
}

fn said(c: &Config) -> Vec<String> {
    c.problems().into_iter().map(|e| format!("{}: {}", e.field, e.rule)).collect()
}

#[test]
fn a_region_is_a_name_like_compute_engines_with_no_zone_and_only_its_own_zones() {
    assert!(said(&regional("us-central1", &[])).is_empty());
    assert!(said(&regional("us-central1", &[("us-central1-a", 3), ("us-central1-f", 1)])).is_empty());
    assert!(said(&regional("northamerica-northeast2", &[])).is_empty());
    for bad in ["us-central1-a", "central", "US-CENTRAL1", "us-central1/../x", "-us1"] {
        assert_eq!(
            said(&regional(bad, &[])),
            [format!("linux.region: {bad:?} is not a region name like us-central1")],
            "{bad}"
        );
    }
    assert_eq!(
        said(&regional("us-central1", &[("us-central1-a", 1), ("us-east1-b", 1)])),
        ["linux.zones[1].zone: us-east1-b is not in region us-central1"]
    );
    let mut with_zone = regional("us-central1", &[]);
    with_zone.attributes.zone = "us-central1-b".into();
    assert_eq!(
        said(&with_zone),
        ["linux.attributes.zone: a pool with zones or a region names its zones there only: remove it"]
    );
    let mut nowhere = regional("", &[]);
    nowhere.attributes.zone.clear();
    assert_eq!(
        said(&nowhere),
        ["linux.attributes.zone: is required (or zones or region, for a pool over zones)"]
    );
}

#[test]
fn a_regions_zones_are_the_projects_zones_in_it_each_weighing_one() {
    let known: Vec<String> =
        ["us-central1-c", "us-east1-b", "us-central1-a", "us-central10-a", "europe-west1-b"]
            .map(String::from)
            .into();
    let mut c = regional("us-central1", &[]);
    assert!(c.needs_region_zones());
    c.fill_region(&known).unwrap();
    let zones: Vec<(&str, u32, bool)> =
        c.zones.iter().map(|z| (z.zone.as_str(), z.weight, z.from_region)).collect();
    assert_eq!(zones, [("us-central1-a", 1, true), ("us-central1-c", 1, true)]);
    assert!(said(&c).is_empty(), "the filled Config is valid as it is stored: {:?}", said(&c));

    // Read back and applied again (as a GET then a PUT does), it is filled in anew: a zone the
    // project has since takes its share, and another region may be named.
    assert!(c.needs_region_zones());
    let mut more = known.clone();
    more.push("us-central1-f".into());
    c.fill_region(&more).unwrap();
    assert_eq!(c.zones.len(), 3);
    c.region = "us-east1".into();
    assert!(said(&c).is_empty(), "zones filled from the old region are not the operator's: {:?}", said(&c));
    c.fill_region(&more).unwrap();
    let zones: Vec<&str> = c.zones.iter().map(|z| z.zone.as_str()).collect();
    assert_eq!(zones, ["us-east1-b"]);

    // Zones listed with it are kept as written.
    let mut listed = regional("us-central1", &[("us-central1-c", 5)]);
    listed.fill_region(&known).unwrap();
    assert_eq!(listed.zones.len(), 1);
    assert_eq!(listed.zones[0].weight, 5);

    let e = regional("asia-east2", &[]).fill_region(&known).unwrap_err();
    assert_eq!(e.field, "linux.region");
    assert_eq!(e.rule, "project my-project has no zones in region asia-east2 (zones.list)");
}

#[test]
fn a_static_pool_names_no_region() {
    let mut c = Config { prefix: "lab".into(), machines: Some(vec!["lab-host".into()]), ..Config::default() };
    c.region = "us-central1".into();
    let mut out = Vec::new();
    crate::config::providers::static_problems(&c, &|f| format!("lab.{f}"), &mut out);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].field, "lab.attributes");
}

#[test]
fn zone_lists_need_a_weighted_zone_distinct_names_and_bounded_weights() {
    let zoned = |zones: &[(&str, u32)]| {
        said(&crate::testing::zoned(Config::parse(YAML, "linux.yaml").unwrap(), zones))
    };
    assert!(zoned(&[("us-central1-a", 2), ("us-central1-b", 0)]).is_empty());
    assert!(zoned(&[("us-central1-a", 1000)]).is_empty());
    assert_eq!(zoned(&[("us-central1-a", 0)]), ["linux.zones: at least one zone needs a weight above 0"]);
    assert_eq!(
        zoned(&[("us-central1-a", 1), ("us-central1-a", 1)]),
        ["linux.zones[1].zone: is listed twice"]
    );
    assert_eq!(
        zoned(&[("us-central1-a", 4_000_000_000)]),
        ["linux.zones[0].weight: 4000000000; at most 1000"]
    );
}
