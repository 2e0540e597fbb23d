//! Unit tests of `adapters/billing.rs`, against the simulator in process.

use std::sync::Arc;

use gce_backend_jobs::ports::prices::{PriceError, PriceSource};
use gce_backend_sim::SimConfig;
use gce_backend_sim::auth::AuthSettings;

use super::{BILLING_READONLY, Billing};
use crate::adapters::google_auth::{Adc, USERINFO_EMAIL};

/// The simulator in process (`require_auth` as given) and its base URL.
async fn sim(require_auth: bool) -> (gce_backend_sim::Sim, String) {
    let auth = AuthSettings { require_auth, ..AuthSettings::default() };
    let (addr, sim) = gce_backend_sim::spawn(SimConfig { auth, ..SimConfig::default() }).await.unwrap();
    (sim, format!("http://{addr}"))
}

/// How many SKU pages the simulator answered with `status`.
fn pages(sim: &gce_backend_sim::Sim, status: u16) -> u64 {
    sim.with(|w| w.calls.get("cloudbilling.services.skus.list").and_then(|c| c.get(&status)).copied())
        .unwrap_or(0)
}

#[tokio::test]
async fn every_sku_is_read_page_by_page() {
    let (sim, base) = sim(false).await;
    let all = gce_backend_sim::prices::skus().len();
    let skus = Billing::simulator(&base, None).unwrap().paged(7, 100).skus().await.unwrap();
    assert_eq!(skus.len(), all);
    let mut ids: Vec<&str> = skus.iter().map(|s| s.sku_id.as_str()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), all, "each SKU once");
    assert_eq!(pages(&sim, 200), all.div_ceil(7) as u64);
    // The default page size takes them in one page.
    assert_eq!(Billing::simulator(&base, None).unwrap().skus().await.unwrap().len(), all);
    assert_eq!(pages(&sim, 200), all.div_ceil(7) as u64 + 1);
}

#[tokio::test]
async fn the_pages_are_capped() {
    let (_sim, base) = sim(false).await;
    let e = Billing::simulator(&base, None).unwrap().paged(1, 3).skus().await.unwrap_err();
    assert_eq!(e, PriceError::Malformed("more than 3 pages of SKUs".into()));
}

#[tokio::test]
async fn without_a_token_or_with_another_scope_the_call_is_refused() {
    let (sim, base) = sim(true).await;
    let e = Billing::simulator(&base, None).unwrap().skus().await.unwrap_err();
    assert!(matches!(&e, PriceError::Refused(m) if m.starts_with("401 UNAUTHENTICATED")), "{e}");
    let adc = Adc::metadata(base.trim_start_matches("http://")).unwrap();
    let email = Arc::new(adc.tokens(&[USERINFO_EMAIL]).unwrap());
    let e = Billing::simulator(&base, Some(email)).unwrap().skus().await.unwrap_err();
    assert!(matches!(&e, PriceError::Refused(m) if m.starts_with("403 PERMISSION_DENIED")), "{e}");
    assert_eq!(pages(&sim, 200), 0, "none answered");
    let billing = Arc::new(adc.tokens(&[BILLING_READONLY]).unwrap());
    let skus = Billing::simulator(&base, Some(billing)).unwrap().skus().await.unwrap();
    assert_eq!(skus.len(), gce_backend_sim::prices::skus().len());
    assert_eq!(pages(&sim, 200), 1);
}

#[tokio::test]
async fn an_unreachable_catalog_is_unreachable() {
    // A port nothing listens on.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let e = Billing::simulator(&base, None).unwrap().skus().await.unwrap_err();
    assert!(matches!(e, PriceError::Unreachable(_)), "{e}");
}

#[tokio::test]
async fn a_token_never_goes_to_plain_http_but_the_simulators() {
    let (_sim, base) = sim(true).await;
    let adc = Adc::metadata(base.trim_start_matches("http://")).unwrap();
    let tokens = Arc::new(adc.tokens(&[BILLING_READONLY]).unwrap());
    let e = Billing::new("http://billing.example.com", Some(tokens.clone())).unwrap_err();
    assert!(e.contains("https:// only"), "{e}");
    assert!(Billing::new(super::GOOGLE, Some(tokens)).is_ok());
    assert!(Billing::new("http://billing.example.com", None).is_ok());
    assert!(Billing::new("billing.example.com", None).is_err());
}

#[tokio::test]
async fn the_simulators_catalog_read_here_prices_each_family_and_region_as_the_snapshot_does() {
    let (_sim, base) = sim(false).await;
    let skus = Billing::simulator(&base, None).unwrap().paged(10, 100).skus().await.unwrap();
    let read = gce_backend_jobs::prices::Rates::from_skus(&skus);
    let snapshot = gce_backend_jobs::prices::book::PriceBook::snapshot().unwrap().rates();
    for region in ["us-central1", "us-east1", "europe-west1"] {
        for machine in
            ["e2-standard-2", "e2-micro", "n1-standard-4", "n2-standard-8", "n2d-highmem-4", "c3-standard-4"]
        {
            for spot in [false, true] {
                let (got, want) = (
                    read.machine_per_hour(machine, region, spot).unwrap(),
                    snapshot.machine_per_hour(machine, region, spot).unwrap(),
                );
                assert!(
                    got > 0.0 && (got - want).abs() < 1e-12,
                    "{machine} {region} spot={spot}: {got} vs {want}"
                );
            }
        }
        // A custom E2 type at E2's rates (4 vCPUs and 16 GiB cost what e2-standard-4 does); a
        // custom N2 type takes N2's custom SKUs, which the simulator's set lacks: unpriced.
        let custom = read.machine_per_hour("e2-custom-4-16384", region, false).unwrap();
        assert_eq!(custom, read.machine_per_hour("e2-standard-4", region, false).unwrap());
        assert!(read.machine_per_hour("n2-custom-4-16384", region, false).is_err());
        for disk in ["pd-standard", "pd-balanced", "pd-ssd"] {
            let got = read.disk_per_hour(disk, 100.0, region).unwrap();
            assert_eq!(got, snapshot.disk_per_hour(disk, 100.0, region).unwrap(), "{disk} {region}");
        }
        let suspended = read.suspended_per_hour("e2-standard-4", region).unwrap();
        assert!(
            suspended > 0.0 && suspended < read.machine_per_hour("e2-standard-4", region, false).unwrap()
        );
    }
    // What the catalog has no SKU for is unpriced, never free.
    assert!(read.machine_per_hour("a3-highgpu-8g", "us-central1", false).is_err());
    assert!(read.machine_per_hour("e2-standard-2", "mars-north1", false).is_err());
}
