//! Layout 2's fences: a rebuild that read a VM before a write never writes the older state over
//! it, and a write over a state not known writes every entry and has the sums counted again. And
//! its rate-limit buckets: under their project's tag, listed for `levels`.

use std::time::Duration;

use gce_backend_jobs::model::Vm;
use gce_backend_jobs::ports::buckets::{Buckets, Rate};
use gce_backend_jobs::ports::store::{Expect, Rebuilt, Scope, Store, VmIndex};
use gce_backend_jobs::testing::created;
use gce_backend_queues::testing::RedisServer;
use redis::AsyncCommands;

use super::state_of;
use crate::adapters::redis_store::RedisStore;

fn vm() -> Vm {
    let mut v = Vm {
        id: "alpha-0".into(),
        config: "alpha".into(),
        index: 0,
        hostname: "alpha-0-abcd".into(),
        lifetime: 86_400,
        ..Default::default()
    };
    v.attributes.zone = "za".into();
    v
}

async fn store(server: &RedisServer) -> RedisStore {
    let s = RedisStore::connect(&server.url(), "t").await.unwrap();
    s.migrate(true, Duration::ZERO).await.unwrap();
    s
}

#[tokio::test]
async fn a_rebuild_never_writes_a_state_older_than_the_record() {
    let server = RedisServer::start();
    let s = store(&server).await;
    let mut v = vm();
    assert!(s.put_vm(&v, Expect::Absent).await.unwrap());
    let key = s.kc("alpha", "vm");
    let read: String = s.c().hget(&key, "alpha-0#v").await.unwrap();
    let stale = state_of(&v);
    created(chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap())(&mut v);
    assert!(s.put_vm(&v, Expect::Version(1)).await.unwrap());
    // The rebuild writes the state it computed from what it read: refused, the VM moved on.
    let fixed: usize =
        s.put2[2].key(&key).arg("alpha-0").arg(&read).arg(&stale).invoke_async(&mut s.c()).await.unwrap();
    assert_eq!(fixed, 0);
    let now: String = s.c().hget(&key, "alpha-0#v").await.unwrap();
    assert_eq!(now, format!("2|{}", state_of(&v)));
    let mut out = Rebuilt::default();
    s.v2_rebuild_config("alpha", &mut out).await.unwrap();
    assert!(!out.changed(), "{out:?}");
    assert_eq!(s.vm_ids(VmIndex::Created).await.unwrap(), ["alpha-0"]);
    assert_eq!(s.sums("alpha").await.unwrap().unwrap()[1], 1);
}

#[tokio::test]
async fn a_write_over_a_state_not_known_writes_every_entry_and_the_sums_are_counted_again() {
    let server = RedisServer::start();
    let s = store(&server).await;
    let mut v = vm();
    assert!(s.put_vm(&v, Expect::Absent).await.unwrap());
    // As a migration or a broken write leaves it: the state is not known, an entry is missing.
    let _: () = s.c().hset(s.kc("alpha", "vm"), "alpha-0#v", "1|").await.unwrap();
    let _: () = s.c().srem(s.kc("alpha", "uncreated"), "alpha-0").await.unwrap();
    let _: () = s.c().del(s.kc("alpha", "sums")).await.unwrap();
    v.hostname = "alpha-0-efgh".into();
    assert!(s.put_vm(&v, Expect::Version(1)).await.unwrap());
    assert_eq!(s.vm_ids(VmIndex::Uncreated).await.unwrap(), ["alpha-0"], "every entry written");
    assert_eq!(s.vms_by_hostname(&["alpha-0-efgh".into()]).await.unwrap(), [Some("alpha-0".into())]);
    assert_eq!(s.heal_requests().await.unwrap(), [Scope::Config("alpha".into())], "sums to count again");
    let r = s.rebuild(&Scope::Config("alpha".into())).await.unwrap();
    assert_eq!(r.recounted, ["alpha"], "{r:?}");
    assert_eq!(s.sums("alpha").await.unwrap().unwrap()[0], 1);
    assert!(s.derived_sound("alpha").await.unwrap());
    assert!(s.heal_requests().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_bucket_in_layout_2_is_under_its_projects_tag_and_listed() {
    let server = RedisServer::start();
    let s = RedisStore::connect(&server.url(), "t").await.unwrap();
    let rate = Rate { rate: 1.0, burst: 2 };
    let listed = |levels: Vec<gce_backend_jobs::ports::buckets::Level>| -> Vec<(String, String, f64)> {
        levels.into_iter().map(|l| (l.project, l.class, l.configured)).collect()
    };
    let one = [("proj".to_owned(), "mutate".to_owned(), 1.0)];
    // Layout 1: the take's script lists the bucket itself.
    assert_eq!(s.take("proj/mutate", rate).await.unwrap(), Duration::ZERO);
    assert!(s.c().exists::<_, bool>(s.k("bucket:proj/mutate")).await.unwrap());
    assert_eq!(listed(s.levels().await.unwrap()), one);
    s.migrate(true, Duration::ZERO).await.unwrap();
    let key = "{t:b:proj}:bucket:proj/mutate";
    assert_eq!(s.limit_key(s.key_layout().await.unwrap(), "bucket", "proj/mutate"), key);
    assert!(!s.c().exists::<_, bool>(key).await.unwrap(), "the move starts buckets afresh");
    assert_eq!(s.take("proj/mutate", rate).await.unwrap(), Duration::ZERO);
    assert!(s.c().exists::<_, bool>(key).await.unwrap(), "under the project's own tag");
    s.slow("other/read", rate).await.unwrap();
    assert!(s.c().exists::<_, bool>("{t:b:other}:bucket:other/read").await.unwrap());
    let two = [one[0].clone(), ("other".to_owned(), "read".to_owned(), 1.0)];
    let mut all = listed(s.levels().await.unwrap());
    all.sort_by(|a, b| b.0.cmp(&a.0));
    assert_eq!(all, two);
    // Expired, it is dropped from the list; made again by a take, it is listed again at once,
    // though this process listed its name a moment ago.
    let _: () = s.c().del(key).await.unwrap();
    assert_eq!(listed(s.levels().await.unwrap()).len(), 1);
    assert_eq!(s.take("proj/mutate", rate).await.unwrap(), Duration::ZERO);
    assert_eq!(listed(s.levels().await.unwrap()).len(), 2);
    // A name dropped as expired while a take made its bucket anew is listed back.
    let list = s.k("buckets");
    let name = "proj/mutate".to_owned();
    s.unlist(crate::adapters::redis_store::Layout::Two, &list, &[&name]).await.unwrap();
    assert!(s.c().sismember::<_, _, bool>(&list, &name).await.unwrap());
}
