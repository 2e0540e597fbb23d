//! Every way of reaching Redis, each against servers the test starts: TLS with a CA the test
//! made (and refused with another CA, or without TLS), a password file rotated while tasks run,
//! IAM-style tokens that expire, a primary behind sentinels that dies and is replaced.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use gce_backend_queues::link::{Link, LinkOptions, TokenSource};
use gce_backend_queues::testing::{Certificates, RedisServer, Sentinels, eventually};
use gce_backend_queues::{Engine, Policy, Queue, QueueSpec, RedisEngine, When};

const LONG: Duration = Duration::from_secs(30);

fn queue(engine: Arc<dyn Engine>) -> Queue {
    Queue::new(engine, QueueSpec::new("jobs", Policy::default()).unwrap())
}

/// Pushes `n` keyed tasks named after `tag` and waits until they are all pending.
async fn push(q: &Queue, tag: &str, n: usize) {
    for i in 0..n {
        let key = format!("{tag}-{i}");
        eventually("a push goes through", LONG, || {
            let (q, key) = (q.clone(), key.clone());
            async move { q.push(&key, &serde_json::json!({ "i": i }), When::Now).await.ok() }
        })
        .await;
    }
}

/// A raw command through `link`.
async fn cmd<T: redis::FromRedisValue>(link: &Link, args: &[&str]) -> redis::RedisResult<T> {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query_async(&mut link.clone()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_checks_the_servers_certificate_against_the_ca_file() {
    let server = RedisServer::start_tls();
    let engine: Arc<dyn Engine> = Arc::new(RedisEngine::connect(&server.url(), "tls").await.unwrap());
    let q = queue(engine);
    push(&q, "k", 3).await;
    assert_eq!(q.counts().await.unwrap().pending, 3);

    // Another CA: the server's certificate is not trusted, and the error says so.
    let other = Certificates::make(&server.dir().join("other"));
    let url = format!("rediss://127.0.0.1:{}/0?ca_file={}", server.port(), other.ca.display());
    let err = Link::open(&url).await.expect_err("a certificate from another CA is refused").to_string();
    assert!(err.contains("certificate") || err.contains("UnknownIssuer"), "{err}");
    assert!(err.starts_with(&format!("--redis rediss://127.0.0.1:{}", server.port())), "{err}");

    // Without TLS the server does not answer as Redis.
    let plain = format!("redis://127.0.0.1:{}/0", server.port());
    let open = tokio::time::timeout(Duration::from_secs(5), Link::open(&plain)).await;
    let refused = match open {
        Err(_) => true,
        Ok(Err(_)) => true,
        Ok(Ok(link)) => cmd::<String>(&link, &["PING"]).await.is_err(),
    };
    assert!(refused, "a plain connection to a TLS port must not work");

    // A CA file that does not exist is a configuration error naming it.
    let missing = format!("rediss://127.0.0.1:{}/0?ca_file=/nonexistent/ca.pem", server.port());
    let err = Link::open(&missing).await.unwrap_err().to_string();
    assert!(err.contains("ca_file /nonexistent/ca.pem"), "{err}");
}

/// Makes ACL user `svc` with `password` only.
async fn acl_user(admin: &Link, password: &str) {
    let rule = format!(">{password}");
    let () =
        cmd(admin, &["ACL", "SETUSER", "svc", "on", "resetpass", &rule, "~*", "&*", "+@all"]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_password_file_is_picked_up_without_a_restart() {
    let server = RedisServer::start();
    let admin = Link::open(&server.url()).await.unwrap();
    acl_user(&admin, "first-secret").await;
    let file = server.dir().join("redis-password");
    std::fs::write(&file, "first-secret\n").unwrap();
    let url = format!("redis://svc@127.0.0.1:{}/0?password_file={}", server.port(), file.display());
    let options = LinkOptions { secret_every: Duration::from_millis(50), ..LinkOptions::default() };
    let link = Link::open_with(&url, options).await.unwrap();
    let whoami: String = cmd(&link, &["ACL", "WHOAMI"]).await.unwrap();
    assert_eq!(whoami, "svc");
    let q = queue(Arc::new(RedisEngine::on(link.clone(), "rotate").unwrap()));
    push(&q, "before", 2).await;

    // The secret is rotated: the file first, then the server, which drops the old connections.
    std::fs::write(&file, "second-secret\n").unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    acl_user(&admin, "second-secret").await;
    let () = cmd(&admin, &["CLIENT", "KILL", "USER", "svc"]).await.map(|_: i64| ()).unwrap();
    push(&q, "after", 2).await;
    assert_eq!(q.counts().await.unwrap().pending, 4);
    let whoami: String = cmd(&link, &["ACL", "WHOAMI"]).await.unwrap();
    assert_eq!(whoami, "svc", "the new connection authenticated as the same user");
}

/// Tokens `tok-1`, `tok-2`, … : the current one until the test moves on.
struct Tokens(AtomicU64);

impl TokenSource for Tokens {
    fn token(
        &self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<String, String>> + Send + '_>> {
        let n = self.0.load(Ordering::SeqCst);
        Box::pin(async move { Ok(format!("tok-{n}")) })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iam_tokens_are_renewed_before_the_old_one_is_refused() {
    let server = RedisServer::start_tls();
    let admin = Link::open(&server.url()).await.unwrap();
    acl_user(&admin, "tok-1").await;
    let tokens = Arc::new(Tokens(AtomicU64::new(1)));
    let options = LinkOptions {
        tokens: Some(tokens.clone()),
        secret_every: Duration::from_millis(50),
        ..LinkOptions::default()
    };
    let url = format!("{}&auth=iam", server.url().replace("rediss://", "rediss://svc@"));
    let link = Link::open_with(&url, options).await.unwrap();
    let q = queue(Arc::new(RedisEngine::on(link, "iam").unwrap()));
    push(&q, "one", 2).await;

    // The next token is issued and accepted; then the old one expires and connections using it
    // are dropped, as Memorystore does.
    tokens.0.store(2, Ordering::SeqCst);
    let rule = ">tok-2";
    let () = cmd(&admin, &["ACL", "SETUSER", "svc", rule]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let () = cmd(&admin, &["ACL", "SETUSER", "svc", "<tok-1"]).await.unwrap();
    let _: i64 = cmd(&admin, &["CLIENT", "KILL", "USER", "svc"]).await.unwrap();
    push(&q, "two", 2).await;
    assert_eq!(q.counts().await.unwrap().pending, 4);

    // IAM without TLS is refused before any connection.
    let err = Link::open("redis://127.0.0.1:6379/0?auth=iam").await.unwrap_err().to_string();
    assert!(err.contains("auth=iam needs TLS"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_behind_sentinels_is_followed_when_it_dies() {
    let mut set = Sentinels::start();
    let link = Link::open(&set.url()).await.unwrap();
    let q = queue(Arc::new(RedisEngine::on(link.clone(), "failover").unwrap()));
    push(&q, "before", 5).await;
    // What the replica acknowledged survives the primary.
    let acked: i64 = cmd(&link, &["WAIT", "1", "5000"]).await.unwrap();
    assert_eq!(acked, 1);
    let first = set.primary_port();

    set.kill_primary();
    assert_ne!(set.primary_port(), first);
    push(&q, "after", 5).await;
    let counts = eventually("counts are read from the new primary", LONG, || {
        let q = q.clone();
        async move { q.counts().await.ok() }
    })
    .await;
    assert_eq!(counts.pending, 10, "{counts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_moved_to_another_primary_mid_run_loses_no_task() {
    use gce_backend_queues::WorkerId;
    use gce_backend_queues::engine::{Ack, Resolution};
    use gce_backend_queues::testing::Cluster;

    let cluster = Cluster::start(3, 0);
    let engine: Arc<dyn Engine> = Arc::new(RedisEngine::connect(&cluster.url(), "reshard").await.unwrap());
    let q = queue(engine.clone());
    push(&q, "first", 100).await;
    // A worker takes and finishes tasks all along, retrying what the move refuses.
    let worker = {
        let (engine, spec) = (engine.clone(), q.spec().clone());
        tokio::spawn(async move {
            let me = WorkerId { group: "g".into(), id: "w".into() };
            let mut done = 0;
            let pause = || tokio::time::sleep(Duration::from_millis(20));
            while done < 200 {
                let Ok(taken) = engine.take(&spec, &me, 5).await else {
                    pause().await;
                    continue;
                };
                let acks: Vec<Ack> = taken
                    .tasks
                    .iter()
                    .map(|l| Ack { id: l.id.clone(), token: l.token.clone(), resolution: Resolution::Done })
                    .collect();
                while engine.finish(&spec, &acks).await.is_err() {
                    pause().await;
                }
                done += acks.len();
                if acks.is_empty() {
                    pause().await;
                }
            }
        })
    };
    let mover = tokio::task::spawn_blocking(move || {
        let slot = cluster.migrate_slot_of("{reshard:jobs}", Duration::from_millis(100));
        (cluster, slot)
    });
    push(&q, "during", 100).await;
    let (_cluster, slot) = mover.await.unwrap();
    tokio::time::timeout(LONG, worker).await.expect("every task is done").unwrap();
    let counts = q.counts().await.unwrap();
    assert_eq!(
        (counts.done, counts.pending, counts.dead, counts.running),
        (200, 0, 0, 0),
        "slot {slot}: {counts:?}"
    );
}
