//! The admin API at scale: `/sim/summary` counts and `/sim/state` pages.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::support::{SWARMING as S, SimHandle, fleet};

/// The zones of the fleets here, taken in turn.
const ZONES: &[&str] = &["us-central1-a", "us-central1-b"];

async fn status_of(s: &SimHandle, path: &str) -> (u16, Value) {
    let r = s.http.get(format!("{}{path}", s.base)).send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summary_counts_instances_bots_operations_calls_and_faults() {
    let (s, sim) = fleet(6, ZONES).await;
    let sum = s.admin_get("/sim/summary").await;
    assert_eq!(sum["instances"]["total"], 6);
    assert_eq!(sum["instances"]["RUNNING"], 6);
    assert_eq!(sum["zones"]["us-central1-a"]["RUNNING"], 3);
    assert_eq!(
        sum["bots"],
        json!({"total": 6, "alive": 6, "terminating": 0, "dead": 0, "terminated": 0, "deleted": 0})
    );
    assert_eq!(sum["operations"]["total"], 6);
    assert_eq!(sum["faults"], json!([]));

    s.admin_post("/sim/kill-bot", json!({"server": S, "botId": "vm-0000"})).await;
    s.admin_post("/sim/preempt", json!({"project": "proj", "zone": "us-central1-b", "name": "vm-0001"}))
        .await;
    s.admin_post("/sim/faults", json!({"stockout_zones": ["us-east1-b"]})).await;
    s.prpc(S, "DeleteBot", json!({"botId": "vm-0002"})).await.unwrap();
    let sum = s.admin_get("/sim/summary").await;
    assert_eq!(sum["instances"]["STOPPING"], 1, "{sum}");
    assert_eq!(sum["bots"]["dead"], 1);
    assert_eq!(sum["bots"]["deleted"], 1);
    assert_eq!(sum["faults"], json!(["stockout_zones.us-east1-b"]));
    assert_eq!(sum["calls"]["swarming.DeleteBot"], 1, "calls are totalled by method");
    let counts = sim.with(|w| (w.counts().clone(), w.scan_counts()));
    assert_eq!(counts.0, counts.1, "the summary's counts are a scan's");
}

/// Every page of `/sim/state` with `limit`, following nextPageToken.
async fn pages(s: &SimHandle, limit: usize) -> Vec<Value> {
    let mut out = Vec::new();
    let mut token = String::new();
    loop {
        let (st, page) = status_of(s, &format!("/sim/state?limit={limit}&pageToken={token}")).await;
        assert_eq!(st, 200, "{page}");
        assert!(
            page.get("operations").is_none() && page.get("inserts").is_none(),
            "pages hold instances and bots"
        );
        out.push(page.clone());
        match page["nextPageToken"].as_str() {
            Some(t) => token = t.to_owned(),
            None => return out,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_pages_cover_every_instance_then_every_bot_once() {
    let (s, _sim) = fleet(7, ZONES).await;
    let whole = s.admin_get("/sim/state").await;
    assert!(whole.get("nextPageToken").is_none() && whole["operations"].as_array().unwrap().len() == 7);
    for limit in [1, 3, 7, 14, 1000] {
        let pages = pages(&s, limit).await;
        assert_eq!(pages.len(), 14_usize.div_ceil(limit).max(1), "no empty last page (limit {limit})");
        let joined = |key: &str| -> Vec<Value> {
            pages.iter().flat_map(|p| p[key].as_array().unwrap().iter().cloned()).collect()
        };
        assert!(
            pages
                .iter()
                .all(|p| p["instances"].as_array().unwrap().len() + p["bots"].as_array().unwrap().len()
                    <= limit)
        );
        assert_eq!(joined("instances"), *whole["instances"].as_array().unwrap(), "limit {limit}");
        let ids: BTreeSet<String> =
            joined("bots").iter().map(|b| b["botId"].as_str().unwrap().to_owned()).collect();
        assert_eq!(ids.len(), 7, "limit {limit}");
    }
    let first = s.admin_get("/sim/state?limit=2").await;
    assert_eq!(first["instances"].as_array().unwrap().len(), 2);
    assert_eq!(
        s.admin_get("/sim/state?pageToken=").await["instances"].as_array().unwrap().len(),
        7,
        "default limit"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_pages_refuse_bad_limits_and_tokens() {
    let (s, _sim) = fleet(1, ZONES).await;
    for q in ["limit=0", "limit=10001", "limit=x", "pageToken=x", "pageToken=i/a/b", "pageToken=b/a/b/c"] {
        let (st, body) = status_of(&s, &format!("/sim/state?{q}")).await;
        assert_eq!(st, 400, "{q}: {body}");
    }
    // A token whose row went away still continues after its place.
    let (st, page) = status_of(&s, "/sim/state?pageToken=i/proj/us-central1-a/vm-0000a").await;
    assert_eq!(st, 200);
    assert_eq!(page["instances"], json!([]));
    assert_eq!(page["bots"][0]["botId"], "vm-0000");
}
