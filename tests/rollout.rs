//! A rolling update on Redis and the simulator: a new image reaches a 20-VM pool with a surge of
//! 2 without ever fewer than 20 connected bots, and ends with every VM on the new attributes.

use std::cell::Cell;
use std::time::Duration;

use gce_backend_queues::testing::eventually;

use crate::support::{Backend, Env, pool, sim_config};

const OLD: &str = "projects/debian-cloud/global/images/debian-12";
const NEW: &str = "projects/debian-cloud/global/images/debian-13";

fn roll(image: &str) -> String {
    pool("roll", 20, "1d", "10m").replace(OLD, image) + "update: {mode: rolling, max_surge: 2}\n"
}

/// Bots of the pool that are connected (alive, not deleted) in the simulator.
fn alive(env: &Env) -> usize {
    env.sim.with(|w| {
        w.bots
            .values()
            .flat_map(|m| m.iter())
            .filter(|(id, b)| id.starts_with("roll-") && b.dead_at.is_none() && !b.deleted)
            .count()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_image_rolls_out_with_a_surge_and_never_fewer_connected_bots_than_the_amount() {
    let env = Env::start(Backend::Redis, sim_config(), &[("roll", roll(OLD))], true).await;
    env.converged("roll", 20).await;
    env.write_pool("roll", &roll(NEW));
    // Sampled at every look until the rollout is done.
    let (fewest, most, saw_rollout) = (Cell::new(usize::MAX), Cell::new(0), Cell::new(false));
    eventually("the rollout is done", Duration::from_secs(120), || async {
        let n = alive(&env);
        fewest.set(fewest.get().min(n));
        most.set(most.get().max(n));
        let rec = env.ctx.ports.store.config("roll").await.unwrap().unwrap().value;
        saw_rollout.set(saw_rollout.get() || rec.rollout.is_some());
        let vms = env.vms("roll").await;
        let all_new =
            vms.len() == 20 && vms.iter().all(|v| v.attributes.disk[0].image == NEW && v.connected.is_some());
        (saw_rollout.get() && rec.rollout.is_none() && all_new).then_some(())
    })
    .await;
    let (fewest, most) = (fewest.get(), most.get());
    assert!(fewest >= 20, "{fewest} connected bots at the fewest");
    assert!(most <= 22, "{most} connected bots at the most (amount + surge)");
    env.converged("roll", 20).await;
    env.stop().await;
}
