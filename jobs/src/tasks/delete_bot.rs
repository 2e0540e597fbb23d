//! `delete_bot`: deletes a destroyed VM's bot from Swarming, then the VM record (guarded by the
//! hostname, and by the removal of its machine having started: a static machine keeps its
//! hostname from one incarnation to the next, so a late task finds the next one not removed
//! and leaves it alone), and pushes `expand_config` so a replacement starts at once if still wanted, and
//! `count_vms` so the Config's status follows (and goes with the last VM of a removed Config).

use crate::tasks::{CountVms, ExpandConfig};

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::tasks::Next;

task!(
    /// Delete a VM's bot from Swarming, then the VM record.
    DeleteBot, "delete_bot", { /// VM id.
    id, /// The incarnation's hostname (guard).
    hostname }, |self| format!("{}@{}", self.id, self.hostname)
);

/// Handles one task.
pub async fn run(ctx: &Ctx, t: DeleteBot) -> Result<Next, TaskError> {
    let Some(cur) = ctx.vm(&t.id).await? else { return Ok(Next::Done) };
    if cur.value.hostname != t.hostname || cur.value.destroying.is_none() {
        return Ok(Next::Done);
    }
    ctx.bots.delete(&cur.value.swarming, &t.hostname).await?;
    if !ctx.store.delete_vm(&t.id, cur.version).await? {
        return Err(TaskError::Conflict(t.id));
    }
    tracing::info!(config = %cur.value.config, vm = %t.id, hostname = %t.hostname, zone = %cur.value.zone(), "VM deleted");
    ctx.push(&CountVms { prefix: cur.value.config.clone() }).await?;
    ctx.push(&ExpandConfig { prefix: cur.value.config }).await.map(|_| Next::Done)
}

#[cfg(test)]
mod tests {
    use crate::tasks::ExpandConfig;

    use super::*;
    use crate::testing::created;

    #[tokio::test]
    async fn a_hostname_of_another_incarnation_does_nothing() {
        let (ctx, f) = Ctx::test();
        let vm = ctx.seed_vm("linux-0", removing(ctx.now())).await;
        run(&ctx, DeleteBot { id: "linux-0".into(), hostname: "linux-0-zzzz".into() }).await.unwrap();
        // The same hostname on an incarnation whose machine is not being removed (a static
        // machine's next incarnation): left alone too.
        crate::tasks::update_vm(&ctx, &vm.id, |v| {
            v.destroying = None;
            true
        })
        .await
        .unwrap();
        run(&ctx, DeleteBot { id: vm.id.clone(), hostname: vm.hostname.clone() }).await.unwrap();
        assert!(f.bots.calls().is_empty());
        assert!(ctx.store.vm("linux-0").await.unwrap().is_some());
    }

    fn removing(now: chrono::DateTime<chrono::Utc>) -> impl FnOnce(&mut crate::model::Vm) {
        move |v| {
            created(now)(v);
            v.destroying = Some(now);
        }
    }

    #[tokio::test]
    async fn deletes_the_bot_then_the_record_and_asks_for_a_replacement() {
        let (ctx, f) = Ctx::test();
        let vm = ctx.seed_vm("linux-0", removing(ctx.now())).await;
        // The fake has no such bot (as after NOT_FOUND): the record goes all the same.
        run(&ctx, DeleteBot { id: vm.id.clone(), hostname: vm.hostname.clone() }).await.unwrap();
        assert_eq!(f.bots.calls(), ["delete linux-0-abcd"]);
        assert!(ctx.store.vm("linux-0").await.unwrap().is_none());
        assert_eq!(ctx.taken::<ExpandConfig>().await, [ExpandConfig { prefix: "linux".into() }]);
        assert!(ctx.store.vms_by_hostname(&[vm.hostname]).await.unwrap()[0].is_none(), "indexes follow");
    }
}
