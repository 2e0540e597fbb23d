//! Registration over HTTP, as an on-VM agent does it: the simulator mints the instance's identity
//! token (its metadata server's answer), the VM sends it to `register` without any API token,
//! and is registered once; every proof that does not hold gets the same 403.

use serde_json::{Value, json};

use super::{Client, serve};
use crate::support::{Backend, Env, pool, sim_config};

/// The token the simulator gives instance `name` of VM `vm` for `audience` (None: 404).
async fn mint(env: &Env, vm: &gce_backend_jobs::model::Vm, name: &str, audience: &str) -> Option<String> {
    let body = json!({"project": vm.project(), "zone": vm.zone(), "name": name, "audience": audience});
    let res = reqwest::Client::new()
        .post(format!("{}/sim/identity", env.sim_url))
        .json(&body)
        .send()
        .await
        .unwrap();
    if res.status() == 404 {
        return None;
    }
    assert_eq!(res.status(), 200);
    Some(res.json::<Value>().await.unwrap()["token"].as_str().unwrap().to_owned())
}

/// Proofs made from the genuine `token` of a VM not registered yet (its claims kept): alg none,
/// HS256 keyed with the published public key, another key id, another issuer (signed with the
/// published key), another hostname.
async fn forgeries(env: &Env, token: &str) -> Vec<(&'static str, String)> {
    use base64::Engine as _;
    use gce_backend::sim::identity::{KEY, KID, jwk, sign};
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let body = token.split('.').nth(1).unwrap();
    let claims: Value =
        serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(body).unwrap())
            .unwrap();
    let public: Value =
        reqwest::get(format!("{}/oauth2/v3/certs", env.sim_url)).await.unwrap().json().await.unwrap();
    assert_eq!(public["keys"][0], jwk(KEY, KID).unwrap(), "the published key");
    // HS256 by hand: the header, the claims, and their MAC keyed with the published key.
    let hs256 = format!("{}.{}", b64(&json!({"alg": "HS256", "typ": "JWT", "kid": KID})), b64(&claims));
    let secret = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, public["keys"][0].to_string().as_bytes());
    let mac =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(ring::hmac::sign(&secret, hs256.as_bytes()));
    let changed = |k: &str, v: &str| {
        let mut c = claims.clone();
        c[k] = json!(v);
        c
    };
    let mut other_host = claims.clone();
    other_host["google"]["compute_engine"]["instance_name"] = json!("reg-9-zzzz");
    vec![
        ("alg none", format!("{}.{body}.", b64(&json!({"alg": "none", "kid": KID})))),
        ("HS256 keyed with the public key", format!("{hs256}.{mac}")),
        ("another key id", sign(&claims, "another-kid", KEY).unwrap()),
        ("another issuer", sign(&changed("iss", "https://evil.example.com"), KID, KEY).unwrap()),
        ("another hostname", sign(&other_host, KID, KEY).unwrap()),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_registers_once_with_its_identity_token_and_every_bad_proof_gets_one_403() {
    let env = Env::start(Backend::Redis, sim_config(), &[("reg", pool("reg", 2, "1d", "10m"))], true).await;
    env.converged("reg", 2).await;
    let root = serve(env.ctx.clone()).await;
    let api = Client::new(&root).await;
    let vm = env.ctx.ports.store.vm("reg-0").await.unwrap().unwrap().value;
    let token = mint(&env, &vm, &vm.hostname, &root).await.expect("a live instance");

    let (status, r) = api.call(None, "register", &[], Some(json!({"proof": token}))).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!((r["vm"].as_str(), r["hostname"].as_str()), (Some("reg-0"), Some(vm.hostname.as_str())));
    assert_eq!(r["swarming"].as_str(), Some(vm.swarming.as_str()));
    assert!(r["deadline"].is_string() && r["expires"].is_string(), "{r}");
    let stored = env.ctx.ports.store.vm("reg-0").await.unwrap().unwrap().value;
    assert!(stored.registered.is_some(), "recorded in Redis");

    // Each of these is refused with the same answer, whatever was wrong.
    let other = env.ctx.ports.store.vm("reg-1").await.unwrap().unwrap().value;
    let mut bad = vec![
        ("replayed", token.clone()),
        (
            "another audience",
            mint(&env, &other, &other.hostname, "https://elsewhere.example.com").await.unwrap(),
        ),
        ("tampered", format!("{}x", &token[..token.len() - 1])),
        ("garbage", "not.a.token".into()),
    ];
    let forged = token.split('.').take(2).collect::<Vec<_>>().join(".") + ".c2lnbmF0dXJl";
    bad.push(("forged signature", forged));
    // Made from a genuine token of reg-1, which is not registered: only the forgery refuses it.
    let genuine = mint(&env, &other, &other.hostname, &root).await.unwrap();
    bad.extend(forgeries(&env, &genuine).await);
    let mut answers = Vec::new();
    for (what, proof) in bad {
        let (status, v) = api.call(None, "register", &[], Some(json!({"proof": proof}))).await;
        assert_eq!(status, 403, "{what}: {v}");
        answers.push((v["code"].clone(), v["message"].clone()));
    }
    // Bodies that do not parse are refused alike (no parser message tells what was expected).
    for body in ["{", "{\"proof\": 7}", "{\"token\": \"x\"}", ""] {
        let res = reqwest::Client::new()
            .post(format!("{root}/api/gce-backend/v1/register"))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 403, "{body:?}");
        let v: Value = res.json().await.unwrap();
        answers.push((v["code"].clone(), v["message"].clone()));
    }
    answers.dedup();
    assert_eq!(answers, [(json!("InsufficientRole"), json!("registration refused"))], "one answer for all");
    assert!(env.ctx.ports.store.vm("reg-1").await.unwrap().unwrap().value.registered.is_none());
    // Each refused for its own reason, counted (and never told to the caller).
    let counted = env.ctx.metrics.text();
    for (reason, n) in [("not RS256", 2), ("unknown key id", 1), ("issuer", 1), ("no VM of that name", 1)] {
        let line = format!("gce_backend_registrations_total{{result=\"{reason}\"}} {n}");
        assert!(counted.lines().any(|l| l == line), "{line} in\n{counted}");
    }
    // The simulator mints only for live instances.
    assert!(mint(&env, &vm, "reg-9-zzzz", &root).await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulators_agents_register_on_boot_when_the_config_says_where() {
    let env = Env::start(Backend::Redis, sim_config(), &[], true).await;
    let api = env.api_url.clone().expect("the API");
    // The API's root URL in these tests is http://localhost (ApiArgs::default): the audience.
    let yaml = pool("agent", 2, "1d", "10m").replace(
        "  label: {team: e2e}\n",
        &format!(
            "  label: {{team: e2e}}\n  metadata: [{{from_text: \"register-url:{api}/api/gce-backend/v1/register\"}}, \
             {{from_text: \"register-audience:http://localhost\"}}]\n"
        ),
    );
    std::fs::write(env.dir.join("agent.yaml"), yaml).unwrap();
    env.converged("agent", 2).await;
    gce_backend_queues::testing::eventually(
        "both VMs registered",
        std::time::Duration::from_secs(30),
        || async {
            let mut n = 0;
            for id in ["agent-0", "agent-1"] {
                n += env.ctx.ports.store.vm(id).await.unwrap().is_some_and(|v| v.value.registered.is_some())
                    as usize;
            }
            (n == 2).then_some(())
        },
    )
    .await;
    let calls: Value =
        reqwest::get(format!("{}/sim/calls", env.sim_url)).await.unwrap().json().await.unwrap();
    assert_eq!(calls["calls"]["agent.register"], json!({"200": 2}), "each agent once, accepted");
}
