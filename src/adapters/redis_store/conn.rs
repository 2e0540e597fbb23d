//! The Redis store itself (its connection, namespace and scripts) and the helpers its `Store`
//! methods share: keys under the deployment's hash tag, error mapping, encoding, versioned reads.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use gce_backend_jobs::model::{ConfigRecord, Undecoded};
use gce_backend_jobs::ports::store::{Expect, Fence, StoreError, Versioned};
use gce_backend_queues::link::Link;
use redis::Script;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::scripts;
use super::scripts::{COUNT_IN, DELETE, DELETE_VM, PUT, PUT_VM, RECOUNT_ZONES, RESOLVE};

/// The Redis store of one deployment.
#[derive(Clone)]
pub struct RedisStore {
    pub(super) conn: Link,
    pub(super) ns: String,
    pub(super) put: std::sync::Arc<[Script; 7]>,
    /// Layout 2's scripts: put and delete a VM, states, reindex, sound (`v2/scripts.rs`).
    pub(super) put2: std::sync::Arc<[Script; 5]>,
    pub(super) layout: std::sync::Arc<super::layout::LayoutCache>,
    /// Prefixes this process has added to `vm:cfgs` (layout 2).
    pub(super) listed: std::sync::Arc<tokio::sync::Mutex<std::collections::HashSet<String>>>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore").field("namespace", &self.ns).finish()
    }
}

pub(super) fn err(e: redis::RedisError) -> StoreError {
    match e.code() {
        Some("WRONGTYPE") => StoreError::corrupt("a key", e),
        _ => StoreError::Unavailable(e.to_string()),
    }
}

/// [`err`], naming the key a WRONGTYPE answer is about.
pub(super) fn err_at(key: &str) -> impl Fn(redis::RedisError) -> StoreError + '_ {
    move |e| match e.code() {
        Some("WRONGTYPE") => StoreError::corrupt(key, "holds the wrong type of value"),
        _ => StoreError::Unavailable(e.to_string()),
    }
}

/// A read of a derived key (`part`, under the deployment's tag) that failed: WRONGTYPE becomes
/// [`StoreError::Healing`], and the key's scope is flagged for a rebuild (best effort: the next
/// heal check finds a shared key of the wrong type by itself).
pub(super) async fn derived(store: &RedisStore, part: &str, e: redis::RedisError) -> StoreError {
    if e.code() != Some("WRONGTYPE") {
        return StoreError::Unavailable(e.to_string());
    }
    let scope = match part.strip_prefix("vm:cfg:").or_else(|| part.strip_prefix("sums:")) {
        Some(prefix) => format!("cfg:{prefix}"),
        None => "*".to_owned(),
    };
    let heal = store.k("heal");
    let flagged: Result<(), _> = redis::pipe().sadd(&heal, &scope).query_async(&mut store.c()).await;
    if let Err(e) = flagged {
        tracing::debug!(key = part, error = %e, "could not flag the key for a rebuild");
    }
    StoreError::Healing { key: part.to_owned() }
}

/// A record or entry as it is stored (where a test build playing a newer one adds its field).
pub(super) fn json<T: Serialize>(v: &T) -> Result<String, StoreError> {
    gce_backend_jobs::unknown::stored(|| serde_json::to_string(v))
        .map_err(|e| StoreError::Unavailable(format!("cannot encode: {e}")))
}

/// A derived record (an observation, counts, a backoff, file errors) that does not decode is
/// as good as absent: it is written again by the next run that learns it.
pub(super) fn lenient<T: DeserializeOwned>(what: &str, s: &str) -> Option<T> {
    serde_json::from_str(s)
        .map_err(|e| tracing::warn!(record = what, error = %e, "corrupt record ignored"))
        .ok()
}

impl RedisStore {
    /// The compare-and-set write of a Config record, fenced by a lease when `fence` is given.
    pub(super) async fn write_config(
        &self,
        rec: &ConfigRecord,
        e: Expect,
        fence: Option<&Fence>,
    ) -> Result<bool, StoreError> {
        let script = if fence.is_some() { &*scripts::PUT_FENCED } else { &self.put[0] };
        let mut call = script.key(self.k("cfg"));
        call.key(self.k("cfg:ver"));
        if let Some(f) = fence {
            call.key(self.k(&format!("claim:{}", f.key)));
        }
        call.arg(&rec.config.prefix).arg(expect(e)).arg(json(rec)?);
        if let Some(f) = fence {
            call.arg(&f.holder);
        }
        let v: u64 = call.invoke_async(&mut self.c()).await.map_err(err)?;
        Ok(v > 0)
    }

    /// Takes or renews (as `script` does) the lease `key` for `holder` for `ttl`.
    pub(super) async fn lease_step(
        &self,
        script: &Script,
        key: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let done: i64 = script
            .key(self.k(&format!("claim:{key}")))
            .arg(holder)
            .arg(ttl.as_millis().max(1) as u64)
            .invoke_async(&mut self.c())
            .await
            .map_err(err)?;
        Ok(done == 1)
    }

    /// Connects to `url` (any `--redis` URL) for deployment `namespace`.
    pub async fn connect(url: &str, namespace: &str) -> Result<Self, StoreError> {
        let link = Link::open(url).await.map_err(|e| StoreError::Unavailable(e.to_string()))?;
        Ok(Self::on(link, namespace))
    }

    /// The store of deployment `namespace` over an open link (shared with the queues).
    pub fn on(conn: Link, namespace: &str) -> Self {
        let put = [
            Script::new(PUT),
            Script::new(DELETE),
            Script::new(PUT_VM),
            Script::new(DELETE_VM),
            Script::new(RESOLVE),
            Script::new(COUNT_IN),
            Script::new(RECOUNT_ZONES),
        ];
        use super::v2::scripts as v2;
        let put2 = [
            Script::new(v2::PUT_VM),
            Script::new(v2::DELETE_VM),
            Script::new(v2::STATES),
            Script::new(v2::REINDEX),
            Script::new(v2::SOUND),
        ];
        Self {
            conn,
            ns: namespace.to_owned(),
            put: std::sync::Arc::new(put),
            put2: std::sync::Arc::new(put2),
            layout: Default::default(),
            listed: Default::default(),
        }
    }

    /// Pushes `value` at the head of the LIST `key` and trims it to its newest `keep` (at least
    /// one), in one MULTI: the error and audit lists.
    pub(super) async fn push_capped(&self, key: &str, value: String, keep: usize) -> Result<(), StoreError> {
        let _: () = redis::pipe()
            .atomic()
            .lpush(key, value)
            .ltrim(key, 0, keep.max(1) as isize - 1)
            .query_async(&mut self.c())
            .await
            .map_err(err)?;
        Ok(())
    }

    /// Runs `cmds` at once, each on keys of one slot (the slots may differ, which a cluster
    /// refuses in one pipeline); the answers in order.
    pub(super) async fn each<T: redis::FromRedisValue>(
        &self,
        cmds: &[redis::Cmd],
    ) -> redis::RedisResult<Vec<T>> {
        futures::future::try_join_all(cmds.iter().map(|c| {
            let mut conn = self.c();
            async move { c.query_async::<T>(&mut conn).await }
        }))
        .await
    }

    /// The fields of a hash (HSCAN: no read holds Redis for long), deduplicated and sorted.
    pub(super) async fn hash_fields(&self, key: &str) -> Result<Vec<String>, StoreError> {
        let mut out = BTreeSet::new();
        let mut cursor: u64 = 0;
        loop {
            let (next, page): (u64, Vec<String>) = redis::cmd("HSCAN")
                .arg(key)
                .arg(cursor)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut self.c())
                .await
                .map_err(err)?;
            out.extend(page.into_iter().step_by(2));
            if next == 0 {
                return Ok(out.into_iter().collect());
            }
            cursor = next;
        }
    }

    pub(super) fn k(&self, part: &str) -> String {
        format!("{{{}:db}}:{part}", self.ns)
    }

    pub(super) fn c(&self) -> Link {
        self.conn.clone()
    }

    /// The keys every layout-1 VM write touches, in the order of the scripts' KEYS; then the
    /// layout key and the heal set.
    pub(super) fn vm_keys(&self, prefix: &str) -> [String; 15] {
        [
            self.k("vm"),
            self.k("vm:ver"),
            self.k("vm:uncreated"),
            self.k("vm:created"),
            self.k("vm:host"),
            self.k("vm:cfgs"),
            self.k(&format!("vm:cfg:{prefix}")),
            self.k("bots"),
            self.k("vm:counted"),
            self.k(&format!("sums:{prefix}")),
            self.k("vm:deadline"),
            self.k("vm:zoned"),
            self.k("vm:idx"),
            self.k("layout"),
            self.k("heal"),
        ]
    }

    /// Every Config record as stored (raw JSON) and every version, read together.
    pub(super) async fn raw_configs(
        &self,
    ) -> Result<(HashMap<String, String>, HashMap<String, u64>), StoreError> {
        redis::pipe()
            .atomic()
            .hgetall(self.k("cfg"))
            .hgetall(self.k("cfg:ver"))
            .query_async(&mut self.c())
            .await
            .map_err(err)
    }

    pub(super) async fn get<T>(
        &self,
        kind: &str,
        field: &str,
        decode: fn(&str) -> Result<T, Undecoded>,
    ) -> Result<Option<Versioned<T>>, StoreError> {
        // Not atomic, and needs not be: the version is read first, so the record is as new as it
        // or newer, and a compare-and-set naming that version fails where the record is newer.
        let (ver, raw): (Option<u64>, Option<String>) = redis::pipe()
            .hget(self.k(&format!("{kind}:ver")), field)
            .hget(self.k(kind), field)
            .query_async(&mut self.c())
            .await
            .map_err(err)?;
        let Some(raw) = raw else { return Ok(None) };
        match decode(&raw) {
            Ok(value) => Ok(ver.map(|version| Versioned { value, version })),
            // Read with its version (0: none), so a repair's compare-and-set names it.
            Err(Undecoded::Corrupt(e)) => {
                Err(StoreError::corrupt_at(format!("{kind} {field}"), e, ver.unwrap_or(0)))
            }
            Err(Undecoded::Newer(format)) => {
                Err(StoreError::Newer { key: format!("{kind} {field}"), format })
            }
        }
    }
}

pub(super) fn expect(e: Expect) -> String {
    match e {
        Expect::Absent => String::new(),
        Expect::Version(v) => v.to_string(),
    }
}

/// The `master_replid` of every server in an `INFO replication` answer (one server's text, or a
/// cluster's map of them), sorted and joined: changes when any of them failed over or restarted.
pub(super) fn replication_ids(info: &redis::Value) -> String {
    fn walk(v: &redis::Value, out: &mut Vec<String>) {
        match v {
            redis::Value::BulkString(b) => text(&String::from_utf8_lossy(b), out),
            redis::Value::VerbatimString { text: t, .. } | redis::Value::SimpleString(t) => text(t, out),
            redis::Value::Map(pairs) => pairs.iter().for_each(|(_, v)| walk(v, out)),
            redis::Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    fn text(t: &str, out: &mut Vec<String>) {
        out.extend(t.lines().filter_map(|l| l.strip_prefix("master_replid:")).map(|id| id.trim().to_owned()));
    }
    let mut ids = Vec::new();
    walk(info, &mut ids);
    ids.sort();
    ids.join(",")
}
