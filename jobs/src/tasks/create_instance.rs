//! `create_instance`: creates a VM's instance and records it.
//!
//! * Insert with a deterministic requestId (`create-<hostname>`, then `-<attempt>` after an
//!   insert that failed for good), so a re-run is the same call; record the operation and follow
//!   it with zoneOperations.get, the task going back to its queue between looks (0.25 s after
//!   the insert, then twice as late each time up to `timing.operation_poll`), so no worker waits
//!   on Compute. An operation Compute no longer knows is asked for again with the same insert.
//! * 409 `alreadyExists`: adopt the instance when its labels say it is this VM's.
//! * Quota or stockout: keep the VM (no name churn), back off its (project, zone), record the
//!   error on the Config's status, try again when the backoff ends.
//! * Rate limits and 5xx: retry with the queue's backoff.
//! * Invalid request: record the error and drop the VM record, so the next expansion builds it
//!   again from the (maybe fixed) Config.
//! * Done: record `created`, `url` and addresses once, and start watching the bot.
//! * Paused Config: a VM not yet sent waits (no insert; resuming pushes this task again); an
//!   insert already sent is followed to its end.

use crate::tasks::ManageBot;

use crate::backoff::{self, Scope};
use crate::config::{Metadata, labels};
use crate::ctx::{Ctx, request_id};
use crate::error::TaskError;
use crate::model::Vm;
use crate::ports::compute::{ComputeError, Instance, InstanceSpec, Kind, Operation};
use crate::tasks::Next;
use crate::ports::store::Versioned;
use crate::tasks::{update_vm, write_vm_at};
use crate::telemetry::Stage;

task!(
    /// Create (or adopt) the instance of a VM.
    CreateInstance, "create_instance", { /// VM id.
    id }, |self| self.id.clone()
);

const STAGE: &str = "create_instance";

/// The instance `vm` needs: its template, its metadata with the Swarming server, and our labels
/// (the adapter turns it into Compute's resource).
pub fn instance_spec(vm: &Vm, deployment: &str) -> InstanceSpec {
    let a = &vm.attributes;
    let mut metadata: Vec<(String, String)> =
        a.metadata.iter().filter_map(Metadata::pair).map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
    metadata.push(("swarming-server".into(), vm.swarming.clone()));
    let mut labels = a.label.clone();
    labels.insert(labels::DEPLOYMENT.into(), deployment.into());
    labels.insert(labels::CONFIG.into(), vm.config.clone());
    labels.insert(labels::VM.into(), vm.id.clone());
    InstanceSpec { name: vm.hostname.clone(), attributes: a.clone(), metadata, labels }
}

/// The requestId of an insert attempt.
pub fn insert_request_id(vm: &Vm) -> String {
    match vm.insert_attempt {
        0 => request_id(&format!("create-{}", vm.hostname)),
        n => request_id(&format!("create-{}-{n}", vm.hostname)),
    }
}

/// Handles one task.
pub async fn run(ctx: &Ctx, t: CreateInstance) -> Result<Next, TaskError> {
    let Some(cur) = ctx.vm(&t.id).await? else { return Ok(Next::Done) };
    let vm = &cur.value;
    if vm.instance.is_some() {
        ctx.push(&ManageBot { id: t.id }).await?;
        return Ok(Next::Done);
    }
    if vm.insert_sent.is_none() {
        // Not sent yet: still wanted? (The amount may have dropped since it was made.)
        let cfg = ctx.store.config(&vm.config).await?.filter(|c| c.value.wants(vm.index));
        let Some(cfg) = cfg.filter(|_| !vm.drained) else {
            // Never sent to GCE: there is nothing to clean up.
            let unsent = |v: &Vm| v.insert_sent.is_none();
            return crate::tasks::drop_uncreated(ctx, &vm.id, unsent).await.map(|()| Next::Done);
        };
        if ctx.paused(&cfg.value).await?.is_some() {
            return Ok(Next::Done);
        }
    }
    if !vm.operation.is_empty() && vm.insert_sent.is_some() {
        // An insert in flight: where is it now? (Compute may have forgotten it: send it again.)
        if let Some(op) = ctx.compute.operation(vm.project(), vm.zone(), &vm.operation).await? {
            return follow(ctx, cur, op).await;
        }
    }
    let now = ctx.now();
    if let Some(wait) = backoff::wait_for(ctx, vm).await? {
        return Ok(Next::After(wait));
    }
    let (cur, sending) = match vm.insert_sent {
        Some(_) => (cur, false),
        None => match write_vm_at(ctx, cur, |v| {
            v.insert_sent.is_none() && {
                v.insert_sent = Some(now);
                true
            }
        })
        .await?
        {
            Some(written) => written,
            None => return Ok(Next::Done),
        },
    };
    let vm = &cur.value;
    let rid = insert_request_id(vm);
    let op = match ctx.compute.insert(vm.project(), vm.zone(), &rid, &instance_spec(vm, &ctx.deployment)).await {
        Ok(op) => {
            // The slot's first accepted insert only (a re-send after a failed operation has a
            // later attempt; one refused outright sends again from here).
            if sending && vm.insert_attempt == 0 {
                ctx.telemetry.lifecycle(vm, Stage::ChangeToInsert, vm.configured, now);
            }
            op
        }
        Err(e) if e.kind == Kind::AlreadyExists => return adopt(ctx, cur, e).await,
        Err(e) => return failed(ctx, vm, e, "").await,
    };
    if op.done || op.name == vm.operation {
        return follow(ctx, cur, op).await;
    }
    // Recorded, so the next look asks for the operation instead of sending the insert again.
    let (hostname, attempt) = (vm.hostname.clone(), vm.insert_attempt);
    let written = write_vm_at(ctx, cur, |v| {
        v.hostname == hostname && v.insert_attempt == attempt && v.instance.is_none() && {
            v.operation = op.name.clone();
            true
        }
    })
    .await?;
    match written {
        Some((cur, _)) => follow(ctx, cur, op).await,
        None => Ok(Next::Done),
    }
}

async fn follow(ctx: &Ctx, cur: Versioned<Vm>, op: Operation) -> Result<Next, TaskError> {
    let vm = &cur.value;
    if !op.done {
        let sent = vm.insert_sent.unwrap_or_else(|| ctx.now());
        return Ok(Next::After(ctx.operation_poll(ctx.now() - sent)));
    }
    if let Some(e) = op.error {
        // The failed operation stays bound to its requestId: the next try needs a new one.
        update_vm(ctx, &vm.id, |v| {
            if v.hostname != vm.hostname || v.insert_attempt != vm.insert_attempt {
                return false; // another run already moved on
            }
            v.insert_attempt += 1;
            v.insert_sent = None;
            v.operation.clear();
            true
        })
        .await?;
        return failed(ctx, vm, e, &op.name).await;
    }
    match ctx.compute.get(vm.project(), vm.zone(), &vm.hostname).await? {
        Some(inst) => created(ctx, cur, inst).await.map(|()| Next::Done),
        None => {
            let msg = format!("operation {} is DONE but instance {} is not found", op.name, vm.hostname);
            ctx.record(&vm.config, STAGE, "404", &msg, vm.zone(), &op.name).await?;
            drop_vm(ctx, vm).await.map(|()| Next::Done)
        }
    }
}

/// 409: the name exists. Ours (labels name this VM in this deployment): adopt it. Not ours: this
/// hostname is taken, so drop the record and let the next expansion pick a new one.
async fn adopt(ctx: &Ctx, cur: Versioned<Vm>, e: ComputeError) -> Result<Next, TaskError> {
    let vm = &cur.value;
    let inst = ctx.compute.get(vm.project(), vm.zone(), &vm.hostname).await?;
    match inst {
        Some(inst)
            if inst.labels.get(labels::VM) == Some(&vm.id)
                && inst.labels.get(labels::DEPLOYMENT) == Some(&ctx.deployment) =>
        {
            created(ctx, cur, inst).await.map(|()| Next::Done)
        }
        Some(_) => {
            let msg = format!("{}: instance {} exists and is not ours", e.message, vm.hostname);
            ctx.record(&vm.config, STAGE, &e.code, &msg, vm.zone(), "").await?;
            drop_vm(ctx, vm).await.map(|()| Next::Done)
        }
        // Gone between the insert and the get: try again.
        None => Ok(Next::After(ctx.watch())),
    }
}

async fn failed(ctx: &Ctx, vm: &Vm, e: ComputeError, op: &str) -> Result<Next, TaskError> {
    ctx.telemetry.instance_op(vm, "insert", e.kind.as_str(), &e.code);
    ctx.record(&vm.config, STAGE, &e.code, &e.message, vm.zone(), op).await?;
    match e.kind {
        Kind::Quota | Kind::Stockout => {
            if op.is_empty() {
                // Refused outright: no operation holds this requestId, so the next try is a new
                // send and passes the checks of one (still wanted, not paused).
                update_vm(ctx, &vm.id, |v| {
                    v.hostname == vm.hostname && v.instance.is_none() && v.insert_sent.take().is_some()
                })
                .await?;
            }
            let wait = backoff::hit(ctx, &Scope::zone(vm), &e.code).await?;
            Ok(Next::After(wait))
        }
        Kind::RateLimited | Kind::Transient => Err(TaskError::Compute(e)),
        Kind::Invalid | Kind::NotFound | Kind::AlreadyExists => {
            // The Config makes instances Compute refuses: slow its next tries down, so a new
            // hostname does not follow at once, forever.
            backoff::hit(ctx, &Scope::config(&vm.config), "INVALID").await?;
            drop_vm(ctx, vm).await.map(|()| Next::Done)
        }
    }
}

async fn created(ctx: &Ctx, cur: Versioned<Vm>, inst: Instance) -> Result<(), TaskError> {
    let hostname = cur.value.hostname.clone();
    let written = write_vm_at(ctx, cur, |v| {
        if v.hostname != hostname || v.instance.is_some() {
            return false;
        }
        v.instance = Some(inst.placed());
        v.operation.clear();
        true
    })
    .await?;
    if let Some((Versioned { value: v, .. }, wrote)) =
        written.as_ref().filter(|(v, _)| v.value.url() == Some(inst.url.as_str()))
    {
        let vm = v;
        // Only the run that recorded the instance counts it (another may have recorded it first).
        if *wrote {
            ctx.telemetry.instance_op(vm, "insert", "ok", "");
            if let Some(sent) = v.insert_sent {
                ctx.telemetry.lifecycle(vm, Stage::InsertToCreated, sent, ctx.now());
            }
        }
        backoff::clear_for(ctx, vm).await?;
        tracing::info!(config = %vm.config, vm = %vm.id, hostname = %vm.hostname, zone = %vm.zone(), "instance created");
        ctx.resolved(&vm.config, &[STAGE]).await?;
        // Its bot cannot be there yet: the first look comes soon after boot.
        let first = ctx.look_again(chrono::Duration::zero());
        ctx.push_at(&ManageBot { id: vm.id.clone() }, gce_backend_queues::When::After(first)).await?;
    }
    Ok(())
}

/// Drops this incarnation's record (it has no instance), so a new hostname follows.
async fn drop_vm(ctx: &Ctx, vm: &Vm) -> Result<(), TaskError> {
    crate::tasks::drop_uncreated(ctx, &vm.id, |v| v.hostname == vm.hostname).await
}

#[cfg(test)]
mod tests {
    use crate::tasks::ManageBot;

    use super::*;
    use crate::ports::compute::Operation;
    use crate::testing::created as made;

    fn op_error(code: &str, http: u16) -> Operation {
        Operation {
            name: "op-1".into(),
            done: true,
            error: Some(ComputeError::from_operation(code, Some(http), "m")),
        }
    }

    #[tokio::test]
    async fn invalid_a_vm_that_is_gone_is_left_alone() {
        let (ctx, f) = Ctx::test();
        run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
        assert!(f.compute.calls().is_empty());
    }

    #[tokio::test]
    async fn already_done_a_created_vm_is_only_watched() {
        let (ctx, f) = Ctx::test();
        ctx.seed_config("linux", 3).await;
        ctx.seed_vm("linux-0", made(ctx.now())).await;
        run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
        assert!(f.compute.calls().is_empty());
        assert_eq!(ctx.taken::<ManageBot>().await, [ManageBot { id: "linux-0".into() }]);
    }

    #[tokio::test]
    async fn done_records_the_instance_with_a_deterministic_request_id_and_watches_the_bot() {
        let (ctx, f) = Ctx::test();
        ctx.seed_config("linux", 3).await;
        let vm = ctx.seed_vm("linux-0", |_| {}).await;
        run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
        let rid = request_id("create-linux-0-abcd");
        assert_eq!(f.compute.calls()[0], format!("insert linux-0-abcd {rid}"));
        let got = ctx.store.vm("linux-0").await.unwrap().unwrap().value;
        let placed = got.instance.expect("recorded");
        assert!(placed.url.ends_with("/linux-0-abcd") && placed.external_ip == "35.0.0.1");
        assert_eq!(got.hostname, vm.hostname);
        assert!(got.operation.is_empty(), "no operation left to follow");
        assert!(ctx.taken::<ManageBot>().await.is_empty(), "its bot cannot be there at once");
        assert_eq!(ctx.delayed::<ManageBot>().await, ["linux-0"], "looked for soon after boot");
        let m = ctx.telemetry.text();
        for line in [
            r#"gce_backend_instance_operations_total{config="linux",zone="z",op="insert",result="ok",code=""} 1"#,
            r#"gce_backend_vm_lifecycle_seconds_count{config="linux",stage="change_to_insert"} 1"#,
            r#"gce_backend_vm_lifecycle_seconds_count{config="linux",stage="insert_to_created"} 1"#,
        ] {
            assert!(m.lines().any(|l| l == line), "{line} in\n{m}");
        }
    }

    #[tokio::test]
    async fn a_pending_insert_is_followed_with_zone_operations_get_looking_twice_as_late_each_time() {
        let (ctx, f) = Ctx::test();
        ctx.seed_config("linux", 3).await;
        ctx.seed_vm("linux-0", |_| {}).await;
        let pending = Operation { name: "op-7".into(), done: false, error: None };
        f.compute.inserts.lock().unwrap().push_back(Ok(pending.clone()));
        let ms = std::time::Duration::from_millis;
        let next = run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
        assert_eq!(next, Next::After(ms(250)), "the task goes back to its queue: no worker waits");
        assert_eq!(ctx.store.vm("linux-0").await.unwrap().unwrap().value.operation, "op-7");
        for (after, next) in [(1, 1000), (20, 5000)] {
            f.compute.operations.lock().unwrap().push_back(Ok(Some(pending.clone())));
            f.clock.advance(chrono::Duration::seconds(after));
            let got = run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
            assert_eq!(got, Next::After(ms(next)), "{after} s later: as long again, at most operation_poll");
        }
        // Compute forgot the operation: the same insert (same requestId) asks for it again.
        f.compute.operations.lock().unwrap().push_back(Ok(None));
        assert_eq!(run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap(), Next::Done);
        let insert = format!("insert linux-0-abcd {}", request_id("create-linux-0-abcd"));
        let op = "operation op-7".to_owned();
        let get = "get linux-0-abcd".to_owned();
        assert_eq!(f.compute.calls(), [insert.clone(), op.clone(), op.clone(), op, insert, get]);
        let vm = ctx.store.vm("linux-0").await.unwrap().unwrap().value;
        assert!(vm.instance.is_some() && vm.operation.is_empty());
    }

    #[tokio::test]
    async fn already_exists_ours_is_adopted_and_foreign_drops_the_record() {
        let (ctx, f) = Ctx::test();
        ctx.seed_config("linux", 3).await;
        ctx.seed_vm("linux-0", |_| {}).await;
        let ours = labelled("linux-0-abcd", "linux-0", "test");
        f.compute.instances.lock().unwrap().insert(ours.name.clone(), ours);
        f.compute.inserts.lock().unwrap().push_back(Err(ComputeError::from_http(
            Some(409),
            "alreadyExists",
            "exists",
        )));
        run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
        assert!(ctx.store.vm("linux-0").await.unwrap().unwrap().value.instance.is_some(), "adopted");

        ctx.seed_vm("linux-1", |_| {}).await;
        let foreign = labelled("linux-1-abcd", "linux-1", "another-deployment");
        f.compute.instances.lock().unwrap().insert(foreign.name.clone(), foreign);
        f.compute.inserts.lock().unwrap().push_back(Err(ComputeError::from_http(
            Some(409),
            "alreadyExists",
            "exists",
        )));
        run(&ctx, CreateInstance { id: "linux-1".into() }).await.unwrap();
        assert!(ctx.store.vm("linux-1").await.unwrap().is_none(), "not ours: a new hostname comes next");
        assert_eq!(ctx.store.errors("linux").await.unwrap()[0].code, "409");
    }

    #[tokio::test]
    async fn quota_keeps_the_vm_backs_off_the_zone_and_uses_a_new_request_id_after() {
        let (ctx, f) = Ctx::test();
        ctx.seed_config("linux", 3).await;
        ctx.seed_vm("linux-0", |_| {}).await;
        f.compute.inserts.lock().unwrap().push_back(Ok(op_error("QUOTA_EXCEEDED", 403)));
        let next = run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
        assert_eq!(
            next,
            Next::After(std::time::Duration::from_secs(30)),
            "tried again when the backoff ends"
        );
        let vm = ctx.store.vm("linux-0").await.unwrap().unwrap().value;
        assert_eq!((vm.hostname.as_str(), vm.insert_attempt, vm.url()), ("linux-0-abcd", 1, None));
        let b = ctx.store.backoff("p", "z").await.unwrap().unwrap();
        assert_eq!((b.reason.as_str(), b.failures), ("QUOTA_EXCEEDED", 1));
        assert_eq!(ctx.store.errors("linux").await.unwrap()[0].code, "QUOTA_EXCEEDED");
        let quota = r#"gce_backend_instance_operations_total{config="linux",zone="z",op="insert",result="quota",code="QUOTA_EXCEEDED"} 1"#;
        assert!(ctx.telemetry.text().lines().any(|l| l == quota), "{}", ctx.telemetry.text());
        // Within the backoff: no call at all, and a look when it ends.
        let next = run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
        assert_eq!(next, Next::After(std::time::Duration::from_secs(30)));
        assert_eq!(f.compute.calls().len(), 1);
        // After it: a new attempt, so a new requestId.
        f.clock.advance(chrono::Duration::seconds(31));
        run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
        assert_eq!(
            f.compute.calls()[1],
            format!("insert linux-0-abcd {}", request_id("create-linux-0-abcd-1"))
        );
        let once = r#"gce_backend_vm_lifecycle_seconds_count{config="linux",stage="change_to_insert"} 1"#;
        assert!(ctx.telemetry.text().lines().any(|l| l == once), "a re-send is not another change");
        assert!(ctx.store.backoff("p", "z").await.unwrap().is_none(), "success clears the backoff");
    }

    #[tokio::test]
    async fn a_wave_of_stockouts_backs_the_zone_off_once() {
        let (ctx, f) = Ctx::test();
        ctx.seed_config("linux", 3).await;
        for id in ["linux-0", "linux-1", "linux-2"] {
            ctx.seed_vm(id, |_| {}).await;
            f.compute.inserts.lock().unwrap().push_back(Ok(op_error("ZONE_RESOURCE_POOL_EXHAUSTED", 503)));
        }
        run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
        // The others were already sent when the zone backed off (insert_sent set elsewhere).
        for id in ["linux-1", "linux-2"] {
            let vm = ctx.store.vm(id).await.unwrap().unwrap();
            let op = op_error("ZONE_RESOURCE_POOL_EXHAUSTED", 503);
            follow(&ctx, vm, op).await.unwrap();
        }
        let b = ctx.store.backoff("p", "z").await.unwrap().unwrap();
        assert_eq!(
            (b.failures, b.reason.as_str()),
            (1, "ZONE_RESOURCE_POOL_EXHAUSTED"),
            "one wave, one step"
        );
        assert_eq!(ctx.store.errors("linux").await.unwrap().len(), 3, "each VM's error is recorded");
    }

    #[tokio::test]
    async fn transient_errors_keep_the_vm_and_ask_for_a_retry() {
        let (ctx, f) = Ctx::test();
        ctx.seed_config("linux", 3).await;
        ctx.seed_vm("linux-0", |_| {}).await;
        f.compute.inserts.lock().unwrap().push_back(Err(ComputeError::from_http(
            Some(503),
            "backendError",
            "busy",
        )));
        let e = run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap_err();
        assert_eq!(e.class(), crate::Class::Transient);
        assert!(ctx.store.vm("linux-0").await.unwrap().is_some());
    }

    #[tokio::test]
    async fn permanent_errors_record_and_drop_the_vm_for_a_fresh_build() {
        let (ctx, f) = Ctx::test();
        ctx.seed_config("linux", 3).await;
        ctx.seed_vm("linux-0", |_| {}).await;
        f.compute.inserts.lock().unwrap().push_back(Err(ComputeError::from_http(
            Some(400),
            "invalid",
            "bad image",
        )));
        run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
        assert!(ctx.store.vm("linux-0").await.unwrap().is_none());
        assert_eq!(ctx.store.errors("linux").await.unwrap()[0].message, "bad image");
        // The next VM of the Config waits for the Config's backoff instead of looping.
        ctx.seed_vm("linux-1", |_| {}).await;
        let next = run(&ctx, CreateInstance { id: "linux-1".into() }).await.unwrap();
        assert_eq!(f.compute.calls().len(), 1, "no second insert within the backoff");
        assert_eq!(next, Next::After(std::time::Duration::from_secs(30)), "it waits for the backoff's end");
        let st = crate::status::status(&*ctx.store, "linux", ctx.now(), chrono::Duration::zero(), false)
            .await
            .unwrap();
        assert_eq!(st.backoff.unwrap().reason, "INVALID");
    }

    #[tokio::test]
    async fn a_vm_past_the_amount_never_sent_to_gce_is_dropped_without_a_call() {
        let (ctx, f) = Ctx::test();
        ctx.seed_config("linux", 1).await;
        ctx.seed_vm("linux-2", |_| {}).await;
        run(&ctx, CreateInstance { id: "linux-2".into() }).await.unwrap();
        assert!(f.compute.calls().is_empty(), "the amount dropped since it was made");
        assert!(ctx.store.vm("linux-2").await.unwrap().is_none());
    }

    #[tokio::test]
    async fn a_drained_vm_never_sent_to_gce_is_dropped_without_a_call() {
        let (ctx, f) = Ctx::test();
        ctx.seed_config("linux", 3).await;
        ctx.seed_vm("linux-0", |v| v.drained = true).await;
        run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
        assert!(f.compute.calls().is_empty());
        assert!(ctx.store.vm("linux-0").await.unwrap().is_none());
    }

    #[test]
    fn the_instance_spec_carries_our_labels_and_the_swarming_server() {
        let (ctx, _) = Ctx::test();
        let vm = vm_fixture(&ctx);
        let spec = instance_spec(&vm, "prod");
        assert_eq!(spec.name, "linux-0-abcd");
        assert_eq!(spec.labels["gce-backend"], "prod");
        assert_eq!(spec.labels["gce-backend-vm"], "linux-0");
        assert_eq!(spec.attributes.machine_type, "zones/z/machineTypes/e2-small");
        assert!(spec.metadata.contains(&("swarming-server".into(), "https://swarm.example.com".into())));
    }

    fn vm_fixture(ctx: &Ctx) -> Vm {
        let c = crate::testing::config("linux", 1);
        let mut a = c.attributes;
        a.machine_type = a.machine_type.replace("{{.Zone}}", "z");
        Vm {
            id: "linux-0".into(),
            config: "linux".into(),
            index: 0,
            hostname: "linux-0-abcd".into(),
            attributes: a,
            swarming: c.swarming,
            lifetime: 1,
            timeout: 0,
            revision: String::new(),
            configured: ctx.now(),
            ..Vm::default()
        }
    }

    /// An instance labelled as VM `vm` of `deployment`.
    fn labelled(name: &str, vm: &str, deployment: &str) -> Instance {
        crate::testing::FakeCompute::instance(name, &[(labels::VM, vm), (labels::DEPLOYMENT, deployment)])
    }

    #[tokio::test]
    async fn paused_a_vm_not_yet_sent_waits_and_one_already_sent_is_followed() {
        let (ctx, f) = Ctx::test();
        ctx.seed_config("linux", 3).await;
        ctx.seed_vm("linux-0", |_| {}).await;
        ctx.seed_vm("linux-1", |v| v.insert_sent = Some(ctx.now())).await;
        crate::operate::pause(&ctx, "linux", "rollout", "bob").await.unwrap();
        let next = run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
        assert_eq!(next, Next::Done, "resuming pushes it again");
        assert!(f.compute.calls().is_empty(), "no insert while paused");
        let vm = ctx.store.vm("linux-0").await.unwrap().unwrap().value;
        assert!(vm.insert_sent.is_none() && !vm.drained, "kept as it was");
        run(&ctx, CreateInstance { id: "linux-1".into() }).await.unwrap();
        let rid = request_id("create-linux-1-abcd");
        assert_eq!(f.compute.calls()[0], format!("insert linux-1-abcd {rid}"), "the same insert, followed");
        assert!(ctx.store.vm("linux-1").await.unwrap().unwrap().value.instance.is_some());
        // Past the amount, a VM not sent is still dropped while paused.
        ctx.seed_vm("linux-5", |_| {}).await;
        run(&ctx, CreateInstance { id: "linux-5".into() }).await.unwrap();
        assert!(ctx.store.vm("linux-5").await.unwrap().is_none());
    }

    #[tokio::test]
    async fn paused_after_a_refused_insert_no_insert_is_sent_again() {
        let (ctx, f) = Ctx::test();
        ctx.seed_config("linux", 3).await;
        ctx.seed_vm("linux-0", |_| {}).await;
        let quota = ComputeError::from_http(Some(403), "quotaExceeded", "CPUS");
        f.compute.inserts.lock().unwrap().push_back(Err(quota));
        run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap();
        let vm = ctx.store.vm("linux-0").await.unwrap().unwrap().value;
        assert!(vm.insert_sent.is_none(), "a refused send holds no operation");
        crate::operate::pause(&ctx, "linux", "quota incident", "bob").await.unwrap();
        assert_eq!(run(&ctx, CreateInstance { id: "linux-0".into() }).await.unwrap(), Next::Done);
        assert_eq!(f.compute.calls().len(), 1, "only the refused insert: {:?}", f.compute.calls());
    }
}
