//! Task traces: `POST /sim/trace` checks every line before scheduling any, and plays the tasks
//! on the simulator's timeline at the speed asked; the generator is seeded and diurnal.

use std::time::Duration;

use gce_backend_sim::trace::{TraceParams, diurnal, diurnal_in, generate, parse, parse_dimensions};
use serde_json::json;

use crate::support::{eventually, start};
use crate::work::{bot_up, grouped};

async fn post_trace(s: &crate::support::SimHandle, query: &str, body: &str) -> (u16, serde_json::Value) {
    let r = s.http.post(format!("{}/sim/trace{query}", s.base)).body(body.to_owned()).send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_is_checked_then_played_at_its_speed() {
    let s = start(grouped()).await;
    let bad = "{\"at_s\": 0, \"duration_s\": 1, \"dimensions\": {\"pool\": \"ci\"}}\n{\"at_s\": -1, \"duration_s\": 1, \"dimensions\": {}}\n";
    let (status, v) = post_trace(&s, "", bad).await;
    assert_eq!(status, 400);
    assert!(v["error"].as_str().unwrap().contains("line 2"), "{v}");
    let (status, v) = post_trace(&s, "?speed=0", "").await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(s.admin_get("/sim/tasks").await["totals"]["total"], 0, "nothing scheduled");

    // Arrivals beyond any horizon are scheduled, not a crash.
    let far = "{\"at_s\": 1e300, \"duration_s\": 1e300, \"dimensions\": {\"pool\": \"never\"}}";
    let (status, v) = post_trace(&s, "?speed=1e-300", far).await;
    assert_eq!((status, v["scheduled"].clone()), (200, json!(1)), "{v}");

    bot_up(&s, "ci-linux-1-aaaa").await;
    // 100 times faster: arrivals at 0, 10 ms and 20 ms, each running 10 ms.
    let good = (0..3)
        .map(|n| json!({"at_s": n as f64, "duration_s": 1, "dimensions": {"pool": "ci"}}).to_string())
        .collect::<Vec<_>>()
        .join("\n");
    let (status, v) = post_trace(&s, "?speed=100", &good).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["scheduled"], 3);
    assert!(v["lastAt"].is_string() && v["lastAtMs"].is_u64(), "{v}");
    let all = eventually("the trace's tasks complete", Duration::from_secs(10), || async {
        let all = s.admin_get("/sim/tasks").await;
        (all["totals"]["COMPLETED"] == 3).then_some(all)
    })
    .await;
    let created: Vec<u64> =
        all["tasks"].as_array().unwrap().iter().map(|t| t["createdMs"].as_u64().unwrap()).collect();
    assert!(created[2] - created[0] >= 20, "arrivals 10 ms apart at speed 100: {created:?}");
    let durations: Vec<u64> =
        all["tasks"].as_array().unwrap().iter().map(|t| t["durationMs"].as_u64().unwrap()).collect();
    assert_eq!(durations, [10, 10, 10]);
}

#[test]
fn the_trace_parser_names_the_bad_line() {
    let ok = parse(
        "{\"at_s\": 1.5, \"duration_s\": 30, \"dimensions\": {\"pool\": \"ci\", \"os\": \"Linux|Mac\"}}\n\n",
    )
    .unwrap();
    assert_eq!(ok.len(), 1);
    assert_eq!(ok[0].dimensions["os"], ["Linux", "Mac"]);
    for (text, line) in [
        ("not json", "line 1"),
        ("{\"at_s\": 1, \"dimensions\": {}}", "line 1: duration_s"),
        ("\n{\"at_s\": 1, \"duration_s\": 0, \"dimensions\": {}}", "line 2: duration_s"),
        ("{\"at_s\": 1, \"duration_s\": 1, \"dimensions\": {\"pool\": 7}}", "line 1: dimensions"),
        ("{\"at_s\": 1, \"duration_s\": 1}", "line 1: dimensions"),
    ] {
        let e = parse(text).unwrap_err();
        assert!(e.starts_with(line), "{text:?} → {e}");
    }
}

#[test]
fn the_generator_is_seeded_and_diurnal() {
    let p = TraceParams {
        seed: 7,
        hours: 24.0,
        day_hours: 24.0,
        tasks: 5000,
        dimensions: parse_dimensions("pool=ci,os=Linux").unwrap(),
    };
    let a = generate(&p);
    assert_eq!(a, generate(&p), "same seed, same trace");
    assert_ne!(a, generate(&TraceParams { seed: 8, ..p.clone() }));
    assert_eq!(a.len(), 5000);
    assert!(a.windows(2).all(|w| w[0].at_s <= w[1].at_s), "sorted by arrival");
    assert!(a.iter().all(|t| t.at_s >= 0.0 && t.at_s <= 86_400.0 && t.duration_s >= 5.0));
    assert_eq!(a[0].dimensions["os"], ["Linux"]);
    // The quiet night (00:00–06:00) gets far fewer arrivals than the busy afternoon (11:00–17:00).
    let between =
        |from: f64, to: f64| a.iter().filter(|t| t.at_s >= from * 3600.0 && t.at_s < to * 3600.0).count();
    let (night, day) = (between(0.0, 6.0), between(11.0, 17.0));
    assert!(night * 3 < day, "night {night}, day {day}");
    assert!(diurnal(14.0 * 3600.0) > 0.99 && diurnal(2.0 * 3600.0) < 0.11);
    // Skewed durations: the mean well above the median.
    let mut d: Vec<f64> = a.iter().map(|t| t.duration_s).collect();
    d.sort_by(f64::total_cmp);
    let mean = d.iter().sum::<f64>() / d.len() as f64;
    assert!(mean > d[d.len() / 2] * 1.2, "mean {mean}, median {}", d[d.len() / 2]);
    // Bursts: some second holds ten or more arrivals.
    let mut per_second = std::collections::HashMap::new();
    for t in &a {
        *per_second.entry(t.at_s as u64).or_insert(0) += 1;
    }
    assert!(per_second.values().any(|&n| n >= 10), "a burst");
}

#[test]
fn a_compressed_day_keeps_its_shape() {
    let p = TraceParams {
        seed: 7,
        hours: 2.0,
        day_hours: 2.0,
        tasks: 3000,
        dimensions: parse_dimensions("pool=ci").unwrap(),
    };
    let a = generate(&p);
    assert_eq!(a.len(), 3000);
    assert!(a.iter().all(|t| t.at_s <= 7200.0));
    // The day of 2 hours: the night is its first half hour, the afternoon 55–85 minutes.
    let between =
        |from: f64, to: f64| a.iter().filter(|t| t.at_s >= from * 60.0 && t.at_s < to * 60.0).count();
    let (night, day) = (between(0.0, 30.0), between(55.0, 85.0));
    assert!(night * 3 < day, "night {night}, day {day}");
    assert!(diurnal_in(70.0 * 60.0, 2.0) > 0.99 && diurnal_in(10.0 * 60.0, 2.0) < 0.11);
    assert_eq!(diurnal_in(5000.0, 24.0), diurnal(5000.0));
    // Durations are not compressed: the median stays near two minutes.
    let mut d: Vec<f64> = a.iter().map(|t| t.duration_s).collect();
    d.sort_by(f64::total_cmp);
    assert!(d[d.len() / 2] > 90.0 && d[d.len() / 2] < 160.0, "median {}", d[d.len() / 2]);
}
