//! The on-VM agent's registration, simulated: when a bot connects on an instance whose metadata
//! has a `register-url` item, the agent asks the metadata server for its identity token (the
//! simulator mints it; audience: the `register-audience` item, else the service's root URL, the
//! part of the URL before `/api/`) and POSTs `{"proof": token}` there, trying again (up to 4
//! tries in all) when refused or unanswered. Answers are counted in the call counts as
//! `agent.register` by status (0: no answer). To an `http://127.x…` URL, each agent sends from a
//! loopback address of its own (127.1.x.y, from its instance's name, where the system allows
//! it), as each VM sends from its own address: a service that limits `register` per address
//! sees a fleet, not one client.

use std::hash::{Hash, Hasher};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use serde_json::json;

use crate::handle::Sim;
use crate::keys::{KEY, KID, sign};

/// Registrations sent at once.
const IN_FLIGHT: usize = 32;
/// Tries of one registration (1 s, 2 s, 4 s, … apart).
const TRIES: u32 = 4;

/// Sends the registrations the world asks for, as they come, until the process ends.
pub async fn registrar(sim: Sim) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = match reqwest::Client::builder().timeout(Duration::from_secs(10)).build() {
        Ok(c) => c,
        Err(e) => return tracing::error!(error = %e, "no HTTP client: agents will not register"),
    };
    // Only where every 127/8 address is this machine's (Linux; not macOS by default). A client
    // each (plain HTTP: the TLS settings are an empty shell, so that one is made in microseconds).
    let own_addresses = std::net::UdpSocket::bind((source("probe"), 0)).is_ok();
    let no_tls = rustls::ClientConfig::builder()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
    loop {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let due: Vec<_> = sim.with(|w| {
            std::mem::take(&mut w.registrations)
                .into_iter()
                .filter_map(|(k, (url, aud))| Some((w.claims(&k.0, &k.1, &k.2, &aud)?, url, source(&k.2))))
                .collect()
        });
        for (c, url, from) in due {
            let Ok(permit) = slots.clone().acquire_owned().await else { return };
            let sim = sim.clone();
            let http = match own_addresses && loopback(&url) {
                true => reqwest::Client::builder()
                    .tls_backend_preconfigured(no_tls.clone())
                    .timeout(Duration::from_secs(10))
                    .local_address(from)
                    .pool_max_idle_per_host(0)
                    .build()
                    .unwrap_or_else(|_| http.clone()),
                false => http.clone(),
            };
            tokio::spawn(async move {
                // As an agent does: tries again, a little later, when refused or unanswered.
                for attempt in 0..TRIES {
                    let status = match sign(&c, KID, KEY) {
                        Ok(token) => match http.post(&url).json(&json!({"proof": token})).send().await {
                            Ok(r) => r.status().as_u16(),
                            Err(_) => 0,
                        },
                        Err(_) => 0,
                    };
                    sim.with(|w| w.count("agent.register", status));
                    if status == 200 || attempt + 1 == TRIES {
                        break;
                    }
                    tokio::time::sleep(Duration::from_secs(1 << attempt)).await;
                }
                drop(permit);
            });
        }
    }
}

/// The loopback address the agent of instance `name` sends from: 127.1.x.y, y never 0 or 255.
fn source(name: &str) -> IpAddr {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    name.hash(&mut h);
    let n = h.finish();
    IpAddr::V4(Ipv4Addr::new(127, 1, (n >> 8) as u8, 1 + (n % 254) as u8))
}

/// Whether `url` is plain HTTP to an IPv4 loopback address (the agents' own are IPv4).
fn loopback(url: &str) -> bool {
    let Ok(u) = reqwest::Url::parse(url) else { return false };
    u.scheme() == "http"
        && u.host_str().and_then(|h| h.parse::<Ipv4Addr>().ok()).is_some_and(|a| a.is_loopback())
}
