//! The on-VM agent's registration, simulated: when a bot connects on an instance whose metadata
//! has a `register-url` item, the agent asks the metadata server for its identity token (the
//! simulator mints it; audience: the `register-audience` item, else the service's root URL, the
//! part of the URL before `/api/`) and POSTs `{"proof": token}` there, trying again (up to 4
//! tries in all) when refused or unanswered. Answers are counted in the call counts as
//! `agent.register` by status (0: no answer).

use std::time::Duration;

use serde_json::json;

use super::Sim;
use super::identity::{KEY, KID, claims, sign};

/// The metadata item naming where the agent registers.
pub const REGISTER_URL: &str = "register-url";
/// The metadata item naming the audience of its token, when not the URL's root.
pub const REGISTER_AUDIENCE: &str = "register-audience";
/// Registrations sent at once.
const IN_FLIGHT: usize = 32;
/// Tries of one registration (1 s, 2 s, 4 s, … apart).
const TRIES: u32 = 4;

/// The audience of a registration URL: `ROOT` of `ROOT/api/...`, else the URL itself.
pub fn audience(url: &str) -> &str {
    url.find("/api/").map_or(url, |i| &url[..i])
}

/// Sends the registrations the world asks for, as they come, until the process ends.
pub async fn registrar(sim: Sim) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = match reqwest::Client::builder().timeout(Duration::from_secs(10)).build() {
        Ok(c) => c,
        Err(e) => return tracing::error!(error = %e, "no HTTP client: agents will not register"),
    };
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
    loop {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let due: Vec<_> = sim.with(|w| {
            std::mem::take(&mut w.registrations)
                .into_iter()
                .filter_map(|(k, (url, aud))| Some((claims(w, &k.0, &k.1, &k.2, &aud)?, url)))
                .collect()
        });
        for (c, url) in due {
            let Ok(permit) = slots.clone().acquire_owned().await else { return };
            let (sim, http) = (sim.clone(), http.clone());
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
