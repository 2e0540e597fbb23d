//! Unit tests of the world: capacity, caps, and the counts kept for `/sim/summary`.

use super::model::KEEP_BOT_EVENTS;
use super::*;

fn body(name: &str) -> Value {
    json!({"name": name, "machineType": "zones/us-central1-b/machineTypes/e2-small",
           "metadata": {"items": [{"key": "swarming-server", "value": "https://s.example.com"}]},
           "networkInterfaces": [{"accessConfigs": [{"type": "ONE_TO_ONE_NAT"}]}]})
}

fn world(cfg: SimConfig) -> (World, Instant) {
    let t0 = Instant::now();
    (World::new(cfg, t0), t0)
}

#[test]
fn holds_200000_instances_and_their_bots() {
    const N: usize = 200_000;
    let (mut w, t0) = world(SimConfig { max_operations: 10_000, ..SimConfig::default() });
    for n in 0..N {
        w.insert("p", "us-central1-b", None, &body(&format!("vm-{n}"))).unwrap();
    }
    w.advance(t0 + Duration::from_secs(60));
    assert_eq!(w.instances.len(), N);
    assert!(w.instances.values().all(|i| i.status == Status::Running));
    assert_eq!(w.bots["s.example.com"].len(), N, "every bot connected");
    assert!(w.operations.len() <= 10_000, "operations are capped");
    assert!(w.timeline.is_empty(), "nothing left scheduled");
    assert_eq!(w.usage[&("p".to_owned(), "us-central1".to_owned())].instances, N as u64);
}

#[test]
fn every_store_is_capped() {
    let cfg = SimConfig { max_operations: 100, max_bots: 50, max_instances: 120, ..SimConfig::default() };
    let (mut w, t0) = world(cfg);
    for n in 0..150 {
        let rid = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, format!("{n}").as_bytes()).to_string();
        w.insert("p", "us-central1-b", Some(rid), &body(&format!("vm-{n}"))).unwrap();
    }
    assert!(w.operations.len() <= 100 && w.request_ids.len() <= 100 && w.inserts.len() <= 100);
    assert_eq!(w.instances.len(), 120, "inserts past max_instances fail as a stockout");
    w.advance(t0 + Duration::from_secs(10));
    let failed = w
        .operations
        .values()
        .filter(|op| op.error.as_ref().is_some_and(|e| e.code == "ZONE_RESOURCE_POOL_EXHAUSTED"));
    assert_eq!(failed.count(), 30);
    // Dead bots are dropped first when there are too many.
    let names: Vec<String> = w.instances.keys().map(|k| k.2.clone()).take(70).collect();
    for name in &names {
        w.kill_bot("s.example.com", name);
    }
    let last: Vec<String> = w.instances.keys().map(|k| k.2.clone()).skip(100).collect();
    for name in &last {
        w.delete("p", "us-central1-b", name, None).unwrap();
    }
    w.advance(t0 + Duration::from_secs(15));
    for n in 150..160 {
        w.insert("p", "us-central1-a", None, &body(&format!("vm-{n}"))).unwrap();
    }
    w.advance(t0 + Duration::from_secs(25));
    let bots = &w.bots["s.example.com"];
    assert!(bots.values().all(|b| b.dead_at.is_none()), "past the cap, dead bots are dropped");
    assert_eq!(bots.len(), 120 - 70 - 20 + 10, "live bots stay: their instances are capped instead");
    // A bot keeps at most KEEP_BOT_EVENTS events.
    let (mut w, t0) = world(SimConfig::default());
    w.insert("p", "us-central1-b", None, &body("vm-x")).unwrap();
    let mut t = t0;
    for _ in 0..30 {
        t += Duration::from_secs(5);
        w.advance(t);
        w.terminate_bot("s.example.com", "vm-x");
        w.delete_bot("s.example.com", "vm-x");
        let id = w.instances.values().next().unwrap().id;
        w.connect_bot("s.example.com".into(), ("p".into(), "us-central1-b".into(), "vm-x".into()), id);
    }
    assert!(w.bots["s.example.com"]["vm-x"].events.len() <= KEEP_BOT_EVENTS);
}

/// The kept counts equal a scan.
fn exact(w: &World, when: &str) {
    assert_eq!(w.counts(), &w.scan_counts(), "counts after {when}");
}

fn at(t0: Instant, ms: u64) -> Instant {
    t0 + Duration::from_millis(ms)
}

#[test]
fn counts_follow_every_instance_transition() {
    let (mut w, t0) =
        world(SimConfig { provision_ms: 100, stage_ms: 100, stop_ms: 100, ..SimConfig::default() });
    for name in ["vm-a", "vm-b", "vm-c", "vm-d"] {
        w.insert("p", "us-central1-b", None, &body(name)).unwrap();
    }
    w.insert("p", "us-central1-a", None, &body("vm-e")).unwrap();
    exact(&w, "inserts (PROVISIONING)");
    assert_eq!(w.counts().instances.by_status[Status::Provisioning as usize], 5);
    assert_eq!(w.counts().zones["us-central1-a"].total, 1);
    w.delete("p", "us-central1-b", "vm-a", None).unwrap();
    exact(&w, "a delete while PROVISIONING");
    w.delete("p", "us-central1-b", "vm-a", None).unwrap();
    exact(&w, "a second delete");
    w.advance(at(t0, 150));
    exact(&w, "STAGING, and a deleted one TERMINATED");
    w.advance(at(t0, 250));
    exact(&w, "RUNNING, and a deleted one gone");
    assert_eq!(w.counts().instances.total, 4);
    w.preempt("p", "us-central1-b", "vm-b").unwrap();
    exact(&w, "a preempt (STOPPING)");
    w.preempt("p", "us-central1-b", "vm-b").unwrap();
    exact(&w, "a second preempt");
    w.advance(at(t0, 400));
    exact(&w, "a preempted instance TERMINATED");
    w.delete("p", "us-central1-b", "vm-b", None).unwrap();
    exact(&w, "a delete of a TERMINATED instance (it stays TERMINATED, deleting)");
    assert_eq!(w.counts().instances.by_status[Status::Terminated as usize], 1);
    assert_eq!(w.counts().instances.deleting, 1);
    w.delete("p", "us-central1-a", "vm-e", None).unwrap();
    w.advance(at(t0, 1000));
    exact(&w, "every delete done");
    assert!(!w.counts().zones.contains_key("us-central1-a"), "a zone without instances is dropped");
    // A never-booting instance stays STAGING.
    w.faults.never_boot_rate = 1.0;
    w.insert("p", "us-central1-b", None, &body("vm-n")).unwrap();
    w.advance(at(t0, 2000));
    exact(&w, "a never-booting instance");
    assert_eq!(w.counts().instances.by_status[Status::Staging as usize], 1);
}

#[test]
fn counts_follow_every_bot_and_operation_transition() {
    let cfg = SimConfig {
        max_operations: 6,
        max_bots: 4,
        bot_task_ms: 1000,
        bot_idle_ms: 0,
        ..SimConfig::default()
    };
    let (mut w, t0) = world(cfg);
    for n in 0..5 {
        w.insert("p", "us-central1-b", None, &body(&format!("vm-{n}"))).unwrap();
    }
    exact(&w, "operations capped while PENDING");
    assert_eq!(w.counts().operations.iter().sum::<u64>(), 5);
    w.advance(t0 + Duration::from_secs(30));
    exact(&w, "bots connected, operations DONE");
    let s = "s.example.com";
    assert_eq!(w.counts().bots[BotState::Alive as usize], 5, "past max_bots, live bots stay");
    let ids: Vec<String> = w.bots[s].keys().cloned().collect();
    w.terminate_bot(s, &ids[0]);
    exact(&w, "a TerminateBot (terminating)");
    assert_eq!(w.counts().bots[BotState::Terminating as usize], 1);
    w.terminate_bot(s, &ids[0]);
    exact(&w, "a second TerminateBot");
    w.advance(t0 + Duration::from_secs(32));
    exact(&w, "a terminated bot");
    assert_eq!(w.counts().bots[BotState::Terminated as usize], 1);
    w.kill_bot(s, &ids[1]);
    exact(&w, "a killed bot (dead)");
    w.delete_bot(s, &ids[1]);
    w.delete_bot(s, &ids[2]);
    w.delete_bot(s, &ids[2]);
    exact(&w, "DeleteBot of a dead and a live bot, twice");
    assert_eq!(w.counts().bots[BotState::Deleted as usize], 2);
    // A new incarnation's bot replaces the dead record of the same id.
    let key = ("p".to_owned(), "us-central1-b".to_owned(), ids[0].clone());
    w.delete("p", "us-central1-b", &ids[0], None).unwrap();
    exact(&w, "a delete past the operations cap");
    w.advance(t0 + Duration::from_secs(60));
    w.insert("p", "us-central1-b", None, &body(&ids[0])).unwrap();
    w.advance(t0 + Duration::from_secs(90));
    exact(&w, "a bot reconnected over its dead record, and the cap dropped dead ones");
    assert!(w.instances.contains_key(&key));
    assert_eq!(w.counts().bots.iter().sum::<u64>(), 3, "past max_bots, the two deleted bots are dropped");
    // Failed operations are counted when DONE.
    w.faults.stockout_zones.insert("us-central1-c".into());
    w.insert("p", "us-central1-c", None, &body("vm-x")).unwrap();
    w.advance(t0 + Duration::from_secs(120));
    exact(&w, "a failed insert");
    assert_eq!(w.counts().failed_operations, 1);
}

#[test]
fn summary_is_exact_at_200000_instances() {
    const N: usize = 200_000;
    let cfg =
        SimConfig { max_operations: 10_000, provision_ms: 1000, stage_ms: 1000, ..SimConfig::default() };
    let (mut w, t0) = world(cfg);
    // Inserted 1000 per simulated 10 ms, so the fleet spans every status when it is full.
    for n in 0..N {
        if n % 1000 == 0 {
            w.advance(at(t0, n as u64 / 100));
        }
        let zone = ["us-central1-a", "us-central1-b", "us-central1-c"][n % 3];
        w.insert("p", zone, None, &body(&format!("vm-{n}"))).unwrap();
    }
    for n in (0..N).step_by(97) {
        let zone = ["us-central1-a", "us-central1-b", "us-central1-c"][n % 3];
        w.delete("p", zone, &format!("vm-{n}"), None).unwrap();
    }
    for n in (1..N).step_by(89) {
        let zone = ["us-central1-a", "us-central1-b", "us-central1-c"][n % 3];
        w.preempt("p", zone, &format!("vm-{n}")).unwrap();
    }
    // Suspended by 2500 (suspend_ms 300), and still suspending then.
    let zone_of = |n: usize| ["us-central1-a", "us-central1-b", "us-central1-c"][n % 3];
    w.advance(at(t0, 2200));
    for n in (3..20_000).step_by(79) {
        let _ = w.suspend("p", zone_of(n), &format!("vm-{n}"), None);
    }
    w.advance(at(t0, 2500));
    for n in (20_003..40_000).step_by(79) {
        let _ = w.suspend("p", zone_of(n), &format!("vm-{n}"), None);
    }
    for n in (2..N).step_by(83) {
        let zone = ["us-central1-a", "us-central1-b", "us-central1-c"][n % 3];
        w.preempt("p", zone, &format!("vm-{n}")).unwrap();
    }
    let s = "s.example.com";
    let ids: Vec<String> = w.bots[s].keys().step_by(10).cloned().collect();
    for (k, id) in ids.iter().enumerate() {
        match k % 3 {
            0 => _ = w.terminate_bot(s, id),
            1 => _ = w.kill_bot(s, id),
            _ => _ = w.delete_bot(s, id),
        }
    }
    w.advance(at(t0, 2501));
    let alive: Vec<String> =
        w.bots[s].iter().filter(|(_, b)| b.dead_at.is_none()).map(|(id, _)| id.clone()).step_by(5).collect();
    for id in &alive {
        w.terminate_bot(s, id);
    }
    let scan = w.scan_counts();
    let summary = crate::admin::Summary::of(&w).json();
    assert_eq!(w.counts(), &scan, "the kept counts are a scan's");
    assert_eq!(summary["instances"]["total"], w.instances.len());
    assert_eq!(summary["instances"]["STOPPING"], scan.instances.by_status[Status::Stopping as usize]);
    assert_eq!(summary["bots"]["terminating"], scan.bots[BotState::Terminating as usize]);
    let by_status = &w.counts().instances.by_status;
    assert!(by_status.iter().all(|&n| n > 0), "every status is there: {by_status:?}");
    assert!(w.counts().instances.deleting > 0);
    assert!(w.counts().bots.iter().all(|&n| n > 0), "every bot state is there: {:?}", w.counts().bots);
    assert_eq!(w.counts().zones.len(), 3);
    w.advance(at(t0, 60_000));
    exact(&w, "everything settled");
    assert_eq!(w.counts().instances.total as usize, w.instances.len());
}

#[test]
fn spot_instances_are_preempted_at_the_rate_asked_and_others_never() {
    let (mut w, t0) = world(SimConfig::default());
    w.faults.spot_preempt_rate = 1.0;
    w.faults.spot_preempt_ms = 1000;
    let mut spot = body("spot-1");
    spot["scheduling"] = json!({"provisioningModel": "SPOT"});
    w.insert("p", "us-central1-b", None, &spot).unwrap();
    w.insert("p", "us-central1-b", None, &body("std-1")).unwrap();
    w.advance(t0 + Duration::from_secs(120));
    let status = |w: &World, name: &str| w.get("p", "us-central1-b", name).unwrap().1.status;
    assert_eq!(status(&w, "spot-1"), Status::Terminated, "preempted");
    assert_eq!(status(&w, "std-1"), Status::Running);
}

#[test]
fn suspended_and_stopped_instances_release_cpus_and_bill_by_status() {
    let cfg = SimConfig {
        provision_ms: 1000,
        stage_ms: 1000,
        suspend_ms: 300,
        resume_ms: 300,
        stop_ms: 500,
        ..SimConfig::default()
    };
    let (mut w, t0) = world(cfg);
    w.insert("p", "us-central1-b", None, &body("vm-1")).unwrap();
    let usage = |w: &World| w.regions("p").into_iter().find(|r| r.name == "us-central1").unwrap().usage;
    w.advance(at(t0, 3000));
    assert_eq!(w.get("p", "us-central1-b", "vm-1").unwrap().1.status, Status::Running);
    assert!((w.billing().running_s - 3.0).abs() < 1e-9, "{:?}", w.billing());
    let err = w.resume("p", "us-central1-b", "vm-1", None).unwrap_err();
    assert_eq!(err.status, 400, "only a suspended instance resumes");
    w.suspend("p", "us-central1-b", "vm-1", None).unwrap();
    w.advance(at(t0, 5000));
    assert_eq!(w.get("p", "us-central1-b", "vm-1").unwrap().1.status, Status::Suspended);
    let b = w.billing();
    assert!((b.running_s - 3.3).abs() < 1e-9 && (b.suspended_s - 1.7).abs() < 1e-9, "{b:?}");
    assert_eq!((usage(&w).cpus, usage(&w).instances), (0.0, 1), "suspended: no CPUs, still an instance");
    exact(&w, "suspended");
    w.stop("p", "us-central1-b", "vm-1", None).unwrap();
    w.advance(at(t0, 6000));
    assert_eq!(w.get("p", "us-central1-b", "vm-1").unwrap().1.status, Status::Terminated);
    assert!((w.billing().stopped_s - 0.5).abs() < 1e-9, "{:?}", w.billing());
    assert_eq!((usage(&w).cpus, usage(&w).instances), (0.0, 1));
    w.start("p", "us-central1-b", "vm-1", None).unwrap();
    assert_eq!(usage(&w).cpus, 2.0, "a started instance holds its CPUs again");
    w.advance(at(t0, 9000));
    assert_eq!(w.get("p", "us-central1-b", "vm-1").unwrap().1.status, Status::Running);
    w.delete("p", "us-central1-b", "vm-1", None).unwrap();
    w.advance(at(t0, 20_000));
    assert_eq!((usage(&w).cpus, usage(&w).instances), (0.0, 0));
    let made = w.operations_made();
    assert_eq!([made["insert"], made["suspend"], made["stop"], made["start"], made["delete"]], [1; 5]);
    exact(&w, "deleted");
}

#[test]
fn usage_and_actions_are_kept_per_config() {
    assert_eq!(crate::names::config_of("ci-linux-3-ab12"), "ci-linux");
    assert_eq!(crate::names::config_of("warm-10-zz99"), "warm");
    assert_eq!(crate::names::config_of("vm-1"), "", "not the service's naming: the others");
    let cfg =
        SimConfig { op_ms: 100, provision_ms: 1000, stage_ms: 1000, suspend_ms: 300, ..SimConfig::default() };
    let (mut w, t0) = world(cfg);
    for name in ["a-0-aaaa", "b-0-bbbb", "b-1-cccc"] {
        w.insert("p", "us-central1-b", None, &body(name)).unwrap();
    }
    w.advance(at(t0, 3000));
    w.suspend("p", "us-central1-b", "b-1-cccc", None).unwrap();
    w.advance(at(t0, 5000));
    w.delete("p", "us-central1-b", "a-0-aaaa", None).unwrap();
    w.advance(at(t0, 20_000));
    let by = w.usage_by_config();
    let (a, b) = (&by["a"], &by["b"]);
    // a: 5 s running, then deleting (STOPPING, billed) until TERMINATED at stop_ms.
    let stop = SimConfig::default().stop_ms as f64 / 1000.0;
    assert!((a.billing.running_s - (5.0 + stop)).abs() < 1e-9, "{a:?}");
    assert!(a.billing.suspended_s == 0.0, "{a:?}");
    // b: b-0 runs 20 s, b-1 runs 3.3 s and is suspended 16.7 s.
    assert!((b.billing.running_s - 23.3).abs() < 1e-9, "{b:?}");
    assert!((b.billing.suspended_s - 16.7).abs() < 1e-9, "{b:?}");
    assert_eq!((a.actions["insert"], a.actions["delete"]), (1, 1));
    assert_eq!((b.actions["insert"], b.actions["suspend"]), (2, 1));
    assert!(!b.actions.contains_key("delete"));
    let all = w.billing();
    let sum = |f: fn(&Billing) -> f64| by.values().map(|c| f(&c.billing)).sum::<f64>();
    assert!((sum(|b| b.running_s) - all.running_s).abs() < 1e-9);
    assert!((sum(|b| b.suspended_s) - all.suspended_s).abs() < 1e-9);
    assert!((sum(|b| b.stopped_s) - all.stopped_s).abs() < 1e-9);
    assert_eq!(w.counts().configs.get("a"), None, "a Config without instances is not counted");
    exact(&w, "per Config");
}

#[test]
fn a_silent_bot_called_dead_was_last_seen_when_it_went_silent() {
    let cfg = SimConfig {
        op_ms: 100,
        provision_ms: 100,
        stage_ms: 100,
        bot_connect_ms: 100,
        suspend_ms: 100,
        bot_death_ms: 1000,
        ..SimConfig::default()
    };
    let (mut w, t0) = world(cfg);
    w.insert("p", "us-central1-b", None, &body("ci-0-aaaa")).unwrap();
    w.advance(at(t0, 1000));
    w.suspend("p", "us-central1-b", "ci-0-aaaa", None).unwrap();
    let silent = w.now_utc();
    w.advance(at(t0, 5000));
    let view = w.bot("s.example.com", "ci-0-aaaa").unwrap();
    assert!(view.bot.dead_at.is_some(), "dead after bot_death_ms");
    assert_eq!(view.last_seen, silent, "last seen when it went silent, not when called dead");
}
