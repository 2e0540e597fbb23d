//! The circuit breaker on Redis and the simulator: an image whose bots never connect opens a
//! Config's breaker after N failed VMs (then only canaries are inserted), and a fixed image's
//! canary closes it.

use std::time::Duration;

use serde_json::json;

use crate::support::{Backend, Env, pool, sim_config};
use gce_backend_queues::testing::eventually;

const BROKEN: &str = "projects/debian-cloud/global/images/debian-12";
const FIXED: &str = "projects/debian-cloud/global/images/debian-13";

fn web(image: &str) -> String {
    pool("web", 3, "1d", "2s").replace(BROKEN, image) + "breaker: {after: 3, within: 10m, canary_after: 1s}\n"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_never_connecting_image_opens_the_breaker_and_a_fixed_one_closes_it() {
    let env = Env::start(Backend::Redis, sim_config(), &[], true).await;
    env.faults(json!({"broken_images": [BROKEN]})).await;
    env.write_pool("web", &web(BROKEN));
    let status = || async { env.status("web", true).await };
    let limit = Duration::from_secs(60);
    let open = eventually("the breaker opens", limit, || async { status().await.breaker }).await;
    assert!(open.reason.contains("3 VMs in a row failed"), "{}", open.reason);
    let inserted_when_open = env.inserts().len();
    // Open: only canaries are inserted (one at a time, each later than the last).
    let tried = eventually("two canaries fail", limit, || async {
        status().await.breaker.filter(|o| o.canaries >= 2).map(|o| o.canaries)
    })
    .await;
    let inserted = env.inserts().len();
    assert!(inserted <= inserted_when_open + tried as usize + 1, "{inserted} inserts, {tried} canaries");
    let st = status().await;
    assert!(
        st.errors.iter().any(|e| e.stage == "breaker" && e.message.contains("breaker open")),
        "{:?}",
        st.errors
    );

    // The image is fixed: the next canary connects, the breaker closes, the pool converges.
    env.write_pool("web", &web(FIXED));
    env.converged("web", 3).await;
    assert!(status().await.breaker.is_none());
    let rec = env.ctx.ports.store.config("web").await.unwrap().unwrap().value;
    assert_eq!(rec.breaker.failed_in_a_row, 0);
    env.stop().await;
}
