//! The audit trail over HTTP: an operator's pause, amount and new revision read back from
//! `configHistory` with who, what and the revisions; paged newest first; hidden from another
//! team exactly as the Config is; kept after the Config is gone; the global trail for admins.

use serde_json::{Value, json};

use super::{ADMIN, Client, READER, WRITER, config};
use crate::support::{Backend, Env, sim_config};

/// (actor, action, before, after, detail) of each entry of a page.
fn said(v: &Value) -> Vec<(String, String, Value, Value, String)> {
    let s = |e: &Value, k: &str| e[k].as_str().unwrap_or_default().to_owned();
    v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                s(e, "actor"),
                s(e, "action"),
                e["before_revision"].clone(),
                e["after_revision"].clone(),
                s(e, "detail"),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operators_actions_are_read_back_from_the_configs_history() {
    let env = Env::start(Backend::Redis, sim_config(), &[], false).await;
    let api = Client::new(&super::serve(env.ctx.clone()).await).await;
    let p = [("prefix", "hist")];
    let made = api.ok(WRITER, "createConfig", &p, Some(config("hist", &["infra"], 0, 4))).await;
    let r1 = made["status"]["revision"].clone();
    api.ok(WRITER, "pauseConfig", &p, Some(json!({"reason": "image rollout"}))).await;
    api.ok(WRITER, "updateAmount", &p, Some(json!({"amount": 3}))).await;
    let next = api.ok(WRITER, "updateConfig", &p, Some(config("hist", &["infra"], 0, 5))).await;
    let r2 = next["status"]["revision"].clone();
    assert_ne!(r1, r2);
    let w = "writer-infra".to_owned();
    let want = vec![
        (w.clone(), "update".to_owned(), r1.clone(), r2.clone(), String::new()),
        (w.clone(), "amount".to_owned(), r1.clone(), r1.clone(), "amount 0 → 3".to_owned()),
        (w.clone(), "pause".to_owned(), r1.clone(), r1.clone(), "image rollout".to_owned()),
        (w.clone(), "create".to_owned(), Value::Null, r1.clone(), String::new()),
    ];
    let all = api.ok(READER, "configHistory", &p, None).await;
    assert_eq!(said(&all), want, "{all:#}");
    assert!(all.get("continuationToken").is_none());
    // Paged, newest first.
    let first = api.ok(READER, "configHistory", &[("prefix", "hist"), ("limit", "3")], None).await;
    assert_eq!(said(&first), want[..3]);
    let token = first["continuationToken"].as_str().unwrap().to_owned();
    let rest = api
        .ok(
            READER,
            "configHistory",
            &[("prefix", "hist"), ("limit", "3"), ("continuationToken", &token)],
            None,
        )
        .await;
    assert_eq!(said(&rest), want[3..]);
    assert!(rest.get("continuationToken").is_none());
    let (status, _) = api
        .call(Some(READER), "configHistory", &[("prefix", "hist"), ("continuationToken", "x")], None)
        .await;
    assert_eq!(status, 400);

    // Another team: 404, word for word as for a prefix that never existed.
    let (s1, hidden) = api.call(Some("gbt_reader_web"), "configHistory", &p, None).await;
    let (s2, missing) =
        api.call(Some("gbt_reader_web"), "configHistory", &[("prefix", "nopool")], None).await;
    assert_eq!((s1, s2), (404, 404));
    let strip = |v: &Value| v["message"].as_str().unwrap().replace("hist", "X").replace("nopool", "X");
    assert_eq!(strip(&hidden), strip(&missing));

    // Deleted, and then gone for good: who deleted it stays answerable, to the same readers.
    api.ok(WRITER, "deleteConfig", &p, None).await;
    let version = env.ctx.ports.store.config("hist").await.unwrap().unwrap().version;
    assert!(env.ctx.ports.store.delete_config("hist", version).await.unwrap());
    let after = api.ok(READER, "configHistory", &p, None).await;
    assert_eq!(said(&after)[0].0, "writer-infra");
    assert_eq!(said(&after)[0].1, "delete");
    assert_eq!(said(&after).len(), 5);
    api.ok(ADMIN, "configHistory", &p, None).await;
    let (status, _) = api.call(Some("gbt_reader_web"), "configHistory", &p, None).await;
    assert_eq!(status, 404, "still hidden from another team");

    // The global trail: admins only.
    api.ok(ADMIN, "pauseAll", &[], Some(json!({"reason": "incident"}))).await;
    api.ok(ADMIN, "resumeAll", &[], None).await;
    let global = api.ok(ADMIN, "history", &[], None).await;
    let got: Vec<(String, String)> = said(&global).into_iter().map(|e| (e.0, e.1)).collect();
    assert_eq!(got, [("admin".into(), "resume_all".into()), ("admin".into(), "pause_all".into())]);
    let (status, _) = api.call(Some(WRITER), "history", &[], None).await;
    assert_eq!(status, 403);
}
