//! In-process fakes for handler unit tests (feature `testing`): a scripted Compute, a scripted
//! Swarming, a manual clock, the memory store and in-memory queues, in one `Ctx`.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};
use gce_backend_queues::Task;
use gce_backend_queues::{MemoryEngine, WorkerId};

use crate::config::{Limits, Timing};
use crate::ctx::Ctx;
use crate::env::{Env, Ports, Queues, Settings};
use crate::model::Bot;
use crate::ports::bots::{BotError, BotEvent, Bots};
use crate::ports::clock::ManualClock;
use crate::store::memory::MemoryStore;

mod compute;
pub use compute::FakeCompute;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A scripted Swarming: bots by id, events by id, an optional error for every call, and a log.
#[derive(Debug, Default)]
pub struct FakeBots {
    /// Bots by id.
    pub bots: Mutex<BTreeMap<String, Bot>>,
    /// Events by bot id.
    pub events: Mutex<HashMap<String, Vec<BotEvent>>>,
    /// When set, every call fails with it.
    pub fail: Mutex<Option<BotError>>,
    /// Calls as `method id`.
    pub calls: Mutex<Vec<String>>,
    /// Pending tasks, as the tags each carries.
    pub pending: Mutex<Vec<Vec<String>>>,
    /// When set, counting pending tasks with exactly these tags fails (unavailable).
    pub fail_tags: Mutex<Option<Vec<String>>>,
}

impl FakeBots {
    /// The calls so far.
    pub fn calls(&self) -> Vec<String> {
        lock(&self.calls).clone()
    }

    fn enter(&self, call: String) -> Result<(), BotError> {
        lock(&self.calls).push(call);
        lock(&self.fail).clone().map_or(Ok(()), Err)
    }
}

#[async_trait]
impl Bots for FakeBots {
    async fn get(&self, _s: &str, id: &str) -> Result<Option<Bot>, BotError> {
        self.enter(format!("get {id}"))?;
        Ok(lock(&self.bots).get(id).cloned())
    }

    async fn list(&self, _s: &str, _c: Option<String>) -> Result<(Vec<Bot>, Option<String>), BotError> {
        self.enter("list".into())?;
        Ok((lock(&self.bots).values().filter(|b| !b.deleted).cloned().collect(), None))
    }

    async fn events(&self, _s: &str, id: &str, start: DateTime<Utc>) -> Result<Vec<BotEvent>, BotError> {
        self.enter(format!("events {id}"))?;
        Ok(lock(&self.events)
            .get(id)
            .map(|e| e.iter().filter(|e| e.ts >= start).cloned().collect())
            .unwrap_or_default())
    }

    async fn terminate(&self, _s: &str, id: &str) -> Result<(), BotError> {
        self.enter(format!("terminate {id}"))
    }

    async fn delete(&self, _s: &str, id: &str) -> Result<bool, BotError> {
        self.enter(format!("delete {id}"))?;
        Ok(lock(&self.bots).get_mut(id).map(|b| b.deleted = true).is_some())
    }

    async fn count_pending(&self, _s: &str, tags: &[String], _start: DateTime<Utc>) -> Result<u32, BotError> {
        self.enter(format!("count_pending {}", tags.join(",")))?;
        if lock(&self.fail_tags).as_deref() == Some(tags) {
            return Err(BotError::new(crate::ports::bots::BotErrorKind::Unavailable, "no answer"));
        }
        Ok(lock(&self.pending).iter().filter(|t| tags.iter().all(|w| t.contains(w))).count() as u32)
    }
}

/// Handles to the fakes behind a test `Ctx`.
#[derive(Debug, Clone)]
pub struct Fakes {
    /// Compute.
    pub compute: Arc<FakeCompute>,
    /// Swarming.
    pub bots: Arc<FakeBots>,
    /// Clock.
    pub clock: Arc<ManualClock>,
    /// The memory store behind `ctx.ports.store` (to plant corrupt records).
    pub store: Arc<MemoryStore>,
    /// The identity token signing keys.
    pub keys: Arc<crate::ports::keys::FixedKeys>,
    /// The Billing Catalog's SKUs (the embedded snapshot's until told otherwise).
    pub prices: Arc<crate::ports::prices::FixedPrices>,
}

impl Ctx {
    /// A context over fakes, the memory store and in-memory queues, at 2026-11-21 10:00 UTC.
    pub fn test() -> (Ctx, Fakes) {
        let fakes = Fakes {
            compute: Arc::default(),
            bots: Arc::default(),
            clock: Arc::new(ManualClock::at(Utc.with_ymd_and_hms(2026, 11, 21, 10, 0, 0).unwrap())),
            store: Arc::new(MemoryStore::new()),
            keys: Arc::default(),
            prices: Arc::default(),
        };
        let metrics = crate::metrics::Metrics::default();
        let queues = Queues::new(Arc::new(MemoryEngine::new()), crate::tasks::QUEUES, &HashMap::new())
            .expect("queues")
            .with_metrics(&metrics.queues);
        let ports = Ports {
            store: fakes.store.clone(),
            compute: fakes.compute.clone(),
            bots: fakes.bots.clone(),
            buckets: Arc::new(crate::ports::buckets::MemoryBuckets::new(fakes.clock.clone())),
            clock: fakes.clock.clone(),
            keys: fakes.keys.clone(),
            prices: fakes.prices.clone(),
        };
        let settings = Settings {
            timing: Arc::new(Timing::default()),
            limits: Arc::new(Limits::default()),
            trust: Arc::new(crate::config::Trust::default()),
            deployment: "test".into(),
            configs_dir: PathBuf::from("."),
        };
        let env = Env {
            ports,
            settings,
            queues,
            catalog: Arc::new(crate::catalog::Catalog::new()),
            metrics,
            episodes: Arc::default(),
        };
        let ctx = Ctx { env, providers: Arc::new(crate::providers::Providers::default()) };
        (ctx, fakes)
    }

    /// The same context on `store`.
    pub fn with_store(mut self, store: Arc<dyn crate::ports::store::Store>) -> Self {
        self.env.ports.store = store;
        self
    }

    /// Takes every task of `T`'s queue that is due now, in order.
    pub async fn taken<T: Task>(&self) -> Vec<T> {
        self.take_all::<T>(false).await
    }

    /// [`Ctx::taken`], each task then finished (done), so a later push makes a new task rather
    /// than a follow-up.
    pub async fn finished<T: Task>(&self) -> Vec<T> {
        self.take_all::<T>(true).await
    }

    async fn take_all<T: Task>(&self, finish: bool) -> Vec<T> {
        use gce_backend_queues::engine::{Ack, Resolution};
        let q = self.queues.get(T::QUEUE);
        let worker = WorkerId { group: "test".into(), id: "test".into() };
        let mut out = Vec::new();
        loop {
            let got = q.engine().take(q.spec(), &worker, 100).await.expect("take").tasks;
            if got.is_empty() {
                break;
            }
            if finish {
                let acks: Vec<_> = got
                    .iter()
                    .map(|l| Ack { id: l.id.clone(), token: l.token.clone(), resolution: Resolution::Done })
                    .collect();
                q.engine().finish(q.spec(), &acks).await.expect("finish");
            }
            out.extend(got.into_iter().map(|l| serde_json::from_str(&l.payload).expect("payload")));
        }
        out
    }

    /// The keys of every task of `T`'s queue, due (taken) or waiting for its time, sorted.
    pub async fn keys<T: Task>(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.taken::<T>().await.iter().map(Task::key).collect();
        keys.extend(self.delayed::<T>().await);
        keys.sort();
        keys
    }

    /// The keys of `T`'s tasks that wait for their time (pushed with a delay), soonest first.
    pub async fn delayed<T: Task>(&self) -> Vec<String> {
        let q = self.queues.get(T::QUEUE);
        q.delayed(1000, 0).await.expect("delayed").into_iter().map(|t| t.key).collect()
    }
}

/// `c` over `zones` (zone, weight) instead of its one zone.
pub fn zoned(mut c: crate::config::Config, zones: &[(&str, u32)]) -> crate::config::Config {
    c.attributes.zone.clear();
    c.zones = zones
        .iter()
        .map(|(z, w)| crate::config::ZoneWeight {
            unknown: Default::default(),
            zone: (*z).into(),
            weight: *w,
            from_region: false,
        })
        .collect();
    c
}

/// A valid Config for tests: `amount` VMs, lifetime 1d, timeout 10m.
pub fn config(prefix: &str, amount: u32) -> crate::config::Config {
    let yaml = format!(
        "prefix: {prefix}\namount: {{min: {amount}, max: {amount}}}\nattributes:\n  project: test-project\n  zone: z\n  \
         machine_type: \"zones/{{{{.Zone}}}}/machineTypes/e2-small\"\n  disk: [{{image: global/images/x, size: 10}}]\n  \
         network_interface: [{{network: global/networks/default}}]\nlifetime: 1d\ntimeout: 10m\nswarming: https://swarm.example.com\n"
    );
    let c = crate::config::Config::parse(&yaml, "test").expect("test config");
    c.validate().expect("valid test config");
    c
}

impl Ctx {
    /// Stores a Config with `amount` VMs wanted.
    pub async fn seed_config(&self, prefix: &str, amount: u32) {
        self.seed_config_with(prefix, amount, |_| {}).await;
    }

    /// [`Ctx::seed_config`] with `change` made to its Config first; returns the record written.
    pub async fn seed_config_with(
        &self,
        prefix: &str,
        amount: u32,
        change: impl FnOnce(&mut crate::config::Config),
    ) -> crate::model::ConfigRecord {
        let mut c = config(prefix, amount);
        change(&mut c);
        self.seed_record(c, amount, &format!("{prefix}.yaml")).await
    }

    /// [`Ctx::seed_config`] with another `source` (e.g. [`crate::model::API_SOURCE`]).
    pub async fn seed_config_from(&self, prefix: &str, amount: u32, source: &str) {
        self.seed_record(config(prefix, amount), amount, source).await;
    }

    async fn seed_record(
        &self,
        c: crate::config::Config,
        amount: u32,
        source: &str,
    ) -> crate::model::ConfigRecord {
        let rec = crate::model::ConfigRecord {
            config: c,
            revision: "r1".into(),
            current_amount: amount,
            source: source.to_owned(),
            orphaned: None,
            delete_at: None,
            verified: true,
            paused: None,
            provider_changed: None,
            ..Default::default()
        };
        assert!(self.ports.store.put_config(&rec, crate::ports::store::Expect::Absent).await.expect("store"));
        rec
    }

    /// Stores a VM of Config `prefix` (hostname `<id>-abcd`), changed by `f`.
    pub async fn seed_vm(&self, id: &str, f: impl FnOnce(&mut crate::model::Vm)) -> crate::model::Vm {
        let (prefix, index) = crate::naming::parse_id(id).expect("id");
        let c = config(prefix, index + 1);
        let mut vm = crate::model::Vm {
            id: id.into(),
            config: prefix.into(),
            index,
            hostname: format!("{id}-abcd"),
            attributes: c.attributes_in(&c.attributes.zone),
            swarming: c.swarming,
            lifetime: c.lifetime.0,
            timeout: c.timeout.0,
            revision: "r1".into(),
            configured: self.now(),
            ..crate::model::Vm::default()
        };
        f(&mut vm);
        // Seeded over a record made before (by `expand_config`, say): it replaces it.
        let expect = match self.ports.store.vm(id).await.expect("store") {
            Some(cur) => crate::ports::store::Expect::Version(cur.version),
            None => crate::ports::store::Expect::Absent,
        };
        assert!(self.ports.store.put_vm(&vm, expect).await.expect("store"));
        vm
    }
}

/// Marks `vm` as having an instance created at the clock's time.
pub fn created(now: DateTime<Utc>) -> impl FnOnce(&mut crate::model::Vm) {
    move |v| {
        v.instance = Some(crate::model::Placed {
            unknown: Default::default(),
            url: format!("https://compute/projects/p/zones/z/instances/{}", v.hostname),
            created: now,
            instance_id: format!("id-{}", v.hostname),
            internal_ip: String::new(),
            external_ip: String::new(),
        });
        v.insert_sent = Some(now);
    }
}
