//! The authorization matrix: every method × anonymous, an unknown token and each role, on a
//! Config its groups own and on one they do not. A Config the caller may not read answers 404
//! exactly as a missing one; too little a role 403; no valid token 401.

use serde_json::{Value, json};

use super::{ADMIN, Client, TOKENS, config};
use crate::support::{Backend, Env, sim_config};
use gce_backend::api::auth::Role;
use gce_backend::api::auth::Role::{Admin, Metrics};
use gce_backend::api::methods::METHODS;

/// What a call must meet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Unauthenticated,
    Forbidden,
    Hidden,
    Allowed,
}

/// A token and who it stands for (none: anonymous or unknown).
type Who<'a> = (Option<&'a str>, Option<(Role, &'a [&'a str])>);

/// Methods that change a Config or its VMs.
const WRITES: &[&str] =
    &["updateConfig", "deleteConfig", "updateAmount", "pauseConfig", "resumeConfig", "recycleVm"];

/// The rule, written here independently of the server's.
fn expect(method: &str, need: Role, caller: Option<(Role, &[&str])>, owner: &str) -> Expect {
    if need == Role::Anyone {
        return Expect::Forbidden; // whoever asks: the proof sent here is no proof
    }
    let Some((role, groups)) = caller else { return Expect::Unauthenticated };
    // A metrics token calls no method; readers, writers and admins each may what the ones
    // before them may.
    if role == Role::Metrics || role < need {
        return Expect::Forbidden;
    }
    let admin = role == Role::Admin;
    let member = groups.contains(&owner);
    let scoped = METHODS.iter().find(|m| m.name == method).unwrap().route.contains("<prefix>")
        || METHODS.iter().find(|m| m.name == method).unwrap().route.contains("<id>");
    match method {
        "createConfig" if !(admin || member) => Expect::Forbidden,
        "createConfig" => Expect::Allowed,
        _ if !scoped => Expect::Allowed,
        _ if !(admin || member) => Expect::Hidden,
        m if WRITES.contains(&m) && !(admin || (role >= Role::Writer && member)) => Expect::Forbidden,
        _ => Expect::Allowed,
    }
}

/// Arguments and body of `method` aimed at the Config owned by `owner`.
fn request(method: &str, owner: &str, n: usize) -> (Vec<(&'static str, String)>, Option<Value>) {
    let prefix = format!("{owner}pool");
    let p = || vec![("prefix", prefix.clone())];
    match method {
        "createConfig" => {
            let fresh = format!("made{n}z");
            (vec![("prefix", fresh.clone())], Some(config(&fresh, &[owner], 0, 2)))
        }
        "updateConfig" => (p(), Some(config(&prefix, &[owner], 0, 2))),
        "updateAmount" => (p(), Some(json!({"amount": 1}))),
        "pauseConfig" | "pauseAll" => {
            (if method == "pauseConfig" { p() } else { vec![] }, Some(json!({"reason": "x"})))
        }
        "planConfig" => (p(), Some(json!({"amount": 1}))),
        "register" => (vec![], Some(json!({"proof": "not.a.token"}))),
        "config" | "deleteConfig" | "resumeConfig" | "listVms" | "configHistory" | "configSeries" => {
            (p(), None)
        }
        "vm" | "recycleVm" => (vec![("id", format!("{prefix}-0"))], None),
        "task" | "retryTask" => (vec![("queue", "create_vm".into()), ("taskId", "t".into())], None),
        m if m.ends_with("Tasks") || m.starts_with("purge") || m == "retryDead" => {
            (vec![("queue", "create_vm".into())], None)
        }
        _ => (vec![], None),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_method_answers_each_role_and_owner_as_the_rules_say() {
    let env = Env::start(Backend::Redis, sim_config(), &[], false).await;
    let api = Client::new(&super::serve(env.ctx.clone()).await).await;
    for owner in ["infra", "web"] {
        let prefix = format!("{owner}pool");
        api.ok(ADMIN, "createConfig", &[("prefix", &prefix)], Some(config(&prefix, &[owner], 0, 2))).await;
        let made = gce_backend_jobs::testing::created(env.ctx.now());
        env.ctx
            .seed_vm(&format!("{prefix}-0"), |v| {
                v.config = prefix.clone();
                made(v);
            })
            .await;
    }
    let mut callers: Vec<Who<'_>> = vec![(None, None), (Some("gbt_unknown"), None)];
    callers.extend(TOKENS.iter().map(|(t, _, role, groups)| (Some(*t), Some((*role, *groups)))));
    assert_eq!(api.methods().len(), METHODS.len());
    let (mut n, mut checked) = (0, 0);
    for m in METHODS {
        for owner in ["infra", "web"] {
            for (token, caller) in &callers {
                n += 1;
                let (args, body) = request(m.name, owner, n);
                let args: Vec<(&str, &str)> = args.iter().map(|(k, v)| (*k, v.as_str())).collect();
                let want = expect(m.name, m.role, *caller, owner);
                let (status, v) = api.call(*token, m.name, &args, body).await;
                let got = match status {
                    401 => Expect::Unauthenticated,
                    403 => Expect::Forbidden,
                    404 if !matches!(m.name, "task" | "retryTask") => Expect::Hidden,
                    s if s < 500 => Expect::Allowed,
                    _ => panic!("{} as {token:?} on {owner}: {status} {v}", m.name),
                };
                assert_eq!(got, want, "{} as {token:?} on {owner}'s Config: {status} {v}", m.name);
                checked += 1;
            }
        }
    }
    assert_eq!(checked, METHODS.len() * 2 * (2 + TOKENS.len()));
    assert!(TOKENS.iter().any(|t| t.2 == Role::Metrics), "a metrics token is in the matrix");
    // ROOT/metrics: a metrics or an admin token only.
    let http = reqwest::Client::new();
    let mut scrapes: Vec<(Option<&str>, u16)> = vec![(None, 401), (Some("gbt_unknown"), 401)];
    scrapes.extend(
        TOKENS
            .iter()
            .map(|(t, _, role, _)| (Some(*t), if matches!(role, Metrics | Admin) { 200 } else { 403 })),
    );
    for (token, want) in scrapes {
        let mut req = http.get(format!("{}/metrics", api.root));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let res = req.send().await.unwrap();
        let status = res.status().as_u16();
        let body = res.text().await.unwrap();
        assert_eq!(status, want, "/metrics as {token:?}: {body}");
        match want {
            200 => assert!(body.contains("gce_backend_"), "{body}"),
            403 => assert!(body.contains("needs the metrics role"), "{body}"),
            _ => {}
        }
    }
    // Tasks belong to the Config their key names: others' are left out of lists and hidden.
    let q = env.ctx.queues.get("manage_bot");
    let pushed =
        q.push("infrapool-0", &json!({"id": "infrapool-0"}), gce_backend_queues::When::Now).await.unwrap();
    let id = pushed.task_id().to_owned();
    let keys = |v: &Value| -> Vec<String> {
        v["tasks"].as_array().unwrap().iter().map(|t| t["key"].as_str().unwrap().to_owned()).collect()
    };
    let args = [("queue", "manage_bot")];
    for (token, seen) in [("gbt_reader_infra", true), ("gbt_reader_web", false), (ADMIN, true)] {
        let v = api.ok(token, "pendingTasks", &args, None).await;
        assert_eq!(keys(&v).contains(&"infrapool-0".to_owned()), seen, "{token}: {v}");
        let (status, _) =
            api.call(Some(token), "task", &[("queue", "manage_bot"), ("taskId", &id)], None).await;
        assert_eq!(status, if seen { 200 } else { 404 }, "{token}");
    }
    // A guarded key (`<VM id>@<hostname>`) belongs to the VM's Config too: one rule decides.
    let q = env.ctx.queues.get("terminate_bot");
    let key = "infrapool-3@infrapool-3-ab12";
    let payload = json!({"id": "infrapool-3", "hostname": "infrapool-3-ab12"});
    let id = q.push(key, &payload, gce_backend_queues::When::Now).await.unwrap().task_id().to_owned();
    for (token, seen) in [("gbt_reader_infra", true), ("gbt_reader_web", false)] {
        let v = api.ok(token, "pendingTasks", &[("queue", "terminate_bot")], None).await;
        assert_eq!(keys(&v).contains(&key.to_owned()), seen, "{token}: {v}");
        let (status, _) =
            api.call(Some(token), "task", &[("queue", "terminate_bot"), ("taskId", &id)], None).await;
        assert_eq!(status, if seen { 200 } else { 404 }, "{token}");
    }
    // A hidden Config reads exactly like a missing one.
    let (s1, hidden) = api.call(Some("gbt_reader_web"), "config", &[("prefix", "infrapool")], None).await;
    let (s2, missing) = api.call(Some("gbt_reader_web"), "config", &[("prefix", "nosuchpool")], None).await;
    assert_eq!((s1, s2), (404, 404));
    let strip =
        |v: &Value| v["message"].as_str().unwrap().replace("infrapool", "X").replace("nosuchpool", "X");
    assert_eq!(strip(&hidden), strip(&missing));
}
