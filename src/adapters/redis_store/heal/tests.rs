//! A rebuild that reads a VM, which is then written before the rebuild writes its entries.

use gce_backend_jobs::model::Vm;
use gce_backend_jobs::ports::store::{Expect, Rebuilt, Store};
use gce_backend_jobs::testing::created;
use gce_backend_queues::testing::RedisServer;
use redis::AsyncCommands;

use super::super::RedisStore;

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

/// A VM's entry goes missing (no sign but the rebuild's own look); the rebuild reads its record;
/// the VM is written (only what changed: its instance's connection) before the rebuild writes; the
/// entry must be there at the end all the same.
#[tokio::test]
async fn a_vm_written_between_the_read_and_the_write_of_a_rebuild_keeps_every_entry() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url(), "t").await.unwrap();
    let mut v = vm();
    assert!(store.put_vm(&v, Expect::Absent).await.unwrap());
    let t = chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap();
    created(t)(&mut v);
    assert!(store.put_vm(&v, Expect::Version(1)).await.unwrap());
    let created = store.k("vm:created");
    let mut c = store.c();
    let _: () = c.srem(&created, "alpha-0").await.unwrap();
    let ids = vec!["alpha-0".to_owned()];
    let read = store.read_chunk(&ids).await.unwrap();
    v.connected = Some(t + chrono::Duration::seconds(30));
    assert!(store.put_vm(&v, Expect::Version(2)).await.unwrap());
    let mut out = Rebuilt::default();
    store.apply_chunk("alpha", &ids, read, &mut out).await.unwrap();
    let member: bool = c.sismember(&created, "alpha-0").await.unwrap();
    assert!(member, "the entry the write did not make, the rebuild did: {out:?}");
}
