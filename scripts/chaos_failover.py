"""`scripts/chaos --failover sentinel|cluster`: the service on a Redis that fails over. Sentinel:
a primary, a replica and three sentinels; cluster: three primaries with a replica each. Both with
AOF `everysec` (what a managed Redis keeps). During growth, shrink, bulk inserts and lifetime
replacements the primary that holds the store is killed with SIGKILL at least five times (and
started again 4 s later, to come back as a replica), while an operator sets an API Config's
amount with the CLI over and over. Then it waits for convergence and checks:

  lost_acked_writes: amounts the CLI was told were set (exit 0) that the store no longer holds
                     (a later attempt that failed may hold either value);
  leaked, duplicates, dead_tasks: as the normal chaos run counts them (and lost, extra, stuck,
                     stale_bots must be 0 too);
  quarantined:       records taken for corrupt (errors of stage `quarantine`);
  converge_s:        seconds from the last kill to convergence (at most 60).
Last line:
  failover: mode=<m> kills=<n> lost_acked_writes=<n> leaked=<n> duplicates=<n> quarantined=<n> dead_tasks=<n> converge_s=<s>
"""
import hashlib, json, os, secrets, subprocess, time
from pathlib import Path

from chaos_harness import (INVARIANTS, NS, ZONES, HarnessError, Redis, RedisError, config_yaml, free_port,
                           log, settings_text)

MASTER = "mymaster"
API = "ops"  # the Config the operator changes over the API (no prefix of another)


def cli(*args, timeout=30):
    return subprocess.run(["redis-cli", *args], capture_output=True, text=True, timeout=timeout).stdout


class Follow(Redis):
    """A RESP client that follows the primary: `locate()` names its port; a MOVED answer names
    another; a failed call looks again (for up to 20 s)."""

    def __init__(self, locate):
        super().__init__(locate() or 0)
        self.locate = locate

    def __call__(self, *args):
        end = time.monotonic() + 20
        while True:
            try:
                return super().__call__(*args)
            except RedisError as e:
                msg = str(e)
                if msg.startswith(("MOVED", "ASK")):
                    self.close()
                    self.port = int(msg.split()[2].rsplit(":", 1)[1])
                    continue
                if not msg.startswith(("READONLY", "TRYAGAIN", "CLUSTERDOWN", "LOADING", "MASTERDOWN")):
                    raise
            except (OSError, ConnectionError):
                pass
            if time.monotonic() > end:
                raise ConnectionError(f"no primary answered {args[0]} within 20s")
            self.close()
            time.sleep(0.25)
            self.port = self.locate() or self.port


class Topology:
    """The Redis servers of one mode, as processes of the harness (`redis-0`, …)."""

    def __init__(self, h, mode):
        self.h, self.mode, self.ports, self.sentinels = h, mode, {}, []
        n = 2 if mode == "sentinel" else 6
        for i in range(n):
            port = free_port()
            while mode == "cluster" and port > 55000:  # its cluster bus listens on port + 10000
                port = free_port()
            self.ports[f"redis-{i}"] = port
        for name in self.ports:
            (h.tmp / name).mkdir()
            self.start(name, replica_of=self.ports["redis-0"] if mode == "sentinel" and name != "redis-0" else None)
        if mode == "cluster":
            out = subprocess.run(["redis-cli", "--cluster", "create", *[f"127.0.0.1:{p}" for p in self.ports.values()],
                                  "--cluster-replicas", "1", "--cluster-yes"], capture_output=True, text=True)
            if out.returncode:
                raise RuntimeError(f"redis-cli --cluster create: {out.stdout[-500:]}")
            self.until("the cluster is up", lambda: all("cluster_state:ok" in cli("-p", str(p), "cluster", "info")
                                                         for p in self.ports.values()))
            self.until("every primary has a replica in sync", lambda: sum(
                "state=online" in cli("-p", str(p), "info", "replication") for p in self.ports.values()) == 3)
            # Operator writes wait for a replica, as behind sentinels (where it is the default).
            self.url = "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports.values()) + "?replicas=1"
        else:
            self.until("the replica syncs", lambda: "master_link_status:up" in
                       cli("-p", str(self.ports["redis-1"]), "info", "replication"))
            for i in range(3):
                self.sentinel(i)
            self.url = "redis+sentinel://" + ",".join(f"127.0.0.1:{p}" for _, p in self.sentinels) + f"/{MASTER}"
            self.until("the sentinels see the replica", lambda: all(
                str(self.ports["redis-1"]) in cli("-p", str(p), "sentinel", "replicas", MASTER) for _, p in self.sentinels))

    def start(self, name, replica_of=None):
        args = ["redis-server", "--port", str(self.ports[name]), "--bind", "127.0.0.1", "--dir", str(self.h.tmp / name),
                "--appendonly", "yes", "--appendfsync", "everysec", "--save", "", "--logfile", "redis.log"]
        if self.mode == "cluster":
            args += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000"]
        elif replica_of:
            args += ["--replicaof", "127.0.0.1", str(replica_of)]
        self.h.spawn(name, args)
        self.until(f"{name} answers", lambda: cli("-p", str(self.ports[name]), "ping").strip() in ("PONG", "LOADING"))

    def sentinel(self, i):
        port = free_port()
        d = self.h.tmp / f"sentinel-{i}"
        d.mkdir()
        (d / "sentinel.conf").write_text(
            f"port {port}\nbind 127.0.0.1\ndir {d}\nlogfile sentinel.log\n"
            f"sentinel monitor {MASTER} 127.0.0.1 {self.ports['redis-0']} 2\n"
            f"sentinel down-after-milliseconds {MASTER} 1000\nsentinel failover-timeout {MASTER} 4000\n")
        self.h.spawn(f"sentinel-{i}", ["redis-server", str(d / "sentinel.conf"), "--sentinel"])
        self.sentinels.append((f"sentinel-{i}", port))
        self.until("a sentinel answers", lambda: cli("-p", str(port), "ping").strip() == "PONG")

    def until(self, what, done, timeout=60):
        end = time.monotonic() + timeout
        while not done():
            if time.monotonic() > end:
                raise RuntimeError(f"timed out waiting until {what}")
            time.sleep(0.2)

    def primary(self):
        """The port of the primary that holds the store (`{<ns>:db}`), or None while unknown."""
        if self.mode == "sentinel":
            for _, p in self.sentinels:
                out = cli("-p", str(p), "sentinel", "get-master-addr-by-name", MASTER).split()
                if len(out) == 2 and out[1].isdigit():
                    return int(out[1])
            return None
        for name, port in self.ports.items():
            if not self.h.alive(name):
                continue
            slot = cli("-p", str(port), "cluster", "keyslot", f"{{{NS}:db}}").strip()
            if not slot.isdigit():
                continue
            for line in cli("-p", str(port), "cluster", "nodes").splitlines():
                f = line.split()
                if len(f) < 9 or "master" not in f[2] or "fail" in f[2]:
                    continue
                for r in f[8:]:
                    lo, _, hi = r.partition("-")
                    if lo.isdigit() and int(lo) <= int(slot) <= int(hi or lo):
                        return int(f[1].split("@")[0].rsplit(":", 1)[1])
        return None

    def kill_primary(self):
        """Kills the store's primary with SIGKILL once a replica is in sync with it (a failover
        can only promote one); returns its name."""
        self.until("the store's primary has a replica in sync", lambda: "state=online" in
                   cli("-p", str(self.primary() or 0), "info", "replication"))
        port = self.primary()
        name = next(n for n, p in self.ports.items() if p == port)
        self.h.kill9(name)
        return name

    def promoted(self, dead):
        """Whether another primary serves the store now."""
        port = self.primary()
        return port is not None and port != self.ports[dead] and cli("-p", str(port), "ping").strip() == "PONG"


def setup(h, binary, mode):
    """The topology, the simulator (no injected faults: the failovers are the chaos), the
    settings, and an API process with an admin token for the operator's CLI."""
    h.binary(binary)
    (h.tmp / "pools").mkdir()
    h.sport = free_port()
    h.sim = f"http://127.0.0.1:{h.sport}"
    h.topo = Topology(h, mode)
    h.url = h.topo.url
    h.spawn("sim", [str(h.bin), "sim", "--listen", f"127.0.0.1:{h.sport}", "--seed", str(h.args.seed), "--quota", "none",
                    "--op-ms", "200", "--provision-ms", "100", "--stage-ms", "100", "--bot-connect-ms", "200",
                    "--bot-idle-ms", "500", "--bot-task-ms", "2000"])
    h.r = Follow(h.topo.primary)
    h.topo.until("the simulator answers", lambda: h.get("/sim/calls") is not None)
    settings = settings_text(h.args.concurrency)
    (h.tmp / "service.toml").write_text(settings)
    h.deployment = "gce-backend"
    h.token = "gbt_" + secrets.token_hex(24)
    (h.tmp / "tokens.toml").write_text(f'[[token]]\nname = "chaos"\nsha256 = "{hashlib.sha256(h.token.encode()).hexdigest()}"\n'
                                       'role = "admin"\ngroups = []\n')
    h.api = f"http://127.0.0.1:{free_port()}"
    h.move_layout()
    log(f"{mode}: {h.url}, simulator on {h.sim}, API on {h.api}, temp dir {h.tmp}, key layout {h.layout}")


def start_api(h):
    port = h.api.rsplit(":", 1)[1]
    h.spawn("api", [str(h.bin), "run", "--role", "api", "--redis", h.url, "--namespace", NS, "--gce-endpoint", h.sim,
                    "--configs", str(h.tmp / "pools"), "--settings", str(h.tmp / "service.toml"), "--quiet",
                    "--listen", f"127.0.0.1:{port}", "--root-url", h.api, "--tokens", str(h.tmp / "tokens.toml")])


def operator(h, *args):
    """The operator's CLI over the API: (exit code, what it printed)."""
    env = dict(os.environ, GCE_BACKEND_ROOT_URL=h.api, GCE_BACKEND_TOKEN=h.token)
    try:
        out = subprocess.run([str(h.bin), *args], capture_output=True, text=True, env=env, timeout=30)
        return out.returncode, (out.stdout + out.stderr).strip()
    except subprocess.TimeoutExpired:
        return 124, "timed out"


class Writes:
    """The operator's amounts for the API Config: acked (the CLI said it was set) and those tried
    since (failed: the store may hold any of them)."""

    def __init__(self, h):
        self.h, self.acked, self.tried, self.lost, self.ok, self.failed = h, None, set(), 0, 0, 0

    def set(self, n):
        code, out = operator(self.h, "configs", "amount", API, str(n))
        if code == 0:
            self.acked, self.tried = n, set()
            self.ok += 1
        else:
            self.tried.add(n)
            self.failed += 1
            self.last_error = out[-300:]
        return code == 0

    def settle(self, n, within=60):
        """Sets `n` until it is acknowledged (HarnessError after `within` seconds)."""
        end = time.monotonic() + within
        while not self.set(n):
            if time.monotonic() > end:
                raise HarnessError(f"`configs amount {API} {n}` not acknowledged within {within}s: {self.last_error}")
            time.sleep(1)

    def check(self):
        """Counts a lost acknowledged write when the store holds neither the acked amount nor
        one tried since; False when the store could not be read."""
        if self.acked is None:
            return True
        try:
            raw = self.h.r("HGET", f"{{{NS}:db}}:cfg", API)
        except (OSError, ConnectionError, RedisError):
            return False
        held = json.loads(raw).get("current_amount") if raw else None
        if held != self.acked and held not in self.tried:
            self.lost += 1
            log(f"LOST ACKED WRITE: {API} amount {self.acked} was acknowledged, the store holds {held}")
            self.acked = held  # counted once
        return True


def quarantined(h):
    n = 0
    for key in h.r("KEYS", f"{{{NS}:db}}:err:*") or []:
        for raw in h.r("LRANGE", key, 0, -1) or []:
            try:
                n += json.loads(raw).get("stage") == "quarantine"
            except ValueError:
                pass
    return n


def failover(h, a, binary):
    """The --failover run; its exit code."""
    setup(h, binary, a.failover)
    prefixes = ["pool-a", "pool-b", "pool-c"]
    for p in prefixes:
        h.write_config(p, 10, lifetime="40s")
    zone = ZONES[0]
    (h.tmp / f"{API}.yaml").write_text(config_yaml(API, 8, zone, low=0, lifetime="40s"))
    h.start_service()
    start_api(h)
    h.topo.until("the API answers", lambda: operator(h, "configs", "list")[0] == 0)
    end = time.monotonic() + 60
    while (answer := operator(h, "configs", "apply", "-f", str(h.tmp / f"{API}.yaml")))[0]:
        if time.monotonic() > end:
            raise HarnessError(f"configs apply {API}: {answer[1][-400:]}")
        time.sleep(1)
    writes = Writes(h)
    writes.settle(3)
    h.amounts[API] = 3
    t = h.wait_converged(180)
    log(f"initial convergence: {'%.1fs' % t if t is not None else 'NOT REACHED'}")
    S = a.seconds
    kills = [S * (0.1 + 0.17 * k) for k in range(5)]
    changes = {S * 0.05: ("pool-a", 30), S * 0.3: ("pool-b", 25), S * 0.5: ("pool-a", 15), S * 0.7: ("pool-c", 20)}
    start, restarts, last_kill, amounts, k = time.monotonic(), [], None, [4, 6, 5, 2], 0
    while (now := time.monotonic() - start) < S or kills:  # every kill happens, however long they wait
        for when in [w for w in list(changes) if w <= now]:
            p, n = changes.pop(when)
            h.write_config(p, n, lifetime="40s")
            log(f"{p}: amount -> {n}")
        for item in [r for r in restarts if r[0] <= now]:
            restarts.remove(item)
            h.topo.start(item[1])
            log(f"{item[1]} started again")
        if kills and kills[0] <= now:
            kills.pop(0)
            name = h.topo.kill_primary()
            last_kill = time.monotonic()
            log(f"kill -9 {name} (the store's primary)")
            h.topo.until("another primary serves the store", lambda: h.topo.promoted(name))
            log(f"  promoted after {time.monotonic() - last_kill:.1f}s")
            restarts.append((now + 4, name))
        writes.set(amounts[k % len(amounts)])
        k += 1
        writes.check()
        time.sleep(0.5)
    for _, name in restarts:
        h.topo.start(name)
    writes.settle(4)
    h.amounts[API] = 4
    writes.check()
    log(f"chaos over: {h.kills} kills, operator writes acked={writes.ok} refused={writes.failed}; measuring convergence")
    conv = h.wait_converged(120)
    conv = None if conv is None else time.monotonic() - last_kill
    inv = h.invariants() or dict.fromkeys(INVARIANTS, -1)
    q = quarantined(h)
    ok = (h.kills >= 5 and conv is not None and conv <= 60 and writes.lost == 0 and q == 0
          and not any(inv[k] for k in INVARIANTS))
    if not ok:
        h.log_digest()
    print(f"failover: mode={a.failover} kills={h.kills} lost_acked_writes={writes.lost} leaked={inv['leaked']} "
          f"duplicates={inv['duplicates']} quarantined={q} dead_tasks={inv['dead_tasks']} "
          f"converge_s={'%.1f' % conv if conv is not None else 'none'}", flush=True)
    return 0 if ok else 1
