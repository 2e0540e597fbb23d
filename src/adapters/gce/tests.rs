//! Unit tests of `adapters/gce.rs`.

use std::sync::Arc;
use std::time::Duration;

use gce_backend_jobs::config::Secs;
use gce_backend_jobs::metrics::Metrics;
use gce_backend_jobs::ports::compute::{Compute, Kind};
use gce_backend_jobs::ports::guard::Isolation;
use gce_backend_jobs::ports::guarded::GuardedCompute;

use super::{Gce, segments};

#[test]
fn only_plain_segments_reach_a_request_path() {
    assert!(segments(&["google.com:chromecompute", "us-central1-b", "linux-0-abcd"]).is_ok());
    for bad in ["a%2Fb", "a/b", "..", "", "x?alt=json", "A", "x\u{202e}"] {
        assert!(segments(&["my-proj", bad]).is_err(), "{bad:?}");
    }
}

/// The simulator in process, its Compute answering `status` to every call of `method`, and the
/// adapter on it behind a guard that cuts a call after `timeout` seconds.
async fn faulty(method: &str, status: u16, timeout: u64) -> (gce_backend_sim::Sim, Arc<dyn Compute>) {
    let (addr, sim) = gce_backend_sim::spawn(gce_backend_sim::SimConfig::default()).await.unwrap();
    let fault = gce_backend_sim::config::ErrorFault { rate: 1.0, status };
    sim.with(|w| w.faults.errors.insert(method.to_owned(), fault));
    let iso = Isolation { compute_timeout: Secs(timeout), ..Isolation::default() };
    let gce = Gce::connect(Some(&format!("http://{addr}")), None).await.unwrap();
    let gce = gce.within(Duration::from_secs(timeout));
    (sim, Arc::new(GuardedCompute::new(Arc::new(gce), &iso, &Metrics::default())))
}

/// The count in an error's `(×N within this attempt)`.
fn times(message: &str) -> u64 {
    let (_, tail) = message.rsplit_once("(×").unwrap_or_else(|| panic!("no count: {message}"));
    tail.trim_end_matches(" within this attempt)").parse().unwrap_or_else(|_| panic!("{message}"))
}

#[tokio::test]
async fn a_call_the_client_retries_under_503s_comes_back_as_503_with_how_many_not_a_timeout() {
    let (sim, compute) = faulty("compute.instances.get", 503, 6).await;
    let e = compute.get("my-proj", "us-central1-b", "linux-0-abcd").await.unwrap_err();
    assert_eq!((e.kind, e.code.as_str()), (Kind::Transient, "503"), "{e}");
    assert!(e.message.starts_with("503 Service Unavailable: Internal error. Please try again. (×"), "{e}");
    let answered = sim.with(|w| w.calls["compute.instances.get"][&503]);
    assert_eq!(times(&e.message), answered, "every 503 answer is counted: {e}");
    assert!(answered >= 2, "the client retried it: {e}");
}

#[tokio::test]
async fn a_call_the_client_does_not_retry_says_its_one_answer() {
    let (_sim, compute) = faulty("compute.zones.list", 429, 6).await;
    let e = compute.zones("my-proj").await.unwrap_err();
    assert_eq!((e.kind, e.code.as_str()), (Kind::RateLimited, "429"), "{e}");
    assert_eq!(e.message, "429 Too Many Requests: Rate Limit Exceeded (×1 within this attempt)");
}

#[tokio::test]
async fn a_call_without_an_answer_is_still_a_timeout() {
    let (sim, compute) = faulty("compute.zones.list", 503, 1).await;
    sim.with(|w| w.faults.compute_hang = true);
    let e = compute.get("my-proj", "us-central1-b", "linux-0-abcd").await.unwrap_err();
    sim.with(|w| w.faults.compute_hang = false);
    assert_eq!(e.code, "timeout", "{e}");
    assert!(e.message.contains("no answer within 1s"), "{e}");
}
