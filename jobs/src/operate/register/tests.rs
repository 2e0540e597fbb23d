//! Unit tests of `register`: the happy path once per incarnation, and every refusal (a token of
//! an earlier incarnation, another instance under the name, wrong audience, expired, forged,
//! unknown instance or key).

use serde_json::json;

use super::*;
use crate::identity::{Key, keys_from_jwks};
use crate::ports::store::Expect;
use crate::testing::created;
use gce_backend_sim::identity::{KEY, KID, jwk, sign};

const AUD: &str = "https://gce-backend.example.com";
const FORGER: &str = include_str!("../../identity/testdata/b.pem");

fn published() -> Vec<Key> {
    keys_from_jwks(json!({"keys": [jwk(KEY, KID).unwrap()]}).to_string().as_bytes()).unwrap()
}

/// The token Google would give instance `name` (instance id `id`) for `aud`, `ttl` seconds long.
fn token(ctx: &Ctx, name: &str, id: &str, aud: &str, ttl: i64, pem: &str) -> RegisterInput {
    let now = ctx.now().timestamp();
    let claims = json!({
        "iss": "https://accounts.google.com", "aud": aud, "sub": "1", "iat": now, "exp": now + ttl,
        "google": {"compute_engine": {
            "instance_id": id, "instance_name": name, "zone": "z", "project_id": "test-project",
        }},
    });
    RegisterInput { proof: sign(&claims, KID, pem).unwrap(), provider: String::new() }
}

async fn setup() -> (Ctx, crate::testing::Fakes) {
    let (ctx, f) = Ctx::test();
    *f.keys.0.lock().unwrap() = published();
    ctx.seed_config("linux", 2).await;
    ctx.seed_vm("linux-0", created(ctx.now())).await;
    (ctx, f)
}

#[tokio::test]
async fn a_vm_registers_once_per_incarnation_and_its_bot_is_looked_at_at_once() {
    let (ctx, _) = setup().await;
    let input = token(&ctx, "linux-0-abcd", "id-linux-0-abcd", AUD, 3600, KEY);
    let r = register(&ctx, &input, AUD).await.unwrap();
    assert_eq!((r.vm.as_str(), r.config.as_str(), r.hostname.as_str()), ("linux-0", "linux", "linux-0-abcd"));
    assert_eq!(r.swarming, "https://swarm.example.com");
    assert_eq!(r.deadline, Some(ctx.now() + chrono::Duration::days(1)));
    assert_eq!(r.expires, ctx.now() + chrono::Duration::hours(1));
    assert_eq!(ctx.ports.store.vm("linux-0").await.unwrap().unwrap().value.registered, Some(ctx.now()));
    assert_eq!(ctx.taken::<ManageBot>().await, [ManageBot { id: "linux-0".into() }]);
    // The same token again (a replay, or a retry): refused, nothing pushed.
    assert_eq!(register(&ctx, &input, AUD).await.unwrap_err(), Refused("already registered"));
    assert!(ctx.taken::<ManageBot>().await.is_empty());
    // Counted by result, the refusal by its reason (which the caller is never told).
    let text = ctx.metrics.text();
    for line in [
        "gce_backend_registrations_total{result=\"ok\"} 1",
        "gce_backend_registrations_total{result=\"already registered\"} 1",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    }
}

#[tokio::test]
async fn a_token_of_an_earlier_incarnation_or_of_another_instance_under_the_name_is_refused() {
    let (ctx, f) = setup().await;
    let old = token(&ctx, "linux-0-abcd", "id-linux-0-abcd", AUD, 3600, KEY);
    // The VM was replaced: its next incarnation has another hostname.
    let v = ctx.ports.store.vm("linux-0").await.unwrap().unwrap();
    assert!(ctx.ports.store.delete_vm("linux-0", v.version).await.unwrap());
    ctx.seed_vm("linux-0", |v| {
        created(ctx.now())(v);
        v.hostname = "linux-0-wxyz".into();
    })
    .await;
    assert_eq!(register(&ctx, &old, AUD).await.unwrap_err(), Refused("no VM of that name"));
    // An instance made again under our hostname (not by us): another instance id.
    let other = token(&ctx, "linux-0-wxyz", "999", AUD, 3600, KEY);
    assert_eq!(register(&ctx, &other, AUD).await.unwrap_err(), Refused("another incarnation of the name"));
    // Before its instance is recorded (the insert's operation still runs), Compute is asked: an
    // instance of that id with another deployment's labels is not ours; with ours, it is.
    let mut v = ctx.ports.store.vm("linux-0").await.unwrap().unwrap();
    v.value.instance = None;
    assert!(ctx.ports.store.put_vm(&v.value, Expect::Version(v.version)).await.unwrap());
    assert_eq!(
        register(&ctx, &other, AUD).await.unwrap_err(),
        Refused("another incarnation of the name"),
        "no instance"
    );
    let plant = |deployment: &str| {
        let mut i = crate::testing::FakeCompute::instance(
            "linux-0-wxyz",
            &[("gce-backend", deployment), ("gce-backend-vm", "linux-0")],
        );
        i.id = "999".into();
        f.compute.instances.lock().unwrap().insert("linux-0-wxyz".into(), i);
    };
    plant("prod");
    assert_eq!(
        register(&ctx, &other, AUD).await.unwrap_err(),
        Refused("another incarnation of the name"),
        "not ours"
    );
    plant("test");
    register(&ctx, &other, AUD).await.unwrap();
}

#[tokio::test]
async fn wrong_audience_expired_forged_unknown_instance_and_unknown_key_are_refused() {
    let (ctx, f) = setup().await;
    let refused = |input: RegisterInput| {
        let ctx = &ctx;
        async move { register(ctx, &input, AUD).await.unwrap_err().0 }
    };
    let (name, id) = ("linux-0-abcd", "id-linux-0-abcd");
    assert_eq!(refused(token(&ctx, name, id, "https://other.example.com", 3600, KEY)).await, "audience");
    assert_eq!(refused(token(&ctx, name, id, AUD, -3600, KEY)).await, "expired");
    assert_eq!(refused(token(&ctx, name, id, AUD, 3600, FORGER)).await, "bad signature");
    assert_eq!(refused(token(&ctx, "linux-7-abcd", id, AUD, 3600, KEY)).await, "no VM of that name");
    assert_eq!(
        refused(token(&ctx, "prod-0-abcd", id, AUD, 3600, KEY)).await,
        "no VM of that name",
        "another deployment's"
    );
    let garbage = RegisterInput { proof: "x.y.z".into(), provider: String::new() };
    assert_eq!(refused(garbage).await, "not base64url");
    let elsewhere = RegisterInput { provider: "nope".into(), ..token(&ctx, name, id, AUD, 3600, KEY) };
    assert_eq!(refused(elsewhere).await, "no such provider");
    f.keys.0.lock().unwrap().clear();
    assert_eq!(refused(token(&ctx, name, id, AUD, 3600, KEY)).await, "unknown key id");
    assert_eq!(
        ctx.ports.store.vm("linux-0").await.unwrap().unwrap().value.registered,
        None,
        "never registered"
    );
}

#[tokio::test]
async fn registering_brings_a_later_look_at_the_bot_forward() {
    let (ctx, _) = setup().await;
    let later = gce_backend_queues::When::After(std::time::Duration::from_secs(10));
    ctx.push_at(&ManageBot { id: "linux-0".into() }, later).await.unwrap();
    assert!(ctx.taken::<ManageBot>().await.is_empty(), "scheduled for later");
    register(&ctx, &token(&ctx, "linux-0-abcd", "id-linux-0-abcd", AUD, 3600, KEY), AUD).await.unwrap();
    assert_eq!(ctx.taken::<ManageBot>().await, [ManageBot { id: "linux-0".into() }], "now");
}

#[tokio::test]
async fn a_vm_whose_record_names_an_unlisted_server_is_told_nothing() {
    let (ctx, _) = setup().await;
    // Written before the settings listed servers (or by hand): the attacker's server.
    let mut vm = ctx.ports.store.vm("linux-0").await.unwrap().unwrap();
    vm.value.swarming = "http://127.0.0.1:19999".into();
    assert!(ctx.ports.store.put_vm(&vm.value, Expect::Version(vm.version)).await.unwrap());
    let input = token(&ctx, "linux-0-abcd", "id-linux-0-abcd", AUD, 3600, KEY);
    assert_eq!(register(&ctx, &input, AUD).await.unwrap_err(), Refused("server not listed"));
    assert_eq!(ctx.ports.store.vm("linux-0").await.unwrap().unwrap().value.registered, None);
}
