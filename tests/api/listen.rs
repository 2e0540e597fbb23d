//! The API's listener against one pushy client (rates set low through `[http]`, on a clock
//! that moves only when a test says, so nothing depends on the machine's speed): past its rate
//! a token, or an address, gets 429 with `Retry-After` in the API's error shape, counted in
//! `/metrics`, while other tokens and the address's health checks still answer; a token that
//! does not authenticate has no rate of its own; `register` has its own rate per address; a
//! connection over the cap per address is closed at once and counted; a flood of validly signed
//! proofs for unknown VMs writes one log line, not one per refusal; the simulator's agents
//! register each from an address of its own, as VMs do; and `[http]`'s header timeout reaches
//! the listener `run` starts.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gce_backend::settings::Http;
use gce_backend_jobs::Ctx;
use gce_backend_jobs::config::Secs;
use gce_backend_jobs::ports::buckets::Rate;
use gce_backend_jobs::ports::clock::ManualClock;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{ADMIN, Client, READER, WRITER, serve_with};
use crate::support::{Backend, Env, pool, settings, sim_config};

const V1: &str = "/api/gce-backend/v1";

/// A limit of `burst` requests, then one a second (of the test's clock).
fn slow(burst: u32) -> Rate {
    Rate { rate: 1.0, burst }
}

/// `env`'s context on a clock that stands still until the test moves it.
fn frozen(env: &Env) -> (Ctx, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::at(env.ctx.now()));
    let mut ctx = env.ctx.clone();
    ctx.ports.clock = clock.clone();
    (ctx, clock)
}

/// Status, `Retry-After` and JSON body of `req`'s answer.
async fn send(req: reqwest::RequestBuilder) -> (u16, Option<u64>, Value) {
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    let retry = res.headers().get("retry-after").map(|v| v.to_str().unwrap().parse::<u64>().unwrap());
    let id = res.headers().get("x-request-id").map(|v| v.to_str().unwrap().to_owned());
    let body: Value = res.json().await.unwrap_or(Value::Null);
    if status == 429 {
        assert_eq!(body["code"], "TooManyRequests", "{body}");
        assert_eq!(body["requestId"].as_str(), id.as_deref(), "the API's error shape: {body}");
        assert_eq!(retry, Some(1), "Retry-After in whole seconds: one token a second");
    }
    (status, retry, body)
}

/// `gce_backend_http_throttled_total{listener="api",by=…}` in a `/metrics` text.
fn throttled(metrics: &str, by: &str) -> u64 {
    let line = format!("gce_backend_http_throttled_total{{listener=\"api\",by=\"{by}\"}} ");
    metrics.lines().find_map(|l| l.strip_prefix(&line)).map_or(0, |n| n.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_past_its_rate_gets_429_with_retry_after_and_other_tokens_do_not() {
    let env = Env::start(Backend::Memory, sim_config(), &[], false).await;
    let (ctx, clock) = frozen(&env);
    let (root, _) = serve_with(ctx, &Http { per_token: slow(3), ..Http::default() }).await;
    let api = Client::new(&root).await;
    for _ in 0..3 {
        api.ok(READER, "listConfigs", &[], None).await;
    }
    let http = reqwest::Client::new();
    let configs = format!("{root}{V1}/configs");
    let (status, _, body) = send(http.get(&configs).bearer_auth(READER)).await;
    assert_eq!(status, 429, "{body}");
    assert!(body["message"].as_str().unwrap().contains("with this token"), "{body}");
    assert!(super::check("get", &format!("{V1}/configs"), status, &body), "declared in the OpenAPI document");
    // The same address, another token: answered.
    api.ok(WRITER, "listConfigs", &[], None).await;
    // A second later, one more.
    clock.advance(chrono::Duration::seconds(1));
    assert_eq!(send(http.get(&configs).bearer_auth(READER)).await.0, 200);
    assert_eq!(send(http.get(&configs).bearer_auth(READER)).await.0, 429);
    let metrics = http.get(format!("{root}/metrics")).bearer_auth(ADMIN).send().await.unwrap();
    let metrics = metrics.text().await.unwrap();
    assert_eq!(throttled(&metrics, "token"), 2, "{metrics}");
    assert_eq!(throttled(&metrics, "address"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_that_does_not_authenticate_has_no_rate_of_its_own() {
    let env = Env::start(Backend::Memory, sim_config(), &[], false).await;
    let (ctx, _) = frozen(&env);
    let (root, metrics) = serve_with(ctx, &Http { per_token: slow(2), ..Http::default() }).await;
    let http = reqwest::Client::new();
    let configs = format!("{root}{V1}/configs");
    // The same guess again and again, and new guesses: 401 each, never throttled as a token
    // (nor given a bucket a flood of guesses could fill).
    for i in 0..6 {
        let guess = if i % 2 == 0 { "gbt_guess".to_owned() } else { format!("gbt_guess_{i}") };
        let (status, _, body) = send(http.get(&configs).bearer_auth(guess)).await;
        assert_eq!(status, 401, "{body}");
    }
    // The valid token's own bucket is untouched by them.
    for _ in 0..2 {
        assert_eq!(send(http.get(&configs).bearer_auth(READER)).await.0, 200);
    }
    assert_eq!(send(http.get(&configs).bearer_auth(READER)).await.0, 429);
    assert_eq!(throttled(&metrics.render().await, "token"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_past_its_rate_gets_429_whatever_its_token_and_its_health_checks_still_answer() {
    let env = Env::start(Backend::Memory, sim_config(), &[], false).await;
    let (ctx, _) = frozen(&env);
    let (root, metrics) = serve_with(ctx, &Http { per_address: slow(5), ..Http::default() }).await;
    let http = reqwest::Client::new();
    let manifest = format!("{root}/references/manifest.json");
    for _ in 0..5 {
        assert_eq!(send(http.get(&manifest)).await.0, 200);
    }
    let (status, _, body) = send(http.get(&manifest)).await;
    assert_eq!(status, 429, "{body}");
    assert!(body["message"].as_str().unwrap().contains("from this address"), "{body}");
    let (status, _, body) = send(http.get(format!("{root}{V1}/configs")).bearer_auth(ADMIN)).await;
    assert_eq!(status, 429, "a fresh token from the same address");
    assert!(super::check("get", &format!("{V1}/configs"), status, &body), "declared in the OpenAPI document");
    // Health checks draw from their own bucket: the flood above left them theirs.
    for path in ["/healthz", "/readyz", "/healthz", "/readyz", "/healthz"] {
        assert_eq!(send(http.get(format!("{root}{path}"))).await.0, 200, "{path}");
    }
    let (status, _, body) = send(http.get(format!("{root}/healthz"))).await;
    assert_eq!(status, 429, "but they have a rate too: {body}");
    let text = metrics.render().await;
    assert_eq!((throttled(&text, "address"), throttled(&text, "health")), (2, 1), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_has_its_own_stricter_rate_per_address() {
    let env = Env::start(Backend::Memory, sim_config(), &[], false).await;
    let (ctx, _) = frozen(&env);
    let limits = Http { register_per_address: slow(4), ..Http::default() };
    let (root, metrics) = serve_with(ctx, &limits).await;
    let http = reqwest::Client::new();
    let register = format!("{root}{V1}/register");
    for _ in 0..4 {
        let (status, _, body) = send(http.post(&register).json(&json!({"proof": "not.a.token"}))).await;
        assert_eq!(status, 403, "{body}");
    }
    let (status, _, body) = send(http.post(&register).json(&json!({"proof": "not.a.token"}))).await;
    assert_eq!(status, 429, "{body}");
    assert!(body["message"].as_str().unwrap().contains("to register"), "{body}");
    // The rest of the API, from the same address, is not held back by it.
    assert_eq!(send(http.get(format!("{root}/references/manifest.json"))).await.0, 200);
    assert_eq!(throttled(&metrics.render().await, "register"), 1);
}

/// Reads one answer's head from `c` (within 20 s).
async fn head(c: &mut tokio::net::TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(20), c.read(&mut buf)).await.unwrap().unwrap();
        assert!(n > 0, "closed before an answer");
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_over_the_cap_per_address_is_closed_at_once_and_counted() {
    let env = Env::start(Backend::Memory, sim_config(), &[], false).await;
    let (root, metrics) =
        serve_with(env.ctx.clone(), &Http { max_connections_per_address: 2, ..Http::default() }).await;
    let addr = root.trim_start_matches("http://").to_owned();
    // Two silent connections (the header timeout is 10 s away), then a third with a request.
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
    }
    let mut third = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let _ = third.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await;
    let mut got = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(20), third.read_to_end(&mut got)).await;
    assert!(closed.is_ok() && got.is_empty(), "the third was served: {:?}", String::from_utf8_lossy(&got));
    // The two held are served still.
    for c in &mut held {
        c.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        assert!(head(c).await.starts_with("HTTP/1.1 200"));
    }
    assert_eq!(throttled(&metrics.render().await, "connections"), 1);
}

/// Log lines written on this thread (the test's runtime is single-threaded: its server too).
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logs {
    type Writer = Logs;
    fn make_writer(&'a self) -> Logs {
        self.clone()
    }
}

#[tokio::test]
async fn validly_signed_proofs_for_unknown_vms_are_refused_with_one_log_line_not_one_each() {
    let logs = Logs::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(logs.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::WARN)
        .finish();
    let _on_this_thread = tracing::subscriber::set_default(subscriber);
    let env = Env::start(Backend::Memory, sim_config(), &[], false).await;
    let unlimited = Rate { rate: 0.0, burst: 1 };
    let (root, _) =
        serve_with(env.ctx.clone(), &Http { register_per_address: unlimited, ..Http::default() }).await;
    let http = reqwest::Client::new();
    let now = env.ctx.now().timestamp();
    for i in 0..20 {
        let claims = json!({
            "iss": "https://accounts.google.com", "aud": root, "azp": "1", "sub": "7",
            "iat": now, "exp": now + 600,
            "google": {"compute_engine": {
                "instance_id": "7", "instance_name": format!("ghost-{i}-abcd"), "zone": "us-central1-b",
                "project_id": "p", "project_number": 1, "instance_creation_timestamp": now,
            }},
        });
        let proof = gce_backend::sim::identity::sign(
            &claims,
            gce_backend::sim::identity::KID,
            gce_backend::sim::identity::KEY,
        )
        .unwrap();
        let (status, _, body) =
            send(http.post(format!("{root}{V1}/register")).json(&json!({"proof": proof}))).await;
        assert_eq!(status, 403, "{body}");
    }
    let metrics =
        http.get(format!("{root}/metrics")).bearer_auth(ADMIN).send().await.unwrap().text().await.unwrap();
    assert!(
        metrics.contains("gce_backend_registrations_total{result=\"no VM of that name\"} 20"),
        "each refusal counted, the signature having held: {metrics}"
    );
    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("registration refused")).collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(lines[0].contains("WARN") && lines[0].contains("no VM of that name"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_header_timeout_of_the_settings_closes_a_silent_connection_to_the_api() {
    let mut s = settings();
    s.http.header_read_timeout = Secs(1);
    let env = Env::start_with(Backend::Memory, sim_config(), &[], true, s).await;
    let addr = env.api_url.clone().unwrap().trim_start_matches("http://").to_owned();
    let mut silent = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let mut trickle = tokio::net::TcpStream::connect(&addr).await.unwrap();
    trickle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    let keep_trickling = tokio::spawn(async move {
        for i in 0..100 {
            tokio::time::sleep(Duration::from_millis(300)).await;
            if trickle.write_all(format!("X-{i}: y\r\n").as_bytes()).await.is_err() {
                return;
            }
        }
    });
    let mut got = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(10), silent.read_to_end(&mut got)).await;
    assert!(closed.is_ok() && got.is_empty(), "a silent connection was kept: {got:?}");
    let trickled = tokio::time::timeout(Duration::from_secs(10), keep_trickling).await;
    assert!(trickled.is_ok(), "a trickled head was still read after 10 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_simulated_vm_registers_from_an_address_of_its_own_past_a_strict_rate_per_address() {
    let mut s = settings();
    // One registration per address every 100 s: all from one address, the second would wait.
    s.http.register_per_address = Rate { rate: 0.01, burst: 1 };
    let env = Env::start_with(Backend::Memory, sim_config(), &[], true, s).await;
    let api = env.api_url.clone().expect("the API");
    let yaml = pool("agent", 3, "1d", "10m").replace(
        "  label: {team: e2e}\n",
        &format!(
            "  label: {{team: e2e}}\n  metadata: [{{from_text: \"register-url:{api}/api/gce-backend/v1/register\"}}, \
             {{from_text: \"register-audience:http://localhost\"}}]\n"
        ),
    );
    std::fs::write(env.dir.join("agent.yaml"), yaml).unwrap();
    env.converged("agent", 3).await;
    gce_backend_queues::testing::eventually("every VM registered", Duration::from_secs(30), || async {
        let mut n = 0;
        for id in ["agent-0", "agent-1", "agent-2"] {
            n += env.ctx.ports.store.vm(id).await.unwrap().is_some_and(|v| v.value.registered.is_some())
                as usize;
        }
        (n == 3).then_some(())
    })
    .await;
    let calls: Value =
        reqwest::get(format!("{}/sim/calls", env.sim_url)).await.unwrap().json().await.unwrap();
    assert_eq!(calls["calls"]["agent.register"], json!({"200": 3}), "each at once, none throttled");
}
