//! Errors name the fault that happened, on Redis and the simulator: Compute answering 503 to
//! every call of a method its client retries is recorded as 503 and how many answers, not as a
//! timeout; once the stage succeeds again the error is marked resolved, in the record and in
//! `configs get`.

use std::process::Command;

use gce_backend_jobs::config::Secs;
use gce_backend_jobs::model::ErrorEntry;
use gce_backend_queues::testing::eventually;
use serde_json::json;

use crate::support::{BIN, Backend, Env, pool, settings, sim_config};

const LIMIT: std::time::Duration = std::time::Duration::from_secs(90);

/// The count in an error's `(×N within this attempt)`.
fn times(e: &ErrorEntry) -> u64 {
    let (_, tail) = e.message.rsplit_once("(×").unwrap_or_else(|| panic!("no count: {e:?}"));
    tail.trim_end_matches(" within this attempt)").parse().unwrap_or_else(|_| panic!("{e:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_503_storm_is_recorded_as_503_with_its_count_and_resolved_once_it_ends() {
    let mut s = settings();
    // The guard's timeout, which the client's retries of a call end within.
    s.isolation.compute_timeout = Secs(4);
    let env =
        Env::start_with(Backend::Redis, sim_config(), &[("linux", pool("linux", 2, "1d", "10m"))], true, s)
            .await;
    env.converged("linux", 2).await;
    // instances.delete is an HTTP DELETE: the official client retries its 503s itself.
    env.faults(json!({"errors": {"compute.instances.delete": {"rate": 1.0, "status": 503}}})).await;
    env.write_pool("linux", &pool("linux", 1, "1d", "10m"));
    let e = eventually("the delete's 503 is recorded", LIMIT, || async {
        let errors = env.ctx.ports.store.errors("linux").await.unwrap();
        errors.into_iter().find(|e| e.stage == "destroy_instance")
    })
    .await;
    assert_eq!(e.code, "503", "{e:?}");
    assert!(e.message.starts_with("503 Service Unavailable: Internal error. Please try again. (×"), "{e:?}");
    let answered = env.sim.with(|w| w.calls["compute.instances.delete"][&503]);
    assert!(
        (1..=answered).contains(&times(&e)),
        "the count is of the simulator's answers ({answered}): {e:?}"
    );
    let errors = env.ctx.ports.store.errors("linux").await.unwrap();
    assert!(!errors.iter().any(|e| e.code == "timeout" || e.message.contains("no answer")), "{errors:?}");

    // The storm ends: the delete goes through, and its errors are marked resolved.
    env.faults(json!({"errors": {}})).await;
    env.converged("linux", 1).await;
    let resolved = eventually("the delete's errors are resolved", LIMIT, || async {
        let errors = env.ctx.ports.store.errors("linux").await.unwrap();
        let of: Vec<ErrorEntry> = errors.into_iter().filter(|e| e.stage == "destroy_instance").collect();
        of.iter().all(|e| e.resolved.is_some()).then_some(of)
    })
    .await;
    // The operator's view says which errors are resolved.
    let out = Command::new(BIN)
        .args(["configs", "get", "linux"])
        .env("GCE_BACKEND_ROOT_URL", env.api_url.as_deref().unwrap())
        .env("GCE_BACKEND_TOKEN", crate::api::ADMIN)
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<&str> = shown.lines().filter(|l| l.contains("(destroy_instance")).collect();
    assert!(!lines.is_empty() && lines.len() <= resolved.len(), "{shown}");
    for l in &lines {
        assert!(l.contains("503 (destroy_instance, resolved "), "{shown}");
        assert!(l.contains("503 Service Unavailable: "), "{shown}");
    }
    env.stop().await;
}
