//! The dated snapshot of Compute Engine's list prices (`config/prices/compute-engine-*.json`),
//! embedded: one file the simulator serves as the Cloud Billing Catalog API (`billing.rs`) and the
//! service reads as its fallback when that API cannot be reached. Its `skus` are the API's own
//! `Sku` objects; [`check_sku`] says whether one has every field the API gives.

use std::sync::OnceLock;

use serde_json::Value;

/// The snapshot file's text, as the repository holds it.
pub const SNAPSHOT: &str = include_str!("../../config/prices/compute-engine-2026-12-07.json");
/// The snapshot's path in the repository (for messages and the service's fallback).
pub const SNAPSHOT_PATH: &str = "config/prices/compute-engine-2026-12-07.json";
/// Compute Engine's service id in the Catalog API.
pub const COMPUTE_SERVICE_ID: &str = "6F81-5844-456A";
/// Compute Engine's display name in the Catalog API.
pub const COMPUTE_DISPLAY_NAME: &str = "Compute Engine";

/// The snapshot's SKUs, parsed once; every one passed [`check_sku`] (a snapshot that does not
/// parse, or a SKU that does not pass, is a bug of the repository's: the simulator's tests fail).
pub fn skus() -> &'static [Value] {
    static SKUS: OnceLock<Vec<Value>> = OnceLock::new();
    SKUS.get_or_init(|| parse(SNAPSHOT).unwrap_or_else(|e| panic!("{SNAPSHOT_PATH}: {e}")))
}

/// The SKUs of a snapshot's text, each checked.
pub fn parse(text: &str) -> Result<Vec<Value>, String> {
    let doc: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let Some(skus) = doc["skus"].as_array() else {
        return Err("no skus array".into());
    };
    for (i, s) in skus.iter().enumerate() {
        check_sku(s).map_err(|e| format!("skus[{i}] ({}): {e}", s["skuId"]))?;
    }
    Ok(skus.clone())
}

fn string<'a>(v: &'a Value, field: &str) -> Result<&'a str, String> {
    v[field].as_str().filter(|s| !s.is_empty()).ok_or_else(|| format!("{field}: not a non-empty string"))
}

fn number(v: &Value, field: &str) -> Result<f64, String> {
    v[field].as_f64().ok_or_else(|| format!("{field}: not a number"))
}

/// Whether `sku` has every field the Catalog API gives a Compute Engine SKU, of the right types:
/// `name` (`services/6F81-5844-456A/skus/<skuId>`), `skuId`, `description`, `category`,
/// `serviceRegions`, `pricingInfo` (with a pricing expression in USD whose `units` is a string
/// and `nanos` an integer), `serviceProviderName` and `geoTaxonomy`.
pub fn check_sku(sku: &Value) -> Result<(), String> {
    let id = string(sku, "skuId")?;
    if string(sku, "name")? != format!("services/{COMPUTE_SERVICE_ID}/skus/{id}") {
        return Err("name: not services/6F81-5844-456A/skus/<skuId>".into());
    }
    string(sku, "description")?;
    let c = &sku["category"];
    if string(c, "serviceDisplayName")? != COMPUTE_DISPLAY_NAME {
        return Err("category.serviceDisplayName: not Compute Engine".into());
    }
    for f in ["resourceFamily", "resourceGroup", "usageType"] {
        string(c, f).map_err(|e| format!("category.{e}"))?;
    }
    let regions =
        sku["serviceRegions"].as_array().filter(|r| !r.is_empty() && r.iter().all(Value::is_string));
    let regions = regions.ok_or("serviceRegions: not a list of regions")?;
    let infos = sku["pricingInfo"].as_array().filter(|p| !p.is_empty()).ok_or("pricingInfo: empty")?;
    for p in infos {
        string(p, "effectiveTime").map_err(|e| format!("pricingInfo.{e}"))?;
        number(p, "currencyConversionRate").map_err(|e| format!("pricingInfo.{e}"))?;
        let e = &p["pricingExpression"];
        for f in ["usageUnit", "usageUnitDescription", "baseUnit"] {
            string(e, f).map_err(|e| format!("pricingExpression.{e}"))?;
        }
        for f in ["baseUnitConversionFactor", "displayQuantity"] {
            number(e, f).map_err(|e| format!("pricingExpression.{e}"))?;
        }
        let tiers = e["tieredRates"].as_array().filter(|t| !t.is_empty()).ok_or("tieredRates: empty")?;
        for t in tiers {
            number(t, "startUsageAmount").map_err(|e| format!("tieredRates.{e}"))?;
            let u = &t["unitPrice"];
            if string(u, "currencyCode")? != "USD" {
                return Err("unitPrice.currencyCode: not USD".into());
            }
            string(u, "units")?.parse::<i64>().map_err(|_| "unitPrice.units: not an integer string")?;
            u["nanos"].as_i64().filter(|n| n.abs() < 1_000_000_000).ok_or("unitPrice.nanos: not nanos")?;
        }
    }
    string(sku, "serviceProviderName")?;
    let g = &sku["geoTaxonomy"];
    string(g, "type").map_err(|e| format!("geoTaxonomy.{e}"))?;
    if g["regions"].as_array() != Some(regions) {
        return Err("geoTaxonomy.regions: not the serviceRegions".into());
    }
    Ok(())
}
