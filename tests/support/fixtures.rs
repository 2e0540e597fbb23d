//! What the tests run on: the deployment name, a Config file of a given size, fast settings
//! (every cron job each second, short timings) and the simulator's timings.

use gce_backend::settings::Settings;
use gce_backend::sim::SimConfig;
use gce_backend_jobs::Timing;
use gce_backend_jobs::config::Secs;

/// The deployment (and Redis namespace) of every test service.
pub(crate) const DEPLOYMENT: &str = "e2e";

/// A Config file: `amount` e2-standard-2 VMs in us-central1-b.
pub(crate) fn pool(prefix: &str, amount: u32, lifetime: &str, timeout: &str) -> String {
    format!(
        r#"prefix: {prefix}
amount: {{min: {amount}, max: {amount}}}
attributes:
  project: my-proj
  zone: us-central1-b
  machine_type: "zones/{{{{.Zone}}}}/machineTypes/e2-standard-2"
  disk: [{{image: projects/debian-cloud/global/images/debian-12, size: 10, type: "zones/{{{{.Zone}}}}/diskTypes/pd-ssd"}}]
  network_interface: [{{network: global/networks/default, access_config: [{{type: ONE_TO_ONE_NAT}}]}}]
  label: {{team: e2e}}
lifetime: {lifetime}
timeout: {timeout}
swarming: https://swarm.example.com
"#
    )
}

/// Fast settings: every cron job each second, short timings.
pub(crate) fn settings() -> Settings {
    let mut s = Settings { deployment: DEPLOYMENT.into(), concurrency: 8, ..Settings::default() };
    for v in s.cron.values_mut() {
        *v = "1s".into();
    }
    s.timing = Timing {
        watch: Secs(1),
        bot_grace: Secs(3),
        observation_ttl: Secs(2),
        terminate_again_after: Secs(30),
        leak_grace: Secs(2),
        stale_bot_grace: Secs(2),
        backoff_base: Secs(1),
        backoff_cap: Secs(2),
        config_delete_grace: Secs(2),
        operation_poll: Secs(1),
        sweep: Secs(60),
        fan_out_jitter: Secs(1),
        bulk_gather: Secs(1),
    };
    // The example server, and the misbehaving ones of `bad_input`.
    s.swarming.servers =
        ["swarm.example.com", "hang.example.com", "bad.example.com"].map(|h| format!("https://{h}")).into();
    s
}

/// Simulator timings for the tests.
pub(crate) fn sim_config() -> SimConfig {
    SimConfig {
        op_ms: 200,
        provision_ms: 100,
        stage_ms: 100,
        stop_ms: 100,
        bot_connect_ms: 200,
        bot_death_ms: 300,
        ..SimConfig::default()
    }
}
