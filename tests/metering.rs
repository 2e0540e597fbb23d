//! Metering across processes: two `gce-backend run` processes on one Redis make, keep and remove
//! a pool's VMs while one of them is killed (SIGKILL) mid-change; every VM's interval is in its
//! Config's ledger exactly once: the ledger's open intervals are exactly the VM records' meters,
//! and once every VM is gone, none is open and what they cost is kept.

use std::collections::BTreeMap;
use std::time::Duration;

use gce_backend_jobs::Ctx;
use gce_backend_jobs::ports::store::VmIndex;
use gce_backend_jobs::{model::ledger::Billed, model::ledger::ledger, model::ledger::spend};
use gce_backend_queues::testing::eventually;

use crate::support::{Procs, pool};

/// The open intervals the ledger of `prefix` should hold: one per VM record billed now.
async fn expected_open(ctx: &Ctx, prefix: &str) -> BTreeMap<String, i64> {
    let mut out: BTreeMap<String, i64> = BTreeMap::new();
    for id in ctx.ports.store.vm_ids(VmIndex::OfConfig(prefix.into())).await.unwrap() {
        let Some(vm) = ctx.ports.store.vm(&id).await.unwrap() else { continue };
        if let Some(m) = &vm.value.meter {
            for (k, v) in spend(None, Some(m), m.since).pairs() {
                *out.entry(k.to_owned()).or_default() += v;
            }
        }
    }
    out.retain(|_, v| *v != 0);
    out
}

/// The open intervals the ledger of `prefix` holds.
async fn open(ctx: &Ctx, prefix: &str) -> BTreeMap<String, i64> {
    let all = ctx.ports.store.ledger(prefix).await.unwrap();
    all.into_iter().filter(|(k, v)| k.starts_with("o/") && *v != 0).collect()
}

async fn settled(ctx: &Ctx, prefix: &str, n: u32) {
    eventually(&format!("{prefix} settles at {n}"), Duration::from_secs(120), || async {
        let c =
            gce_backend_jobs::records::counts::tally(&*ctx.ports.store, prefix, ctx.now()).await.unwrap().0;
        (c.vms == n && c.created == n && c.connected == n && c.draining == 0).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_interval_is_metered_once_across_two_processes_and_a_kill() {
    let env = Procs::start(8, "").await;
    let write =
        |n: u32| std::fs::write(env.configs.join("alpha.yaml"), pool("alpha", n, "1d", "10m")).unwrap();
    write(8);
    let (mut a, b) = (env.spawn(), env.spawn());
    let ctx = env.ctx().await;
    settled(&ctx, "alpha", 8).await;
    assert_eq!(open(&ctx, "alpha").await, expected_open(&ctx, "alpha").await);
    let l = ledger(&ctx.ports.store.ledger("alpha").await.unwrap(), ctx.now());
    assert_eq!(l.vms.get(&Billed::Running), Some(&8), "{l:?}");
    assert!(l.per_hour() > 0.0, "e2-standard-2 and its disk are priced: {l:?}");

    // Shrunk to 3, and one process killed while the others' VMs are being removed.
    write(3);
    eventually("the shrink begins", Duration::from_secs(60), || async {
        let c =
            gce_backend_jobs::records::counts::tally(&*ctx.ports.store, "alpha", ctx.now()).await.unwrap().0;
        (c.draining > 0 || c.vms < 8).then_some(())
    })
    .await;
    a.kill().unwrap();
    a.wait().unwrap();
    let c = env.spawn();
    settled(&ctx, "alpha", 3).await;
    assert_eq!(open(&ctx, "alpha").await, expected_open(&ctx, "alpha").await, "open = the records' meters");

    // Every VM gone: nothing open, and the hours they ran are kept.
    write(0);
    eventually("every VM is gone", Duration::from_secs(120), || async {
        ctx.ports.store.vm_ids(VmIndex::OfConfig("alpha".into())).await.unwrap().is_empty().then_some(())
    })
    .await;
    assert_eq!(open(&ctx, "alpha").await, BTreeMap::new(), "no interval left open");
    let done = ledger(&ctx.ports.store.ledger("alpha").await.unwrap(), ctx.now());
    let ran = done.total()[&Billed::Running];
    assert!(ran.hours > 0.0 && ran.usd > 0.0, "{done:?}");
    assert_eq!(done.per_hour(), 0.0);
    assert!(ctx.ports.store.ledger_configs().await.unwrap().contains(&"alpha".to_owned()));
    env.stop(&mut [b, c]);
}
