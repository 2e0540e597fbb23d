//! What the dashboard's cockpit reads from the API: whether the caller may change each Config
//! (`may_change`), and a Config's and the queues' last hour (`configSeries`, `queueSeries`) from
//! the samples in the Store. (What a VM view says of its rollout and its creation is tested in
//! `operate::vms::tests` and, as the page shows it, in `ui::cockpit`.)

use chrono::DurationRound;
use gce_backend_jobs::model::{Sample, Series};
use serde_json::{Value, json};

use super::{ADMIN, Client, READER, WRITER, config};
use crate::support::{Backend, Env, sim_config};

/// The prefixes of a `listConfigs` answer with their `may_change`.
fn may_change(list: &Value) -> Vec<(String, bool)> {
    let configs = list["configs"].as_array().unwrap();
    configs
        .iter()
        .map(|c| (c["config"]["prefix"].as_str().unwrap().to_owned(), c["may_change"] == true))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_says_what_a_caller_may_change_and_keeps_the_last_hour() {
    let env = Env::start(Backend::Redis, sim_config(), &[], false).await;
    let api = Client::new(&super::serve(env.ctx.clone()).await).await;
    for (prefix, owner) in [("infrapool", vec!["infra"]), ("shared", vec![])] {
        api.ok(ADMIN, "createConfig", &[("prefix", prefix)], Some(config(prefix, &owner, 2, 4))).await;
    }
    let list = |token| {
        let api = &api;
        async move { may_change(&api.ok(token, "listConfigs", &[], None).await) }
    };
    let mine = |a: bool, b: bool| vec![("infrapool".to_owned(), a), ("shared".to_owned(), b)];
    assert_eq!(list(ADMIN).await, mine(true, true), "an admin may change every Config");
    assert_eq!(list(WRITER).await, mine(true, false), "a writer of infra: infra's only");
    assert_eq!(list(READER).await, mine(false, false), "a reader: none");
    let one = api.ok(WRITER, "config", &[("prefix", "infrapool")], None).await;
    assert_eq!(one["may_change"], true, "one Config says it too");

    // The Store's samples: one older than an hour (left out), three a minute apart.
    let now = env.ctx.now().duration_trunc(chrono::Duration::minutes(1)).unwrap();
    let at = |m: i64| now - chrono::Duration::minutes(m);
    let put = |series: Series, m: i64, values: Vec<(&'static str, u64)>| {
        let store = env.ctx.ports.store.clone();
        async move { store.put_sample(&series, &Sample::of(at(m), &values)).await.unwrap() }
    };
    for (m, connected, retried) in [(70, 9, 0), (3, 0, 1), (2, 1, 4), (1, 2, 4)] {
        let cfg = vec![("created", 2), ("connected", connected), ("amount", 2)];
        put(Series::Config("infrapool".into()), m, cfg).await;
        let q = vec![("retried", retried), ("failed", m as u64 / 2), ("waiting", 5)];
        put(Series::Queue("create_instance".into()), m, q).await;
    }
    let s = api.ok(WRITER, "configSeries", &[("prefix", "infrapool")], None).await;
    let point = |m, created, connected, amount| json!({"at": at(m).to_rfc3339_opts(chrono::SecondsFormat::Secs, true), "created": created, "connected": connected, "amount": amount});
    assert_eq!(
        s,
        json!({"prefix": "infrapool", "points": [point(3, 2, 0, 2), point(2, 2, 1, 2), point(1, 2, 2, 2)]})
    );
    let (status, _) = api.call(Some(READER), "configSeries", &[("prefix", "nope")], None).await;
    assert_eq!(status, 404, "a Config that is not there (or hidden)");
    let q = api.ok(READER, "queueSeries", &[], None).await;
    let create = q["queues"].as_array().unwrap().iter().find(|q| q["name"] == "create_instance").unwrap();
    let at_ = |m| at(m).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    assert_eq!(
        create["points"],
        json!([
            {"at": at_(2), "retries": 3, "failures": 0, "waiting": 5},
            {"at": at_(1), "retries": 0, "failures": 0, "waiting": 5},
        ]),
        "what happened between two samples of the last hour"
    );
    assert!(
        q["queues"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|q| q["name"] != "create_instance")
            .all(|q| q["points"] == json!([]))
    );

    // The cron job writes them itself: infrapool's minute now, its counts and amount.
    gce_backend_jobs::cron::run(&env.ctx, "sample_series").await.unwrap();
    let s = api.ok(ADMIN, "configSeries", &[("prefix", "shared")], None).await;
    assert_eq!(s["points"].as_array().unwrap().len(), 1, "{s}");
    assert_eq!(s["points"][0]["amount"], 2, "{s}");
}
