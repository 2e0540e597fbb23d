//! Test harness: an in-process simulator on a free loopback port, the official Compute Engine
//! clients pointed at it (anonymous credentials, fast backoff), and a small pRPC client.

#![allow(unreachable_pub)]

use std::io::Read as _;
use std::time::Duration;

use gce_backend_sim::{self as sim, SimConfig};
use google_cloud_compute_v1::client::{Instances, RegionInstances, Regions, ZoneOperations, Zones};
use google_cloud_gax::error::Error;
use google_cloud_gax::error::rpc::StatusDetails;
use google_cloud_gax::exponential_backoff::ExponentialBackoffBuilder;
use google_cloud_lro::Poller;
use serde_json::{Value, json};

/// A running simulator and clients for it.
pub struct SimHandle {
    pub base: String,
    pub http: reqwest::Client,
    /// With no automatic gzip: [`SimHandle::prpc_raw`] chooses `Accept-Encoding` and sees the
    /// body as sent.
    no_gzip: reqwest::Client,
}

/// The Swarming server of [`fleet`]'s bots.
pub const SWARMING: &str = "swarm.example.com";

fn fast() -> google_cloud_gax::exponential_backoff::ExponentialBackoff {
    ExponentialBackoffBuilder::new()
        .with_initial_delay(Duration::from_millis(20))
        .with_maximum_delay(Duration::from_millis(100))
        .build()
        .expect("valid backoff")
}

fn anonymous() -> google_cloud_auth::credentials::Credentials {
    google_cloud_auth::credentials::anonymous::Builder::new().build()
}

/// Fast delays so tests converge in well under a second per step.
pub fn quick() -> SimConfig {
    SimConfig {
        op_ms: 100,
        provision_ms: 50,
        stage_ms: 50,
        stop_ms: 50,
        bot_connect_ms: 100,
        bot_death_ms: 200,
        ..SimConfig::default()
    }
}

pub async fn start(cfg: SimConfig) -> SimHandle {
    start_with_world(cfg).await.0
}

/// [`start`], with the simulator's world for direct changes and checks.
pub async fn start_with_world(cfg: SimConfig) -> (SimHandle, sim::Sim) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (addr, sim) = sim::spawn(cfg).await.expect("start simulator");
    let no_gzip = reqwest::Client::builder().no_gzip().build().unwrap();
    (SimHandle { base: format!("http://{addr}"), http: reqwest::Client::new(), no_gzip }, sim)
}

/// A simulator with `n` running instances `vm-0000`…, in `zones` in turn (project `proj`), and
/// their bots connected to [`SWARMING`].
pub async fn fleet(n: usize, zones: &[&str]) -> (SimHandle, sim::Sim) {
    let (s, sim) = start_with_world(quick()).await;
    sim.with(|w| {
        for k in 0..n {
            let body = json!({"name": format!("vm-{k:04}"), "machineType": "e2-small",
                              "metadata": {"items": [{"key": "swarming-server", "value": format!("https://{SWARMING}")}]}});
            w.insert("proj", zones[k % zones.len()], None, &body).unwrap();
        }
    });
    eventually("the bots connect", Duration::from_secs(20), || async {
        let c = s.prpc(SWARMING, "CountBots", json!({})).await.ok()?;
        (c["count"] == n).then_some(())
    })
    .await;
    (s, sim)
}

/// A pRPC answer as sent: HTTP status, headers, body (gzipped if it was sent so).
pub struct Raw {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Vec<u8>,
}

impl Raw {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    /// The body as text, decompressed if it was sent gzipped.
    pub fn text(&self) -> String {
        if self.header("content-encoding") == Some("gzip") {
            let mut out = String::new();
            flate2::read::GzDecoder::new(self.body.as_slice()).read_to_string(&mut out).unwrap();
            out
        } else {
            String::from_utf8(self.body.clone()).unwrap()
        }
    }

    /// The JSON of a success.
    pub fn json(&self) -> Value {
        let text = self.text();
        serde_json::from_str(text.strip_prefix(")]}'\n").expect("pRPC JSON starts with the XSSI prefix"))
            .unwrap()
    }
}

impl SimHandle {
    pub async fn instances(&self) -> Instances {
        Instances::builder()
            .with_endpoint(&self.base)
            .with_credentials(anonymous())
            .with_backoff_policy(fast())
            .with_polling_backoff_policy(fast())
            .build()
            .await
            .expect("instances client")
    }

    pub async fn region_instances(&self) -> RegionInstances {
        RegionInstances::builder()
            .with_endpoint(&self.base)
            .with_credentials(anonymous())
            .with_backoff_policy(fast())
            .with_polling_backoff_policy(fast())
            .build()
            .await
            .expect("region instances client")
    }

    /// Sends `method` to `path` (under the simulator's base) with a JSON `body` if given:
    /// the HTTP status and the answer's JSON (`null` if it is not JSON).
    pub async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut r = self.http.request(method, format!("{}{path}", self.base));
        if let Some(b) = body {
            r = r.json(&b);
        }
        let r = r.send().await.unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    pub async fn operations(&self) -> ZoneOperations {
        ZoneOperations::builder()
            .with_endpoint(&self.base)
            .with_credentials(anonymous())
            .build()
            .await
            .unwrap()
    }

    pub async fn zones(&self) -> Zones {
        Zones::builder().with_endpoint(&self.base).with_credentials(anonymous()).build().await.unwrap()
    }

    pub async fn regions(&self) -> Regions {
        Regions::builder().with_endpoint(&self.base).with_credentials(anonymous()).build().await.unwrap()
    }

    pub async fn admin_get(&self, path: &str) -> Value {
        self.http.get(format!("{}{path}", self.base)).send().await.unwrap().json().await.unwrap()
    }

    pub async fn admin_post(&self, path: &str, body: Value) -> (u16, Value) {
        let r = self.http.post(format!("{}{path}", self.base)).json(&body).send().await.unwrap();
        (r.status().as_u16(), r.json().await.unwrap())
    }

    /// Calls `swarming.v2.Bots/<method>` on Swarming server `server`: Ok(body) or Err((grpc code, text)).
    pub async fn prpc(&self, server: &str, method: &str, body: Value) -> Result<Value, (u16, String)> {
        self.prpc_to(server, "swarming.v2.Bots", method, body).await
    }

    /// Calls `<service>/<method>` (`swarming.v2.Tasks`, ...) on Swarming server `server`.
    pub async fn prpc_to(
        &self,
        server: &str,
        service: &str,
        method: &str,
        body: Value,
    ) -> Result<Value, (u16, String)> {
        let r = self.prpc_raw(server, service, method, body, Some("gzip")).await;
        let code: u16 =
            r.header("x-prpc-grpc-code").expect("pRPC answers carry X-Prpc-Grpc-Code").parse().unwrap();
        if code != 0 {
            return Err((code, r.text()));
        }
        Ok(r.json())
    }

    /// Calls `<service>/<method>` on Swarming server `server` in JSON, with `Accept-Encoding` if
    /// given (and no other): the answer as sent.
    pub async fn prpc_raw(
        &self,
        server: &str,
        service: &str,
        method: &str,
        body: Value,
        accept_encoding: Option<&str>,
    ) -> Raw {
        let mut r = self
            .no_gzip
            .post(format!("{}/swarming/{server}/prpc/{service}/{method}", self.base))
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .body(body.to_string());
        if let Some(e) = accept_encoding {
            r = r.header("accept-encoding", e);
        }
        let r = r.send().await.unwrap();
        Raw {
            status: r.status().as_u16(),
            headers: r.headers().clone(),
            body: r.bytes().await.unwrap().to_vec(),
        }
    }

    /// Inserts instance `name` (e2-small, with a bot on `swarming` if given) and waits until its
    /// operation succeeded.
    pub async fn create(
        &self,
        name: &str,
        request_id: Option<String>,
        labels: &[(&str, &str)],
        swarming: Option<&str>,
    ) {
        let mut call = self.instances().await.insert().set_project("proj").set_zone("us-central1-b");
        if let Some(rid) = request_id {
            call = call.set_request_id(rid);
        }
        let op =
            call.set_body(instance(name, "e2-small", labels, swarming)).poller().until_done().await.unwrap();
        op.to_result().unwrap();
    }

    /// Number of answers to `method` with HTTP `status`.
    pub async fn calls(&self, method: &str, status: u16) -> u64 {
        let v = self.admin_get("/sim/calls").await;
        v["calls"][method][status.to_string()].as_u64().unwrap_or(0)
    }
}

/// An instance body like the service sends: labels, metadata (with the Swarming server), one NIC
/// with an external address.
pub fn instance(
    name: &str,
    machine: &str,
    labels: &[(&str, &str)],
    swarming: Option<&str>,
) -> google_cloud_compute_v1::model::Instance {
    let mut items = vec![json!({"key": "startup-script", "value": "echo hi"})];
    if let Some(s) = swarming {
        items.push(json!({"key": "swarming-server", "value": s}));
    }
    let labels: serde_json::Map<String, Value> =
        labels.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    serde_json::from_value(json!({
        "name": name,
        "machineType": format!("zones/us-central1-b/machineTypes/{machine}"),
        "labels": labels,
        "metadata": {"items": items},
        "disks": [{"autoDelete": true, "boot": true, "initializeParams": {"diskSizeGb": "10",
                   "sourceImage": "projects/debian-cloud/global/images/family/debian-12"}}],
        "networkInterfaces": [{"network": "global/networks/default",
                               "accessConfigs": [{"name": "External NAT", "type": "ONE_TO_ONE_NAT"}]}],
    }))
    .expect("instance body")
}

/// HTTP status and `errors[].reason` of a client error.
pub fn http_error(e: &Error) -> (Option<u16>, Option<String>) {
    let reason = e.status().and_then(|s| {
        s.details.iter().find_map(|d| match d {
            StatusDetails::ErrorInfo(i) => Some(i.reason.clone()),
            _ => None,
        })
    });
    (e.http_status_code(), reason)
}

/// A deterministic requestId for `what`.
/// A deterministic requestId for `what`, as the service makes them (UUIDv5).
pub fn rid(what: &str) -> String {
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, what.as_bytes()).to_string()
}

pub use gce_backend_queues::testing::eventually;
