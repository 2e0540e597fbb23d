//! Redis topologies for tests, made of `redis-server` processes: a primary with a replica
//! watched by three sentinels, and a cluster (`cluster-enabled yes`, made with
//! `redis-cli --cluster create`).

use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tokio::time::Instant;

use super::{RedisServer, free_port, fresh_dir, ping};

/// The master name the sentinels monitor.
const MASTER: &str = "mymaster";

/// A primary and its replica, watched by three sentinels (quorum 2, a primary is down after
/// one second without answers).
#[derive(Debug)]
pub struct Sentinels {
    /// The servers: at first `[primary, replica]`.
    pub servers: Vec<RedisServer>,
    sentinels: Vec<(Child, u16)>,
}

impl Sentinels {
    /// Starts the primary, the replica (waiting until it has synced) and the sentinels (waiting
    /// until each knows both).
    pub fn start() -> Self {
        let primary = RedisServer::start_with(&[]);
        let port = primary.port().to_string();
        let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]);
        until("the replica syncs", || {
            query(replica.port(), &["INFO", "replication"]).contains("master_link_status:up")
        });
        let sentinels = (0..3).map(|_| sentinel(primary.port())).collect();
        let set = Self { servers: vec![primary, replica], sentinels };
        for (_, port) in &set.sentinels {
            until("a sentinel sees the replica", || {
                query(*port, &["SENTINEL", "REPLICAS", MASTER]).contains(&set.servers[1].port().to_string())
            });
        }
        set
    }

    /// `redis+sentinel://…/mymaster/0`.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self.sentinels.iter().map(|(_, p)| format!("127.0.0.1:{p}")).collect();
        format!("redis+sentinel://{}/{MASTER}/0", hosts.join(","))
    }

    /// The port of the primary the sentinels name now.
    pub fn primary_port(&self) -> u16 {
        let answer = query(self.sentinels[0].1, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER]);
        answer.lines().filter_map(|l| l.trim().parse().ok()).next().expect("the sentinels name a primary")
    }

    /// Kills the primary with SIGKILL and waits until the sentinels name the replica instead.
    pub fn kill_primary(&mut self) {
        let old = self.primary_port();
        let server = self.servers.iter_mut().find(|s| s.port() == old).expect("the primary is one of ours");
        server.kill();
        until("the sentinels promote the replica", || self.primary_port() != old);
    }
}

impl Drop for Sentinels {
    fn drop(&mut self) {
        for (child, _) in &mut self.sentinels {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn sentinel(primary: u16) -> (Child, u16) {
    let dir = fresh_dir();
    let port = free_port();
    let conf = dir.join("sentinel.conf");
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind 127.0.0.1\ndir {}\nlogfile sentinel.log\n\
             sentinel monitor {MASTER} 127.0.0.1 {primary} 2\n\
             sentinel down-after-milliseconds {MASTER} 1000\n\
             sentinel failover-timeout {MASTER} 4000\n\
             sentinel parallel-syncs {MASTER} 1\n",
            dir.display()
        ),
    )
    .expect("write the sentinel's configuration");
    let bin = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
    let child = Command::new(bin)
        .arg(&conf)
        .arg("--sentinel")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start a sentinel");
    until("a sentinel answers", || ping(port));
    (child, port)
}

/// A Redis Cluster of `redis-server` processes on loopback.
#[derive(Debug)]
pub struct Cluster {
    /// Its nodes, primaries first.
    pub nodes: Vec<RedisServer>,
}

impl Cluster {
    /// Starts `primaries` primaries with `replicas` replicas each and waits until the cluster
    /// is up.
    pub fn start(primaries: usize, replicas: usize) -> Self {
        let nodes: Vec<RedisServer> = (0..primaries * (1 + replicas))
            .map(|_| {
                RedisServer::start_with(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "2000",
                ])
            })
            .collect();
        let mut cmd = Command::new("redis-cli");
        cmd.arg("--cluster").arg("create");
        for n in &nodes {
            cmd.arg(format!("127.0.0.1:{}", n.port()));
        }
        let out = cmd
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .output()
            .expect("redis-cli (it comes with redis-server)");
        assert!(out.status.success(), "redis-cli --cluster create: {}", String::from_utf8_lossy(&out.stdout));
        for n in &nodes {
            until("the cluster is up", || query(n.port(), &["CLUSTER", "INFO"]).contains("cluster_state:ok"));
        }
        Self { nodes }
    }

    /// `redis+cluster://…` naming every node.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self.nodes.iter().map(|n| format!("127.0.0.1:{}", n.port())).collect();
        format!("redis+cluster://{}", hosts.join(","))
    }

    /// What `redis-cli -p <port> ARGS…` prints, on one node.
    pub fn cli(&self, node: usize, args: &[&str]) -> String {
        query(self.nodes[node].port(), args)
    }

    /// The node (index) that serves `slot`, and its id.
    fn owner(&self, slot: u16) -> (usize, String) {
        for line in self.cli(0, &["CLUSTER", "NODES"]).lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 9 || !f[2].contains("master") {
                continue;
            }
            let serves = f[8..].iter().any(|r| {
                let (lo, hi) = r.split_once('-').unwrap_or((r, r));
                matches!((lo.parse::<u16>(), hi.parse::<u16>()), (Ok(lo), Ok(hi)) if lo <= slot && slot <= hi)
            });
            if serves {
                let port: u16 = f[1]
                    .split('@')
                    .next()
                    .and_then(|a| a.rsplit(':').next())
                    .and_then(|p| p.parse().ok())
                    .unwrap();
                let index = self.nodes.iter().position(|n| n.port() == port).unwrap();
                return (index, f[0].to_owned());
            }
        }
        panic!("no primary serves slot {slot}");
    }

    /// Moves the slot of `key` to another primary the way a resharding does, a few keys at a
    /// time with `pause` between batches (so commands meet the slot half moved: ASK and
    /// TRYAGAIN); returns the slot.
    pub fn migrate_slot_of(&self, key: &str, pause: Duration) -> u16 {
        let slot: u16 = self.cli(0, &["CLUSTER", "KEYSLOT", key]).trim().parse().expect("a slot");
        let (from, from_id) = self.owner(slot);
        let primaries: Vec<usize> =
            (0..self.nodes.len()).filter(|i| self.cli(*i, &["ROLE"]).starts_with("master")).collect();
        let to = *primaries.iter().find(|i| **i != from).expect("another primary");
        let to_id = self.cli(to, &["CLUSTER", "MYID"]).trim().to_owned();
        let s = slot.to_string();
        assert!(self.cli(to, &["CLUSTER", "SETSLOT", &s, "IMPORTING", &from_id]).contains("OK"));
        assert!(self.cli(from, &["CLUSTER", "SETSLOT", &s, "MIGRATING", &to_id]).contains("OK"));
        let to_port = self.nodes[to].port().to_string();
        loop {
            let keys = self.cli(from, &["CLUSTER", "GETKEYSINSLOT", &s, "3"]);
            let keys: Vec<&str> = keys.lines().filter(|k| !k.is_empty()).collect();
            if keys.is_empty() {
                break;
            }
            let mut args = vec!["MIGRATE", "127.0.0.1", to_port.as_str(), "", "0", "5000", "KEYS"];
            args.extend(keys);
            let out = self.cli(from, &args);
            assert!(out.contains("OK") || out.contains("NOKEY"), "MIGRATE: {out}");
            std::thread::sleep(pause);
        }
        for i in 0..self.nodes.len() {
            self.cli(i, &["CLUSTER", "SETSLOT", &s, "NODE", &to_id]);
        }
        slot
    }
}

/// What `redis-cli -p <port> ARGS…` prints (empty when it fails).
fn query(port: u16, args: &[&str]) -> String {
    Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
