//! `manage_bot`: compares a created VM's bot with the VM record and acts on the difference.
//!
//! Bot state comes from the last `inspect_swarming` walk when fresh, else from GetBot.
//! * No bot yet: destroy the instance once the connection timeout or the deadline has passed
//!   (or, for a drained VM, once `bot_grace` has); else look again after `watch`.
//! * A bot that first connected long before this instance was created belongs to an earlier
//!   incarnation and is ignored (a static machine's bot was there before: it is ignored only
//!   once Swarming deleted it).
//! * Connected: record `connected` once. Destroy the instance when the bot was deleted, died after
//!   a TerminateBot (or reported `bot_terminate`), or has been dead longer than the timeout.
//!   Past the deadline, or drained: terminate the bot gracefully and watch; past the deadline
//!   while its Config is paused, a healthy VM is kept (it could not be replaced).
//! * Health: a dead bot makes it ask Compute about the instance; a stopped, preempted or gone
//!   instance is destroyed at once (its bot cannot come back), without waiting for the timeout.
//!   The fault (bot dead, instance down, never connected) is recorded on the VM, so status
//!   counts it at once, and on the Config's errors.

use crate::tasks::{CountVms, DestroyInstance, TerminateBot};
use chrono::{DateTime, Utc};

use crate::ctx::Ctx;
use crate::error::TaskError;
use crate::model::{Bot, Fault, FaultKind, Observed, Vm};
use crate::tasks::Next;
use crate::ports::store::Versioned;
use crate::providers::Health;
use crate::tasks::{update_vm, write_vm_at};
use crate::telemetry::Stage;

task!(
    /// Compare a VM's bot with its record and act on the difference.
    ManageBot, "manage_bot", { /// VM id.
    id }, |self| self.id.clone()
);

const STAGE: &str = "manage_bot";

/// Records `kind` on the VM's incarnation (once per kind; a VM being retired on purpose gets
/// none), with a WARN and a Config error, and asks for a recount so status follows at once.
/// Returns whether this call recorded it (runs that race record it once).
pub async fn fault(ctx: &Ctx, vm: &Vm, kind: FaultKind, detail: &str, stage: &str) -> Result<bool, TaskError> {
    let now = ctx.now();
    if vm.fault.as_ref().is_some_and(|f| f.kind == kind) {
        return Ok(false);
    }
    if vm.retiring(now, ctx.paused_of(&vm.config).await?.is_some()) {
        return Ok(false);
    }
    let written = crate::tasks::write_vm(ctx, &vm.id, |v| {
        v.hostname == vm.hostname && v.fault.as_ref().is_none_or(|f| f.kind != kind) && {
            v.fault = Some(Fault { kind, detail: detail.to_owned(), at: now });
            true
        }
    })
    .await?;
    if !written.is_some_and(|(_, wrote)| wrote) {
        return Ok(false);
    }
    tracing::warn!(config = %vm.config, vm = %vm.id, hostname = %vm.hostname, zone = %vm.zone(), "{detail}");
    let code = match kind {
        FaultKind::BotDead => "bot_dead",
        FaultKind::InstanceDown => "instance_down",
        FaultKind::NeverConnected => "never_connected",
    };
    ctx.record(&vm.config, stage, code, &format!("{}: {detail}", vm.hostname), vm.zone(), "").await?;
    ctx.push(&CountVms { prefix: vm.config.clone() }).await?;
    crate::breaker::failed(ctx, vm, kind).await?;
    Ok(true)
}

/// The one rule for an instance that is down (stopped, preempted, suspended) or gone: record
/// it and destroy the instance now, so the VM is replaced without waiting for any timeout.
pub async fn replace_down(ctx: &Ctx, vm: &Vm, status: Option<&str>, stage: &str) -> Result<(), TaskError> {
    if vm.destroying.is_some() {
        return Ok(()); // our own delete: destroy_instance and delete_bot finish it
    }
    // A Spot or preemptible instance that stops was preempted: a normal replacement (counted;
    // no zone backoff).
    let preempted = vm.attributes.preemptible();
    let detail = match (status, preempted) {
        (Some(s), true) => format!("instance {s} (preempted): replacing it now"),
        (Some(s), false) => format!("instance {s}: replacing it now"),
        (None, _) => "instance gone: replacing it now".to_owned(),
    };
    if fault(ctx, vm, FaultKind::InstanceDown, &detail, stage).await? && preempted && status.is_some() {
        ctx.telemetry.instance_op(vm, "preempted", "ok", ""); // once per incarnation
    }
    match DestroyInstance::of(vm) {
        Some(destroy) => ctx.push(&destroy).await.map(drop),
        None => Ok(()),
    }
}

/// The bot of `vm`, from a fresh observation or GetBot.
async fn bot_of(ctx: &Ctx, vm: &Vm, now: DateTime<Utc>) -> Result<Option<Bot>, TaskError> {
    let ttl = ctx.timing.observation_ttl.chrono();
    if let Some(o) = ctx.store.bot(&vm.hostname).await?
        && o.at + ttl > now
        && !o.bot.is_dead
    {
        return Ok(Some(o.bot));
    }
    let bot = ctx.bots.get(&vm.swarming, &vm.hostname).await?;
    if let Some(b) = &bot {
        ctx.store.put_bots(&[Observed { bot: b.clone(), at: now }]).await?;
    }
    Ok(bot)
}

/// Whether the instance may go (LUCI's `isDestroyable`): the bot was deleted, died after a
/// TerminateBot, or has been dead longer than the timeout (at once when it is 0); also a dead bot
/// of a VM being retired (drained, past its deadline, asked to terminate), since it can no longer
/// run a termination task.
fn destroyable(bot: &Bot, vm: &Vm, now: DateTime<Utc>, paused: bool) -> bool {
    let dead_too_long = bot.last_seen.is_some_and(|t| t + chrono::Duration::seconds(vm.timeout as i64) < now);
    bot.deleted
        || (bot.is_dead && (!bot.termination_task_id.is_empty() || dead_too_long || vm.retiring(now, paused)))
}

/// Handles one task.
pub async fn run(ctx: &Ctx, t: ManageBot) -> Result<Next, TaskError> {
    let Some(cur) = ctx.vm(&t.id).await? else { return Ok(Next::Done) };
    let vm = cur.value.clone();
    let (Some(destroy), Some(created)) = (DestroyInstance::of(&vm), vm.instance.as_ref().map(|i| i.created))
    else {
        return Ok(Next::Done);
    };
    let now = ctx.now();
    // Whether the VM is still wanted is decided elsewhere (expand_config, drain_vm): here it is
    // only read, as `drained`.
    let past = |secs: u64| secs > 0 && created + chrono::Duration::seconds(secs as i64) < now;
    let grace = ctx.timing.bot_grace.chrono();
    let provider = ctx.providers.get(ctx, &vm.provider).await?;
    let lasting = provider.machines_outlive_vms();
    let ours = |b: &Bot| b.first_seen.is_none_or(|f| f + grace >= created) || (lasting && !b.deleted);
    let bot = bot_of(ctx, &vm, now).await?.filter(ours);
    let Some(bot) = bot else {
        if past(vm.timeout) || past(vm.lifetime) || (vm.drained && created + grace < now) {
            if past(vm.timeout) {
                let detail = format!("no bot connected within the timeout ({}s)", vm.timeout);
                fault(ctx, &vm, FaultKind::NeverConnected, &detail, STAGE).await?;
            }
            ctx.push(&destroy).await?;
            return Ok(Next::Done);
        }
        // Soon after boot, then backing off to `timing.watch`.
        return Ok(Next::After(ctx.look_again(now - created)));
    };
    if vm.connected.is_none()
        && let Some(first) = bot.first_seen
    {
        let written = write_vm_at(ctx, cur, |v| {
            v.hostname == vm.hostname && v.connected.is_none() && {
                v.connected = Some(first);
                true
            }
        })
        .await?;
        if let Some((Versioned { value: v, .. }, true)) = &written
            && let Some(placed) = &v.instance
        {
            ctx.telemetry.lifecycle(v, Stage::CreatedToConnected, placed.created, first);
        }
        tracing::info!(config = %vm.config, vm = %vm.id, hostname = %vm.hostname, zone = %vm.zone(), "bot connected");
        // A bot connected: earlier faults of this Config's VMs are behind it.
        ctx.resolved(&vm.config, &[STAGE, "inspect_instances"]).await?;
        crate::breaker::connected(ctx, &vm).await?;
    }
    // A dead bot, or one silent for long (Swarming takes minutes to call it dead): will it come
    // back? Not if its instance is stopped, preempted or gone.
    let silent = bot.silent(now, ctx.silent_after());
    if (bot.is_dead || silent) && !bot.deleted && vm.destroying.is_none() {
        match provider.check(ctx, &vm).await? {
            Health::Up(_) => {
                if bot.is_dead {
                    let since = bot.last_seen.map_or_else(|| "unknown".to_owned(), |t| t.to_rfc3339());
                    fault(ctx, &vm, FaultKind::BotDead, &format!("bot dead (last seen {since})"), STAGE)
                        .await?;
                }
            }
            Health::Down(status) => {
                return replace_down(ctx, &vm, Some(&status), STAGE).await.map(|()| Next::Done);
            }
            Health::Gone => return replace_down(ctx, &vm, None, STAGE).await.map(|()| Next::Done),
        }
    } else if vm.fault.as_ref().is_some_and(|f| f.kind == FaultKind::BotDead) {
        update_vm(ctx, &vm.id, |v| {
            v.hostname == vm.hostname && v.fault.as_ref().is_some_and(|f| f.kind == FaultKind::BotDead) && {
                v.fault = None;
                true
            }
        })
        .await?;
        tracing::info!(config = %vm.config, vm = %vm.id, hostname = %vm.hostname, zone = %vm.zone(), "bot alive again");
        ctx.resolved(&vm.config, &[STAGE]).await?;
    }
    // The pause matters only to a VM that would be retired (a dead bot, or past the deadline).
    let paused = (bot.is_dead || past(vm.lifetime)) && ctx.paused_of(&vm.config).await?.is_some();
    if destroyable(&bot, &vm, now, paused) {
        ctx.push(&destroy).await?;
        return Ok(Next::Done);
    }
    if bot.is_dead && !bot.deleted {
        // Dead, not for long enough yet: look again once the timeout has passed (nothing else
        // would bring this VM back: its observation no longer changes).
        let until = bot.last_seen.map(|t| t + chrono::Duration::seconds(vm.timeout as i64 + 1) - now);
        return Ok(Next::After(until.and_then(|d| d.to_std().ok()).unwrap_or_else(|| ctx.watch())));
    }
    if vm.terminate_sent.is_some() {
        let events = ctx.bots.events(&vm.swarming, &vm.hostname, created).await?;
        if events.iter().any(|e| e.event_type == "bot_terminate") {
            ctx.push(&destroy).await?;
        } else {
            // The termination may have been lost (expired, cancelled, bot restarted):
            // `terminate_bot` sends it again once `terminate_again_after` has passed.
            ctx.push(&TerminateBot { id: vm.id.clone(), hostname: vm.hostname.clone() }).await?;
            return Ok(Next::After(ctx.watch()));
        }
        return Ok(Next::Done);
    }
    if vm.drained || (past(vm.lifetime) && !paused) {
        ctx.push(&TerminateBot { id: vm.id.clone(), hostname: vm.hostname.clone() }).await?;
        return Ok(Next::After(ctx.watch()));
    }
    Ok(Next::Done)
}

#[cfg(test)]
mod tests {
    use crate::tasks::{CountVms, DestroyInstance, TerminateBot};
    use chrono::Duration as D;

    use super::*;
    use crate::ports::bots::BotEvent;
    use crate::testing::created;

    fn bot(id: &str, first_seen: DateTime<Utc>) -> Bot {
        Bot { id: id.into(), first_seen: Some(first_seen), last_seen: Some(first_seen), ..Bot::default() }
    }

    async fn setup() -> (Ctx, crate::testing::Fakes, Vm) {
        let (ctx, f) = Ctx::test();
        ctx.seed_config("linux", 1).await;
        let vm = ctx.seed_vm("linux-0", created(ctx.now())).await;
        let inst = crate::testing::FakeCompute::instance(&vm.hostname, &[]);
        f.compute.instances.lock().unwrap().insert(vm.hostname.clone(), inst);
        (ctx, f, vm)
    }

    #[tokio::test]
    async fn invalid_an_uncreated_or_missing_vm_is_left_alone() {
        let (ctx, f) = Ctx::test();
        run(&ctx, ManageBot { id: "linux-0".into() }).await.unwrap();
        ctx.seed_vm("linux-0", |_| {}).await;
        run(&ctx, ManageBot { id: "linux-0".into() }).await.unwrap();
        assert!(f.bots.calls().is_empty());
    }

    #[tokio::test]
    async fn no_bot_yet_is_watched_soon_after_boot_then_backing_off_until_the_timeout() {
        let (ctx, f, vm) = setup().await;
        let next = run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
        assert_eq!(f.bots.calls(), ["get linux-0-abcd"]);
        assert!(ctx.taken::<DestroyInstance>().await.is_empty());
        let ms = std::time::Duration::from_millis;
        assert_eq!(next, Next::After(ms(500)), "just created: looked at again in half a second");
        f.clock.advance(D::seconds(6));
        let next = run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
        assert_eq!(next, Next::After(ms(3000)), "6 s after creation: half that");
        f.clock.advance(D::seconds(60));
        let next = run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
        assert_eq!(next, Next::After(ctx.watch()), "then at most `watch`");
        f.clock.advance(D::minutes(11));
        run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
        assert_eq!(ctx.taken::<DestroyInstance>().await, [DestroyInstance::of(&vm).unwrap()]);
    }

    #[tokio::test]
    async fn a_connected_bot_is_recorded_once_and_left_running() {
        let (ctx, f, vm) = setup().await;
        f.bots
            .bots
            .lock()
            .unwrap()
            .insert(vm.hostname.clone(), bot(&vm.hostname, ctx.now() + D::seconds(30)));
        run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
        let got = ctx.store.vm(&vm.id).await.unwrap().unwrap().value;
        assert_eq!(got.connected, Some(ctx.now() + D::seconds(30)));
        assert!(
            ctx.taken::<DestroyInstance>().await.is_empty() && ctx.taken::<TerminateBot>().await.is_empty()
        );
    }

    #[tokio::test]
    async fn deleted_or_terminated_bots_get_their_instance_destroyed() {
        let (ctx, f, vm) = setup().await;
        let mut gone = bot(&vm.hostname, ctx.now());
        gone.deleted = true;
        f.bots.bots.lock().unwrap().insert(vm.hostname.clone(), gone);
        run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
        assert_eq!(ctx.taken::<DestroyInstance>().await.len(), 1, "deleted");

        let (ctx, f, vm) = setup().await;
        let mut b = bot(&vm.hostname, ctx.now());
        b.is_dead = true;
        b.termination_task_id = "t1".into();
        f.bots.bots.lock().unwrap().insert(vm.hostname.clone(), b);
        run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
        assert_eq!(ctx.taken::<DestroyInstance>().await.len(), 1);
    }

    #[tokio::test]
    async fn past_the_deadline_the_bot_is_terminated_then_destroyed_on_bot_terminate() {
        let (ctx, f, vm) = setup().await;
        f.bots.bots.lock().unwrap().insert(vm.hostname.clone(), bot(&vm.hostname, ctx.now()));
        f.clock.advance(D::days(2));
        run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
        assert_eq!(
            ctx.taken::<TerminateBot>().await,
            [TerminateBot { id: vm.id.clone(), hostname: vm.hostname.clone() }]
        );
        crate::tasks::update_vm(&ctx, &vm.id, |v| {
            v.terminate_sent = Some(ctx.now());
            true
        })
        .await
        .unwrap();
        let event = BotEvent { ts: ctx.now(), event_type: "bot_terminate".into() };
        f.bots.events.lock().unwrap().insert(vm.hostname.clone(), vec![event]);
        run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
        assert_eq!(ctx.taken::<DestroyInstance>().await.len(), 1);
    }

    #[tokio::test]
    async fn a_lost_termination_is_sent_again_while_waiting_for_bot_terminate() {
        let (ctx, f, vm) = setup().await;
        f.bots.bots.lock().unwrap().insert(vm.hostname.clone(), bot(&vm.hostname, ctx.now()));
        crate::tasks::update_vm(&ctx, &vm.id, |v| {
            v.terminate_sent = Some(ctx.now());
            true
        })
        .await
        .unwrap();
        run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
        assert_eq!(
            ctx.taken::<TerminateBot>().await.len(),
            1,
            "terminate_bot decides whether to send it again"
        );
        assert!(ctx.taken::<DestroyInstance>().await.is_empty());
    }

    #[tokio::test]
    async fn a_dead_bot_of_a_drained_vm_is_destroyed_even_without_a_timeout() {
        let (ctx, f) = Ctx::test();
        let vm = ctx
            .seed_vm("linux-0", |v| {
                created(ctx.now())(v);
                v.drained = true;
                v.timeout = 3600; // not dead long enough for the timeout: only retiring applies
            })
            .await;
        let mut dead = bot(&vm.hostname, ctx.now());
        dead.is_dead = true;
        f.bots.bots.lock().unwrap().insert(vm.hostname.clone(), dead);
        f.clock.advance(D::seconds(5));
        run(&ctx, ManageBot { id: vm.id }).await.unwrap();
        assert_eq!(ctx.taken::<DestroyInstance>().await.len(), 1, "it cannot run a termination task");
    }

    #[tokio::test]
    async fn a_bot_from_an_earlier_incarnation_is_ignored() {
        let (ctx, f, vm) = setup().await;
        let mut old = bot(&vm.hostname, ctx.now() - D::days(3));
        old.deleted = true;
        f.bots.bots.lock().unwrap().insert(vm.hostname.clone(), old);
        run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
        assert!(
            ctx.taken::<DestroyInstance>().await.is_empty(),
            "its deletion says nothing of this instance"
        );
    }

    #[tokio::test]
    async fn transient_swarming_errors_are_retried_and_change_nothing() {
        let (ctx, f, vm) = setup().await;
        *f.bots.fail.lock().unwrap() = Some(crate::ports::bots::BotError::grpc(14, "down"));
        let e = run(&ctx, ManageBot { id: vm.id }).await.unwrap_err();
        assert_eq!(e.class(), crate::Class::Transient);
        assert!(ctx.taken::<DestroyInstance>().await.is_empty());
    }

    #[tokio::test]
    async fn a_vm_past_its_configs_amount_is_only_read_as_drained_here() {
        let (ctx, f, vm) = setup().await;
        f.bots.bots.lock().unwrap().insert(vm.hostname.clone(), bot(&vm.hostname, ctx.now()));
        let cfg = ctx.store.config("linux").await.unwrap().unwrap();
        let mut rec = cfg.value;
        rec.current_amount = 0;
        ctx.store.put_config(&rec, crate::ports::store::Expect::Version(cfg.version)).await.unwrap();
        run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
        assert!(ctx.taken::<crate::tasks::DrainVm>().await.is_empty(), "no manage_bot → drain_vm bounce");
        assert!(ctx.taken::<TerminateBot>().await.is_empty(), "not drained yet: left running");
        crate::tasks::update_vm(&ctx, &vm.id, |v| {
            v.drained = true;
            true
        })
        .await
        .unwrap();
        run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
        assert_eq!(ctx.taken::<TerminateBot>().await.len(), 1, "drained: its bot is terminated");
    }

    fn dead(vm: &Vm, now: DateTime<Utc>) -> Bot {
        let mut b = bot(&vm.hostname, now);
        b.is_dead = true;
        b
    }

    #[tokio::test]
    async fn a_dead_bot_on_a_stopped_or_gone_instance_is_replaced_without_waiting_for_the_timeout() {
        for status in [Some("TERMINATED"), Some("STOPPED"), None] {
            let (ctx, f, vm) = setup().await;
            f.bots.bots.lock().unwrap().insert(vm.hostname.clone(), dead(&vm, ctx.now()));
            f.compute.instances.lock().unwrap().clear();
            if let Some(s) = status {
                let mut i = crate::testing::FakeCompute::instance(&vm.hostname, &[]);
                i.status = s.into();
                f.compute.instances.lock().unwrap().insert(vm.hostname.clone(), i);
            }
            f.clock.advance(D::seconds(5)); // far from the 10-minute timeout
            run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
            assert_eq!(ctx.taken::<DestroyInstance>().await.len(), 1, "{status:?}");
            let got = ctx.store.vm(&vm.id).await.unwrap().unwrap().value;
            assert_eq!(got.fault.map(|f| f.kind), Some(FaultKind::InstanceDown), "{status:?}");
            assert_eq!(ctx.store.errors("linux").await.unwrap()[0].code, "instance_down");
            assert_eq!(ctx.taken::<CountVms>().await.len(), 1, "status follows at once");
            let counts = crate::status::tally(&*ctx.store, "linux", ctx.now()).await.unwrap().0;
            assert_eq!((counts.connected, counts.unhealthy), (0, 1), "{status:?}");
        }
    }

    #[tokio::test]
    async fn a_dead_bot_on_a_running_instance_counts_as_dead_until_it_comes_back() {
        let (ctx, f, vm) = setup().await;
        let i = crate::testing::FakeCompute::instance(&vm.hostname, &[]);
        f.compute.instances.lock().unwrap().insert(vm.hostname.clone(), i);
        f.bots.bots.lock().unwrap().insert(vm.hostname.clone(), dead(&vm, ctx.now()));
        run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
        assert!(ctx.taken::<DestroyInstance>().await.is_empty(), "the timeout has not passed");
        let counts = crate::status::tally(&*ctx.store, "linux", ctx.now()).await.unwrap().0;
        assert_eq!((counts.connected, counts.dead), (0, 1));
        f.bots.bots.lock().unwrap().insert(vm.hostname.clone(), bot(&vm.hostname, ctx.now()));
        f.clock.advance(D::seconds(100)); // past observation_ttl: asked again
        run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
        assert!(ctx.store.vm(&vm.id).await.unwrap().unwrap().value.fault.is_none());
    }

    #[tokio::test]
    async fn a_bot_that_never_connects_is_recorded_as_such() {
        let (ctx, f, vm) = setup().await;
        f.clock.advance(D::minutes(11));
        run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
        let got = ctx.store.vm(&vm.id).await.unwrap().unwrap().value;
        assert_eq!(got.fault.map(|f| f.kind), Some(FaultKind::NeverConnected));
        assert_eq!(ctx.store.errors("linux").await.unwrap()[0].code, "never_connected");
    }

    #[tokio::test]
    async fn paused_a_healthy_vm_past_its_deadline_is_kept_until_resumed() {
        let (ctx, f, vm) = setup().await;
        f.bots.bots.lock().unwrap().insert(vm.hostname.clone(), bot(&vm.hostname, ctx.now()));
        crate::operate::pause(&ctx, "linux", "rollout", "bob").await.unwrap();
        f.clock.advance(D::days(2));
        assert_eq!(run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap(), Next::Done);
        assert!(
            ctx.taken::<TerminateBot>().await.is_empty() && ctx.taken::<DestroyInstance>().await.is_empty()
        );
        crate::operate::resume(&ctx, "linux", "bob").await.unwrap();
        run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
        assert_eq!(ctx.taken::<TerminateBot>().await.len(), 1, "retired once resumed");
    }

    #[tokio::test]
    async fn paused_a_faulty_vm_is_destroyed_and_not_replaced() {
        let (ctx, f, vm) = setup().await;
        crate::operate::pause_all(&ctx, "incident", "bob").await.unwrap();
        f.bots.bots.lock().unwrap().insert(vm.hostname.clone(), dead(&vm, ctx.now()));
        f.compute.instances.lock().unwrap().clear(); // the instance is gone
        run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
        let destroy = ctx.taken::<DestroyInstance>().await;
        assert_eq!(destroy.len(), 1, "cleaned up while paused");
        crate::tasks::destroy_instance::run(&ctx, destroy[0].clone()).await.unwrap();
        for t in ctx.taken::<crate::tasks::DeleteBot>().await {
            crate::tasks::delete_bot::run(&ctx, t).await.unwrap();
        }
        assert!(ctx.store.vm(&vm.id).await.unwrap().is_none(), "deleted");
        for t in ctx.taken::<crate::tasks::ExpandConfig>().await {
            crate::tasks::expand_config::run(&ctx, t).await.unwrap();
        }
        assert!(ctx.taken::<crate::tasks::CreateVm>().await.is_empty(), "no new incarnation while paused");
    }

    #[tokio::test]
    async fn paused_past_its_deadline_a_dead_bot_is_a_fault_that_waits_for_the_timeout() {
        let (ctx, f, vm) = setup().await;
        crate::operate::pause(&ctx, "linux", "rollout", "bob").await.unwrap();
        f.clock.advance(D::days(2));
        // Dead just now: with the deadline passed it would go at once, but not while paused.
        f.bots.bots.lock().unwrap().insert(vm.hostname.clone(), dead(&vm, ctx.now()));
        run(&ctx, ManageBot { id: vm.id.clone() }).await.unwrap();
        assert!(ctx.taken::<DestroyInstance>().await.is_empty(), "the timeout applies as to any VM");
        let got = ctx.store.vm(&vm.id).await.unwrap().unwrap().value;
        assert_eq!(got.fault.map(|f| f.kind), Some(FaultKind::BotDead), "and it shows");
    }
}
