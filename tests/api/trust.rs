//! Teams stay in their box over the API, on Redis and the simulator: no Config names an
//! unlisted server, reads a file, names a project
//! or a duration outside the rules, or takes, blocks or outgrows another tenant's share.

use std::collections::BTreeMap;
use std::sync::Arc;

use gce_backend_jobs::config::{SwarmingServers, Tenant, Trust};
use serde_json::{Value, json};

use super::{ADMIN, Client, WRITER, config};
use crate::support::{Backend, Env, sim_config};

/// The fields an error names.
fn fields(v: &Value) -> Vec<String> {
    v["fields"]
        .as_array()
        .map_or_else(Vec::new, |f| f.iter().map(|e| e["field"].as_str().unwrap().to_owned()).collect())
}

async fn refused(api: &Client, token: &str, prefix: &str, body: Value) -> (u16, Vec<String>, String) {
    let (status, v) = api.call(Some(token), "createConfig", &[("prefix", prefix)], Some(body)).await;
    (status, fields(&v), v.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_can_neither_reach_another_server_nor_a_file_nor_overflow_a_duration() {
    let env = Env::start(Backend::Redis, sim_config(), &[], false).await;
    let url = super::serve(env.ctx.clone()).await;
    let api = Client::new(&url).await;
    // Stands for the attacker's server (the Swarming adapter's own test runs one and sees it
    // never called).
    let addr = "127.0.0.1:19999";
    let with = |f: &dyn Fn(&mut Value)| {
        let mut c = config("leak", &["infra"], 1, 1);
        f(&mut c);
        c
    };
    let cases: Vec<(Value, &str)> = vec![
        (with(&|c| c["swarming"] = json!(format!("http://{addr}"))), "leak.swarming"),
        (with(&|c| c["swarming"] = json!(format!("http://evil.example@{addr}/p?q="))), "leak.swarming"),
        (with(&|c| c["swarming"] = json!("https://swarm.example.com:8443")), "leak.swarming"),
        (
            with(&|c| c["attributes"]["metadata"] = json!([{"from_file": "pw:../../../../etc/passwd"}])),
            "leak.attributes.metadata[0].from_file",
        ),
        (with(&|c| c["attributes"]["project"] = json!("../../x")), "leak.attributes.project"),
        (with(&|c| c["attributes"]["project"] = json!("a%2Fb")), "leak.attributes.project"),
        (with(&|c| c["attributes"]["project"] = json!("x".repeat(2000))), "leak.attributes.project"),
        (with(&|c| c["attributes"]["project"] = json!("my-pr\u{202e}oj")), "leak.attributes.project"),
        (with(&|c| c["attributes"]["zone"] = json!("us-central1-b/../../x")), "leak.attributes.zone"),
        (with(&|c| c["lifetime"] = json!("10000000000mo")), "leak.lifetime"),
        (with(&|c| c["lifetime"] = json!(u64::MAX)), "leak.lifetime"),
        (with(&|c| c["timeout"] = json!("2d")), "leak.timeout"),
    ];
    for (body, field) in cases {
        let (status, got, v) = refused(&api, WRITER, "leak", body).await;
        assert_eq!(status, 400, "{field}: {v}");
        assert!(got.iter().any(|f| f == field), "{field} not named: {v}");
    }
    assert!(env.ctx.ports.store.config("leak").await.unwrap().is_none(), "nothing stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_keep_their_namespaces_projects_accounts_and_share() {
    let mut env = Env::start(Backend::Redis, sim_config(), &[], false).await;
    let tenant = |prefixes: &[&str], max_vms| Tenant {
        prefixes: prefixes.iter().map(|p| (*p).to_owned()).collect(),
        projects: vec!["my-proj".into()],
        service_accounts: vec!["default".into()],
        machines: Vec::new(),
        max_vms,
        ..Tenant::default()
    };
    let tenants = BTreeMap::from([
        ("infra".to_owned(), tenant(&["infra-*"], Some(5))),
        ("web".to_owned(), tenant(&["web-*"], None)),
        ("*".to_owned(), Tenant::open()),
    ]);
    env.ctx.settings.trust = Arc::new(Trust::new(&SwarmingServers::default(), &tenants).unwrap());
    let url = super::serve(env.ctx.clone()).await;
    let api = Client::new(&url).await;
    // Squatting: a writer of infra can take neither a short prefix that would block every
    // later web-* nor one in web's namespace; nor can an admin for a Config of no tenant.
    for (token, prefix, owner) in
        [(WRITER, "w", "infra"), (WRITER, "web-x", "infra"), (WRITER, "web", "infra"), (ADMIN, "w", "")]
    {
        let owner: Vec<&str> = if owner.is_empty() { vec![] } else { vec![owner] };
        let (status, got, v) = refused(&api, token, prefix, config(prefix, &owner, 0, 0)).await;
        assert_eq!((status, got), (400, vec![format!("{prefix}.prefix")]), "{prefix}: {v}");
    }
    // Within its box: made. Past its share, another project or account: refused.
    let (status, v) = api
        .call(
            Some(WRITER),
            "createConfig",
            &[("prefix", "infra-a")],
            Some(config("infra-a", &["infra"], 1, 3)),
        )
        .await;
    assert_eq!(status, 201, "{v}");
    let (status, got, v) = refused(&api, WRITER, "infra-b", config("infra-b", &["infra"], 1, 3)).await;
    assert_eq!((status, got), (400, vec!["infra-b.amount".to_owned()]), "{v}");
    assert!(v.contains("max_vms is 5"), "{v}");
    let mut other = config("infra-c", &["infra"], 1, 1);
    other["attributes"]["project"] = json!("team-b-prod");
    other["attributes"]["service_account"] = json!([{"email": "owner@team-b-prod.iam.gserviceaccount.com"}]);
    let (status, got, v) = refused(&api, WRITER, "infra-c", other).await;
    assert_eq!(
        (status, got),
        (
            400,
            vec![
                "infra-c.attributes.project".to_owned(),
                "infra-c.attributes.service_account[0].email".to_owned()
            ]
        ),
        "{v}"
    );
    // web's namespace is still whole: its writer makes web-a.
    let (status, v) = api
        .call(
            Some("gbt_writer_web"),
            "createConfig",
            &[("prefix", "web-a")],
            Some(config("web-a", &["web"], 1, 1)),
        )
        .await;
    assert_eq!(status, 201, "{v}");
}
