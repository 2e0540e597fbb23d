//! The Cloud Billing Catalog API as the simulator serves it from the price snapshot: paging walks
//! every SKU once (pages of 1, 7 and the default), bad parameters and tokens are refused with
//! Google's error body, `--require-auth` refuses a missing, foreign or under-scoped token as
//! Google does, the snapshot file has every field the API gives, and the official Python client
//! lists it (`billing_catalog.py`).

use gce_backend_sim::SimConfig;
use gce_backend_sim::auth::{AuthSettings, CLOUD_BILLING_READONLY, CLOUD_PLATFORM, USERINFO_EMAIL};
use gce_backend_sim::prices::{self, SNAPSHOT, SNAPSHOT_PATH};
use serde_json::{Value, json};

use crate::support::{SimHandle, quick, start};

const SKUS: &str = "/v1/services/6F81-5844-456A/skus";

/// `GET path` with `query` and `authorization`: the status and the body.
async fn get(s: &SimHandle, path: &str, query: &[(&str, &str)], authorization: Option<&str>) -> (u16, Value) {
    let mut req = s.http.get(format!("{}{path}", s.base)).query(query);
    if let Some(a) = authorization {
        req = req.header("authorization", a);
    }
    let r = req.send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// Every SKU id, walking the pages of `size` (none: the default); checks each page's length.
async fn walk(s: &SimHandle, size: Option<usize>) -> Vec<String> {
    let (mut ids, mut token, mut pages) = (Vec::new(), String::new(), 0);
    loop {
        let size_s = size.map(|n| n.to_string());
        let mut q = vec![];
        if let Some(n) = &size_s {
            q.push(("pageSize", n.as_str()));
        }
        if !token.is_empty() {
            q.push(("pageToken", token.as_str()));
        }
        let (status, body) = get(s, SKUS, &q, None).await;
        assert_eq!(status, 200, "{body}");
        let page = body["skus"].as_array().unwrap();
        ids.extend(page.iter().map(|k| k["skuId"].as_str().unwrap().to_owned()));
        token = body["nextPageToken"].as_str().expect("nextPageToken is always there").to_owned();
        pages += 1;
        if token.is_empty() {
            assert!(page.len() <= size.unwrap_or(5000));
            break;
        }
        assert_eq!(Some(page.len()), size, "every page but the last is full");
    }
    let want = size.map_or(1, |n| prices::skus().len().div_ceil(n));
    assert_eq!(pages, want, "pages of {size:?}");
    ids
}

fn snapshot_ids() -> Vec<String> {
    prices::skus().iter().map(|k| k["skuId"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn paging_walks_every_sku_once() {
    let s = start(quick()).await;
    let all = snapshot_ids();
    let mut unique = all.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), all.len(), "skuIds are unique");
    for size in [Some(1), Some(7), None] {
        assert_eq!(walk(&s, size).await, all, "pages of {size:?}");
    }
    // Past the largest page: served as 5000; 0 is the default.
    for size in ["100000", "0"] {
        let (status, body) = get(&s, SKUS, &[("pageSize", size), ("currencyCode", "USD")], None).await;
        assert_eq!((status, body["skus"].as_array().unwrap().len()), (200, all.len()));
        assert_eq!(body["nextPageToken"], "");
    }
    let (status, body) = get(&s, "/v1/services", &[], None).await;
    assert_eq!(status, 200);
    assert_eq!(
        body["services"],
        json!([{"name": "services/6F81-5844-456A", "serviceId": "6F81-5844-456A",
                "displayName": "Compute Engine", "businessEntityName": "businessEntities/GCP"}])
    );
    let calls = s.admin_get("/sim/summary").await;
    assert_eq!(calls["calls"]["cloudbilling.services.list"], 1, "{}", calls["calls"]);
}

/// A body in Google's error shape of `code` and `status`, without Compute's legacy `errors`.
fn google_error(body: &Value, code: u16, status: &str) {
    let e = &body["error"];
    assert_eq!((e["code"].as_u64(), e["status"].as_str()), (Some(code.into()), Some(status)), "{body}");
    assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    assert!(e.get("errors").is_none(), "{body}");
}

#[tokio::test]
async fn bad_parameters_and_tokens_are_refused_as_google_refuses_them() {
    let s = start(quick()).await;
    let (_, first) = get(&s, SKUS, &[("pageSize", "2")], None).await;
    let token = first["nextPageToken"].as_str().unwrap().to_owned();
    let (status, second) = get(&s, SKUS, &[("pageSize", "2"), ("pageToken", &token)], None).await;
    assert_eq!(status, 200);
    assert_ne!(first["skus"][0], second["skus"][0]);
    for q in [
        vec![("pageToken", "garbage")],
        vec![("pageToken", &token[..token.len() - 1])],
        vec![("pageSize", "-1")],
        vec![("pageSize", "ten")],
        vec![("currencyCode", "EUR")],
        vec![("pageFilter", "x")],
    ] {
        let (status, body) = get(&s, SKUS, &q, None).await;
        assert_eq!(status, 400, "{q:?}: {body}");
        google_error(&body, 400, "INVALID_ARGUMENT");
    }
    // A token of the SKUs is not one of the services list.
    let (status, body) = get(&s, "/v1/services", &[("pageToken", &token)], None).await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = get(&s, "/v1/services/0000-0000-0000/skus", &[], None).await;
    assert_eq!(status, 404, "{body}");
    google_error(&body, 404, "NOT_FOUND");
}

/// A metadata-server token with `scopes`, as `Bearer …`.
async fn bearer(s: &SimHandle, scopes: &str) -> String {
    let r = s
        .http
        .get(format!("{}/computeMetadata/v1/instance/service-accounts/default/token", s.base))
        .header("Metadata-Flavor", "Google")
        .query(&[("scopes", scopes)])
        .send()
        .await
        .unwrap();
    let t: Value = r.json().await.unwrap();
    format!("Bearer {}", t["access_token"].as_str().unwrap())
}

#[tokio::test]
async fn with_require_auth_the_catalog_takes_a_current_token_of_its_scopes_only() {
    let auth = AuthSettings { require_auth: true, ..AuthSettings::default() };
    let s = start(SimConfig { auth, ..quick() }).await;
    let (status, body) = get(&s, SKUS, &[], None).await;
    assert_eq!(status, 401, "{body}");
    google_error(&body, 401, "UNAUTHENTICATED");
    let info = &body["error"]["details"][0];
    assert_eq!(
        (info["reason"].as_str(), info["metadata"]["service"].as_str()),
        (Some("CREDENTIALS_MISSING"), Some("cloudbilling.googleapis.com")),
        "{body}"
    );
    let (status, body) = get(&s, "/v1/services", &[], Some("Bearer ya29.forged")).await;
    assert_eq!(status, 401, "{body}");
    let email = bearer(&s, USERINFO_EMAIL).await;
    let (status, body) = get(&s, SKUS, &[], Some(&email)).await;
    assert_eq!(status, 403, "{body}");
    google_error(&body, 403, "PERMISSION_DENIED");
    assert_eq!(body["error"]["details"][0]["reason"], "ACCESS_TOKEN_SCOPE_INSUFFICIENT");
    for scope in [CLOUD_BILLING_READONLY, CLOUD_PLATFORM] {
        let (status, body) = get(&s, SKUS, &[], Some(&bearer(&s, scope).await)).await;
        assert_eq!(status, 200, "{scope}: {body}");
    }
    let report = s.admin_get("/sim/auth").await;
    let billing = &report["standings"]["billing"];
    assert_eq!(
        (
            billing["missing"].as_u64(),
            billing["invalid"].as_u64(),
            billing["scope"].as_u64(),
            billing["current"].as_u64()
        ),
        (Some(1), Some(1), Some(1), Some(2)),
        "{report}"
    );
}

#[test]
fn the_snapshot_has_every_field_the_api_gives_and_covers_the_fleet() {
    let doc: Value = serde_json::from_str(SNAPSHOT).unwrap();
    let date = doc["snapshotDate"].as_str().unwrap();
    assert!(
        SNAPSHOT_PATH.ends_with(&format!("compute-engine-{date}.json")),
        "{SNAPSHOT_PATH} is dated {date}"
    );
    assert!(doc["note"].as_str().is_some_and(|n| n.contains("snapshot")));
    let skus = prices::parse(SNAPSHOT).unwrap();
    for k in &skus {
        let id = k["skuId"].as_str().unwrap();
        assert!(doc["provenance"][id]["price"].is_string(), "{id}: no provenance");
    }
    // Every region of the simulator's zones, every family the pools use: core and RAM, on demand
    // and Spot; each disk type; a suspended instance's saved state.
    let has = |desc: &str, usage: &str, region: &str| {
        skus.iter().any(|k| {
            k["description"].as_str().unwrap().starts_with(desc)
                && k["category"]["usageType"] == usage
                && k["serviceRegions"].as_array().unwrap().iter().any(|r| r == region)
        })
    };
    for region in ["us-central1", "us-east1", "europe-west1"] {
        for fam in ["E2", "N1 Predefined", "N2", "N2D AMD", "C3"] {
            for part in ["Core", "Ram"] {
                assert!(has(&format!("{fam} Instance {part}"), "OnDemand", region), "{fam} {part} {region}");
                let spot = format!("Spot Preemptible {fam} Instance {part}");
                assert!(has(&spot, "Preemptible", region), "{spot} {region}");
            }
        }
        for disk in ["Storage PD Capacity", "Balanced PD Capacity", "SSD backed PD Capacity", "Suspended VM"]
        {
            assert!(has(disk, "OnDemand", region), "{disk} {region}");
        }
    }
    // The check refuses what the API would never answer.
    let mut broken = skus[0].clone();
    broken.as_object_mut().unwrap().remove("geoTaxonomy");
    assert!(prices::check_sku(&broken).is_err());
    let mut broken = skus[0].clone();
    broken["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"]["nanos"] = json!("5");
    assert!(prices::check_sku(&broken).is_err());
}

/// The Python interpreter with google-cloud-billing: `$GCE_BACKEND_PYTHON`, else `python3`.
fn python() -> String {
    let name = std::env::var("GCE_BACKEND_PYTHON").unwrap_or_else(|_| "python3".into());
    let found = std::process::Command::new(&name)
        .args(["-c", "import google.cloud.billing_v1"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "{name} cannot import google.cloud.billing_v1: scripts/test installs it (scripts/requirements.txt)"
    );
    name
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_client_lists_every_sku() {
    let s = start(quick()).await;
    let path = format!("{}/tests/billing_catalog.py", env!("CARGO_MANIFEST_DIR"));
    let out = tokio::process::Command::new(python())
        .arg(&path)
        .args([s.base.as_str(), &snapshot_ids().join(",")])
        .output()
        .await
        .expect("run python");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "billing_catalog.py failed:\n{text}");
    assert_eq!(text.trim(), "ok");
    let calls = s.admin_get("/sim/summary").await;
    let pages = prices::skus().len().div_ceil(7) as u64;
    assert_eq!(calls["calls"]["cloudbilling.services.skus.list"].as_u64(), Some(pages), "{}", calls["calls"]);
}
