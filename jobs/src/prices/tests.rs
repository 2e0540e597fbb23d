//! Unit tests of `prices.rs`: SKUs as the Catalog API words them, and the dated snapshot.

use serde_json::{Value, json};

use super::*;

/// A SKU as the Catalog API answers it.
fn sku(description: &str, usage: &str, regions: &[&str], unit: &str, units: &str, nanos: i64) -> Value {
    json!({
        "name": "services/6F81-5844-456A/skus/X", "skuId": "X", "description": description,
        "category": {"serviceDisplayName": "Compute Engine", "resourceFamily": "Compute", "resourceGroup": "CPU", "usageType": usage},
        "serviceRegions": regions,
        "pricingInfo": [{"pricingExpression": {"usageUnit": unit, "tieredRates": [
            {"startUsageAmount": 0, "unitPrice": {"currencyCode": "USD", "units": units, "nanos": nanos}}
        ]}}],
    })
}

fn rates(skus: Vec<Value>) -> Rates {
    Rates::from_skus(&serde_json::from_value::<Vec<Sku>>(Value::Array(skus)).unwrap())
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn a_machine_type_is_its_vcpus_and_memory_at_its_familys_rates_in_its_region() {
    let r = rates(vec![
        sku("E2 Instance Core running in Americas", "OnDemand", &["us-central1"], "h", "0", 21_811_590),
        sku("E2 Instance Ram running in Americas", "OnDemand", &["us-central1"], "GiBy.h", "0", 2_923_530),
        sku(
            "Spot Preemptible E2 Instance Core running in Americas",
            "Preemptible",
            &["us-central1"],
            "h",
            "0",
            6_543_000,
        ),
        sku(
            "Spot Preemptible E2 Instance Ram running in Americas",
            "Preemptible",
            &["us-central1"],
            "GiBy.h",
            "0",
            877_000,
        ),
        sku(
            "N1 Predefined Instance Core running in EMEA",
            "OnDemand",
            &["europe-west1"],
            "h",
            "0",
            34_773_500,
        ),
        sku(
            "N1 Predefined Instance Ram running in EMEA",
            "OnDemand",
            &["europe-west1"],
            "GiBy.h",
            "0",
            4_660_500,
        ),
        sku("E2 Instance Core running in Americas", "Commit1Yr", &["us-central1"], "h", "0", 1),
        sku("SSD backed PD Capacity", "OnDemand", &["us-central1"], "GiBy.mo", "0", 170_000_000),
        sku(
            "Suspended VM memory and device state storage",
            "OnDemand",
            &["us-central1"],
            "GiBy.mo",
            "0",
            40_000_000,
        ),
        sku("Licensing Fee for something", "OnDemand", &["us-central1"], "h", "1", 0),
    ]);
    let url = "zones/{{.Zone}}/machineTypes/e2-standard-2";
    let e2 = 2.0 * 0.021_811_59 + 8.0 * 0.002_923_53;
    assert!(
        close(r.machine_per_hour(url, "us-central1", false).unwrap(), e2),
        "a commitment price is not a list price"
    );
    let spot = 2.0 * 0.006_543 + 8.0 * 0.000_877;
    assert!(close(r.machine_per_hour("e2-standard-2", "us-central1", true).unwrap(), spot));
    assert!(close(
        r.machine_per_hour("e2-micro", "us-central1", false).unwrap(),
        0.25 * 0.021_811_59 + 0.002_923_53
    ));
    // E2 custom types bill at E2's rates; N1's shapes are their own.
    let custom = 4.0 * 0.021_811_59 + 10.0 * 0.002_923_53;
    assert!(close(r.machine_per_hour("e2-custom-4-10240", "us-central1", false).unwrap(), custom));
    assert!(close(
        r.machine_per_hour("n1-standard-4", "europe-west1", false).unwrap(),
        4.0 * 0.034_773_5 + 15.0 * 0.004_660_5
    ));
    // Per month over 730 hours.
    assert!(close(
        r.disk_per_hour("zones/z/diskTypes/pd-ssd", 100.0, "us-central1").unwrap(),
        100.0 * 0.17 / 730.0
    ));
    assert!(close(r.suspended_per_hour("e2-standard-2", "us-central1").unwrap(), 8.0 * 0.04 / 730.0));
}

#[test]
fn what_has_no_sku_is_unpriced_and_says_why_never_free() {
    let r = rates(vec![sku(
        "E2 Instance Core running in Americas",
        "OnDemand",
        &["us-central1"],
        "h",
        "0",
        21_811_590,
    )]);
    for (machine, region, spot) in [
        ("e2-standard-2", "us-central1", false), // no RAM SKU
        ("e2-standard-2", "europe-west1", false),
        ("e2-standard-2", "us-central1", true),
        ("n2-custom-4-16384", "us-central1", false), // N2 custom has SKUs of its own
        ("a2-highgpu-1g", "us-central1", false),
        ("n2-standard-4-ext", "us-central1", false),
        ("e2-standard-x", "us-central1", false),
    ] {
        let e = r.machine_per_hour(machine, region, spot).unwrap_err();
        assert!(e.to_string().starts_with("unpriced: "), "{machine}: {e}");
    }
    assert!(r.disk_per_hour("pd-extreme", 10.0, "us-central1").is_err());
    assert!(r.suspended_per_hour("e2-standard-2", "us-central1").is_err());
    let other_currency =
        sku("E2 Instance Ram running in Americas", "OnDemand", &["us-central1"], "GiBy.h", "0", 1);
    let mut eur = other_currency.clone();
    eur["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"]["currencyCode"] = json!("EUR");
    assert!(rates(vec![eur]).is_empty(), "a price in another currency is not read as dollars");
}

#[test]
fn the_dated_snapshot_prices_every_family_and_disk_it_lists_in_each_region() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/prices");
    let file = std::fs::read_dir(&dir).unwrap().map(|f| f.unwrap().path()).max().expect("a snapshot file");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let skus: Vec<Sku> = serde_json::from_value(doc["skus"].clone()).unwrap();
    let r = Rates::from_skus(&skus);
    for region in ["us-central1", "us-east1", "europe-west1"] {
        for machine in
            ["e2-standard-2", "n1-standard-4", "n2-standard-8", "n2d-highmem-4", "c3-standard-4", "e2-micro"]
        {
            for spot in [false, true] {
                let p = r
                    .machine_per_hour(machine, region, spot)
                    .unwrap_or_else(|e| panic!("{machine} {region}: {e}"));
                assert!(p > 0.0 && p < 10.0, "{machine} in {region}: {p} $/h");
            }
            let (standard, spot) = (
                r.machine_per_hour(machine, region, false).unwrap(),
                r.machine_per_hour(machine, region, true).unwrap(),
            );
            assert!(spot < standard, "{machine} in {region}: Spot {spot} is not below {standard}");
        }
        for disk in ["pd-standard", "pd-balanced", "pd-ssd"] {
            assert!(r.disk_per_hour(disk, 10.0, region).unwrap() > 0.0, "{disk} in {region}");
        }
        assert!(r.suspended_per_hour("e2-standard-2", region).unwrap() > 0.0);
    }
    // A region's price differs from another's where the snapshot says so (EMEA above Americas).
    let (us, eu) = (
        r.machine_per_hour("n2-standard-8", "us-central1", false).unwrap(),
        r.machine_per_hour("n2-standard-8", "europe-west1", false).unwrap(),
    );
    assert!(eu > us, "{eu} vs {us}");
}
