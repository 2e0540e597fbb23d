//! Random input never makes the API fail on its side: arbitrary JSON bodies, route arguments
//! and query strings sent to every method (as admin, so every check is passed to the handler)
//! get a 2xx or a 4xx in the error shape, never a 5xx.

use proptest::prelude::*;
use serde_json::Value;

use super::{ADMIN, Client};
use crate::support::{Backend, Env, sim_config};

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        "[a-z{}.:/ -]{0,12}".prop_map(Value::String),
        Just(Value::String("zones/{{.Zone}}/machineTypes/e2-small".into())),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    "[a-z_]{1,10}",
                    Just("prefix".to_owned()),
                    Just("amount".to_owned()),
                    Just("config".to_owned()),
                    Just("attributes".to_owned()),
                    Just("min".to_owned()),
                    Just("max".to_owned()),
                    Just("disk".to_owned()),
                    Just("reason".to_owned()),
                ],
                inner,
                0..6
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

#[test]
fn random_bodies_routes_and_queries_never_give_a_5xx() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (env, api) = rt.block_on(async {
        let env = Env::start(Backend::Redis, sim_config(), &[], false).await;
        let url = super::serve(env.ctx.clone()).await;
        let api = Client::new(&url).await;
        api.ok(ADMIN, "createConfig", &[("prefix", "fuzz")], Some(super::config("fuzz", &["infra"], 0, 3)))
            .await;
        (env, api)
    });
    let methods = api.methods();
    let config =
        proptest::test_runner::Config { cases: 300, failure_persistence: None, ..Default::default() };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    // Route arguments: `.` and `..` are left out, a URL drops them (the CLI refuses them).
    let arg = "[a-zA-Z0-9%._ -]{0,20}".prop_filter("no dot segment", |a| a != "." && a != "..");
    let strategy = (0..methods.len(), json(), arg, "[a-zA-Z0-9_]{0,8}", "[a-zA-Z0-9 -]{0,8}");
    runner
        .run(&strategy, |(i, body, arg, qkey, qval)| {
            let method = &methods[i];
            let entry = api.entry(method).clone();
            let mut args: Vec<(String, String)> = entry["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| {
                    (a.as_str().unwrap().to_owned(), if arg.is_empty() { "fuzz".into() } else { arg.clone() })
                })
                .collect();
            if !qkey.is_empty() {
                args.push((qkey, qval));
            }
            let args: Vec<(&str, &str)> = args.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let body = entry.get("input").map(|_| body);
            // Client::call checks the answer's shape against the published schemas.
            let (status, v) = rt.block_on(api.call(Some(ADMIN), method, &args, body));
            prop_assert!(status < 500, "{method} {args:?}: {status} {v}");
            Ok(())
        })
        .unwrap();
    drop(env);
}
