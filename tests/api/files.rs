//! Config files the service does not follow, where operators look: `listConfigs` and `configs
//! list` show a file not applied (with why and since when) and a file gone whose Config's
//! deletion is held; `config` of a prefix whose file is not applied answers that file's errors
//! (declared in the OpenAPI document) instead of a bare 404; each team sees its own files only.

use serde_json::Value;

use super::cli::{cli, text};
use super::{ADMIN, Client, READER, WRITER};
use crate::support::{Backend, Env, pool, sim_config};
use gce_backend_queues::testing::eventually;

/// A reader of group web.
const READER_WEB: &str = "gbt_reader_web";

/// The tests' pool `prefix` owned by `owner`.
fn owned(prefix: &str, owner: &str) -> String {
    format!("{}owner: [{owner}]\n", pool(prefix, 1, "1d", "10m"))
}

/// The file entries of a `listConfigs` answer as (file name, prefix, kind).
fn entries(v: &Value) -> Vec<(String, String, String)> {
    let name = |p: &Value| p.as_str().unwrap().rsplit('/').next().unwrap().to_owned();
    v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                name(&f["path"]),
                f["prefix"].as_str().unwrap().to_owned(),
                f["kind"].as_str().unwrap_or("not_applied").to_owned(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_not_applied_and_held_deletions_are_shown_to_their_teams() {
    let pools = [("linux", owned("linux", "infra")), ("web", owned("web", "web"))];
    let env = Env::start(Backend::Redis, sim_config(), &pools, true).await;
    env.converged("linux", 1).await;
    env.converged("web", 1).await;
    let api = Client::new(env.api_url.as_deref().unwrap()).await;

    // infra adds a pool with a mistake; web removes its file the same round.
    let bad = owned("badzone", "infra").replace("amount: {min: 1, max: 1}", "amount: {min: 3, max: 1}");
    env.write_pool("badzone", &bad);
    std::fs::remove_file(env.dir.join("web.yaml")).unwrap();
    let all = eventually("both are listed", std::time::Duration::from_secs(60), || async {
        let v = api.ok(ADMIN, "listConfigs", &[], None).await;
        (entries(&v).len() == 2).then_some(v)
    })
    .await;
    let mut listed = entries(&all);
    listed.sort();
    assert_eq!(
        listed,
        [
            ("badzone.yaml".to_owned(), "badzone".to_owned(), "not_applied".to_owned()),
            ("web.yaml".to_owned(), "web".to_owned(), "deletion_held".to_owned()),
        ],
        "{all:#}"
    );
    let held = all["files"].as_array().unwrap().iter().find(|f| f["kind"] == "deletion_held").unwrap();
    assert!(held["message"].as_str().unwrap().contains("badzone.yaml"), "names what holds it: {held}");
    let web = all["configs"].as_array().unwrap().iter().find(|c| c["config"]["prefix"] == "web").unwrap();
    assert_eq!(
        (&web["status"]["state"], &web["files"][0]["kind"]),
        (&"active".into(), &"deletion_held".into())
    );
    assert!(
        env.ctx.ports.store.config("web").await.unwrap().unwrap().value.orphaned.is_none(),
        "not deleted"
    );

    // Each team sees its own entries only.
    assert_eq!(entries(&api.ok(WRITER, "listConfigs", &[], None).await)[0].0, "badzone.yaml");
    assert_eq!(entries(&api.ok(READER, "listConfigs", &[], None).await).len(), 1);
    assert_eq!(entries(&api.ok(READER_WEB, "listConfigs", &[], None).await)[0].0, "web.yaml");

    // `config` of the prefix not applied: 404 with why, to infra; a bare 404 to web.
    let (status, v) = api.call(Some(READER), "config", &[("prefix", "badzone")], None).await;
    assert_eq!(status, 404, "{v}");
    assert!(v["message"].as_str().unwrap().contains("badzone.yaml is not applied"), "{v}");
    assert!(v["files"][0]["message"].as_str().unwrap().contains("amount"), "{v}");
    let (status, v) = api.call(Some(READER_WEB), "config", &[("prefix", "badzone")], None).await;
    assert_eq!((status, v.get("files")), (404, None), "{v}");

    // The CLI: a section under `configs list`, the state of a held Config, the 404's reasons.
    let (out, err) = text(&cli(&env, WRITER, &["configs", "list"]));
    assert!(out.contains("Config files not followed (1):"), "{out}{err}");
    let row = out.lines().find(|l| l.contains("badzone.yaml")).unwrap_or_default();
    assert!(row.contains("badzone") && row.contains("not applied") && row.contains("amount"), "{out}");
    let (out, _) = text(&cli(&env, "gbt_writer_web", &["configs", "list"]));
    let web_row = out.lines().find(|l| l.starts_with("web ")).unwrap_or_default();
    assert!(web_row.contains("active, deletion held"), "{out}");
    let o = cli(&env, WRITER, &["configs", "get", "badzone"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("badzone.yaml is not applied") && err.contains("amount"), "{err}");

    // Fixed: the entries go, and web's deletion begins.
    env.write_pool("badzone", &owned("badzone", "infra"));
    eventually("nothing listed, web orphaned", std::time::Duration::from_secs(60), || async {
        let v = api.ok(ADMIN, "listConfigs", &[], None).await;
        let orphaned =
            env.ctx.ports.store.config("web").await.unwrap().is_none_or(|c| c.value.orphaned.is_some());
        (entries(&v).is_empty() && orphaned).then_some(())
    })
    .await;
    env.stop().await;
}
