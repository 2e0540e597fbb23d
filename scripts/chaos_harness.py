"""Harness of scripts/chaos: Redis (AOF), the simulator, the service processes, Config files and
the invariant checks (imported by scripts/chaos; not run by itself)."""
import argparse, ctypes, json, os, random, re, shutil, signal, socket, subprocess, sys, tempfile, time
import tomllib, traceback, urllib.error, urllib.request
from collections import Counter
from pathlib import Path

from chaos_judge import HarnessError, judge_pool, parse_json, run_checked, wanted_indexes  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent
NS, PROJECT, SWARM = "chaos", "chaos-proj", "https://swarm.example.com"
# What `Harness.invariants` counts, each of which must be 0 at the end of a run.
INVARIANTS = ("leaked", "duplicates", "lost", "extra", "stuck", "stale_bots", "dead_tasks")
# The Swarming servers the settings allow: the good one, and the two --bad-input makes hang and
# answer malformed JSON (an unlisted server would be refused before any call, testing nothing).
SERVERS = [SWARM, "https://hang.example.com", "https://malformed.example.com"]
ZONES = ["us-central1-a", "us-central1-b", "us-central1-c", "us-east1-b", "europe-west1-b"]
FAULTS = {"errors": {"*": {"rate": 0.05, "status": 503}, "compute.instances.get": {"rate": 0.05, "status": 429},
                     "swarming.GetBot": {"rate": 0.05, "status": 429}}}
# --quota none: the chaos run's faults are the ones below; Compute's per-minute API quotas (the
# simulator's default) would add refusals the convergence timeouts were not measured with.
SIM_FLAGS = ["--quota", "none", "--op-ms", "200", "--provision-ms", "100", "--stage-ms", "100", "--bot-connect-ms", "200",
             "--bot-death-ms", "500", "--bot-task-ms", "2000", "--bot-idle-ms", "500"]
CRON = {"import_configs": "1s", "inspect_instances": "1s", "count_vms": "1s"}  # every other job: 2s
TIMING = {"watch": "1s", "bot_grace": "5s", "observation_ttl": "3s", "leak_grace": "5s", "stale_bot_grace": "5s",
          "backoff_base": "1s", "backoff_cap": "5s", "config_delete_grace": "5s", "sweep": "20s"}
# Log lines the bad-input digest leaves out: what the 5 % faults and the measurements' preemptions cause.
NOISE = re.compile(r"replacing it now|Internal error|rate limit|Rate Limit|unavailable|bot dead|Config orphaned|"
                   r"Config deleted|Memory overcommit")
T0 = time.monotonic()
try:
    _LIBC = ctypes.CDLL(None, use_errno=True)
except OSError:
    _LIBC = None


def log(msg):
    print(f"[{time.monotonic() - T0:6.1f}s] {msg}", flush=True)


class HardLimit(Exception):
    pass


def _die_with_parent():  # runs in the child: SIGKILL it if this script dies (even by SIGKILL)
    if _LIBC is not None:
        _LIBC.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisError(Exception):
    pass


class Redis:
    """A minimal RESP client (reads and idempotent writes; reconnects once per call)."""

    def __init__(self, port):
        self.port, self.sock = port, None

    def close(self):
        if self.sock:
            self.sock.close()
        self.sock = None

    def __call__(self, *args):
        for attempt in (0, 1):
            try:
                if self.sock is None:
                    self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
                    self.f = self.sock.makefile("rb")
                out = [b"*%d\r\n" % len(args)]
                for a in args:
                    a = a if isinstance(a, bytes) else str(a).encode()
                    out += [b"$%d\r\n" % len(a), a, b"\r\n"]
                self.sock.sendall(b"".join(out))
                reply = self._read()
                break
            except (OSError, ConnectionError):
                self.close()
                if attempt:
                    raise
        if isinstance(reply, RedisError):
            raise reply
        return reply

    def _read(self):
        line = self.f.readline()
        if not line:
            raise ConnectionError("redis closed the connection")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return RedisError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.f.read(n + 2)[:-2].decode("utf-8", "replace")
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._read() for _ in range(n)]
        raise ConnectionError(f"bad RESP reply {line!r}")

    def hgetall(self, key):
        flat = self("HGETALL", key) or []
        return dict(zip(flat[::2], flat[1::2]))

    def now_ms(self):
        s, us = self("TIME")
        return int(s) * 1000 + int(us) // 1000


def config_yaml(prefix, amount, zone, swarming=SWARM, extra="", lifetime="1d", low=None):
    # Spot VMs: the harness preempts instances, which for standard VMs would rightly count as VMs
    # dying soon after connecting (and open the Config's breaker after five in a row).
    return (f"prefix: {prefix}\namount: {{min: {amount if low is None else low}, max: {amount}}}\n"
            f"attributes:\n  project: {PROJECT}\n"
            f"  zone: {zone}\n  machine_type: \"zones/{{{{.Zone}}}}/machineTypes/e2-small\"\n"
            f"  provisioning_model: SPOT\n  instance_termination_action: STOP\n"
            f"  disk: [{{image: projects/debian-cloud/global/images/debian-12, size: 10}}]\n"
            f"  network_interface: [{{network: global/networks/default}}]\n{extra}"
            f"lifetime: {lifetime}\ntimeout: 20s\nswarming: {swarming}\n"
            # The chaos kills bots, which rightly counts as VMs dying soon after connecting: the
            # breaker may open; its canary comes after 5 s rather than a minute.
            f"breaker: {{after: 5, within: 10m, canary_after: 5s}}\n")


def settings_text(concurrency):
    out, section = [], ""
    for line in (ROOT / "config/service.toml").read_text().splitlines():
        m = re.match(r"\[(.*)\]", line)
        section = m.group(1) if m else section
        kv = re.match(r"(\w+)\s*=", line)
        if kv and section == "cron":
            line = f'{kv.group(1)} = "{CRON.get(kv.group(1), "2s")}"'
        elif kv and section == "timing" and kv.group(1) in TIMING:
            line = f'{kv.group(1)} = "{TIMING[kv.group(1)]}"'
        elif kv and section == "" and kv.group(1) == "concurrency":
            line = f"concurrency = {concurrency}"
        elif kv and section == "swarming" and kv.group(1) == "servers":
            line = f"servers = {json.dumps(SERVERS)}"  # --bad-input's broken servers are listed
        out.append(line)
    return "\n".join(out) + "\n"


class Harness:
    """The processes of one run, their temp dir and the Config files."""

    def __init__(self, args):
        self.args, self.ns = args, NS
        self.layout = getattr(args, "layout", 1)  # the store's key layout (--layout)
        self.tmp = Path(tempfile.mkdtemp(prefix="gce-chaos-"))
        self.procs, self.frozen, self.kills, self.amounts = {}, set(), 0, {}
        self.results, self.gone = {}, []  # --bad-input: case -> ok|FAIL; prefixes whose file was removed

    def binary(self, src):
        self.bin = self.tmp / "gce-backend"  # a copy: a rebuild during the run does not mix versions
        shutil.copy2(src, self.bin)

    def spawn(self, name, argv, env=None):
        if name in self.procs and self.procs[name].poll() is None:
            return self.procs[name]  # still running: never two processes under one name
        logf = open(self.tmp / f"{name}.log", "ab")
        p = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, env=env,
                             start_new_session=True, preexec_fn=_die_with_parent)
        logf.close()
        self.procs[name] = p
        return p

    def setup(self, binary):
        self.binary(binary)
        (self.tmp / "redis").mkdir()
        (self.tmp / "pools").mkdir()
        self.rport, self.sport = free_port(), free_port()
        self.url, self.sim = f"redis://127.0.0.1:{self.rport}/0", f"http://127.0.0.1:{self.sport}"
        self.start_redis()
        self.spawn("sim", [str(self.bin), "sim", "--listen", f"127.0.0.1:{self.sport}", "--seed",
                           str(self.args.seed), *SIM_FLAGS, "--faults", json.dumps(FAULTS)])
        self.r = Redis(self.rport)
        self.wait_up()
        settings = settings_text(self.args.concurrency)
        (self.tmp / "service.toml").write_text(settings)
        self.deployment = tomllib.loads(settings)["deployment"]
        self.move_layout()
        log(f"redis on {self.url} (AOF), simulator on {self.sim}, temp dir {self.tmp}, key layout {self.layout}")

    # --- the store's keys, in its layout (src/adapters/redis_store/layout.rs) ---
    def move_layout(self):
        """With --layout 2, moves the (empty) store to key layout 2 before the service starts."""
        if self.layout == 2:
            log(f"store moved to key layout 2: {self.cli('migrate', '--apply')}")

    def vm_key(self, prefix):
        """The hash that holds Config `prefix`'s VM records."""
        return f"{{{NS}:c:{prefix}}}:vm" if self.layout == 2 else f"{{{NS}:db}}:vm"

    def vm_fields(self, vm_id):
        """The fields of a VM in its hash: its record, and in layout 2 its version beside it."""
        return [vm_id, f"{vm_id}#v"] if self.layout == 2 else [vm_id]

    def index_key(self, prefix, which):
        """A derived key of Config `prefix`: `ids` (its VMs; layout 2: those with an instance) or
        `deadline` (the shared deadline index; layout 2: the Config's)."""
        if self.layout == 2:
            return f"{{{NS}:c:{prefix}}}:" + ("created" if which == "ids" else "deadline")
        return f"{{{NS}:db}}:" + (f"vm:cfg:{prefix}" if which == "ids" else "vm:deadline")

    def vm_records(self):
        """Every VM record as stored, by id."""
        if self.layout != 2:
            return self.r.hgetall(f"{{{NS}:db}}:vm")
        out = {}
        for p in set(self.r("SMEMBERS", f"{{{NS}:db}}:vm:cfgs") or []):
            out.update({k: v for k, v in self.r.hgetall(self.vm_key(p)).items() if not k.endswith("#v")})
        return out

    def start_redis(self):
        self.spawn("redis", ["redis-server", "--port", str(self.rport), "--bind", "127.0.0.1", "--dir",
                             str(self.tmp / "redis"), "--appendonly", "yes", "--appendfsync", "always",
                             "--save", "", "--logfile", str(self.tmp / "redis-server.log")])

    def wait_up(self, timeout=30):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            ok = subprocess.run(["redis-cli", "-p", str(self.rport), "ping"], capture_output=True, text=True)
            if ok.stdout.strip() == "PONG" and self.get("/sim/calls") is not None:
                return
            time.sleep(0.2)
        raise RuntimeError("redis-server or the simulator did not come up (see their logs)")

    def start_run(self, name, binary=None, env=None):
        """`gce-backend run` as `name` (role cron for "cron", else workers), of `binary` (default:
        the run's) with `env` (default: this process's)."""
        role = "cron" if name == "cron" else "workers"
        self.spawn(name, [str(binary or self.bin), "run", "--role", role, "--redis", self.url, "--namespace", NS,
                          "--gce-endpoint", self.sim, "--configs", str(self.tmp / "pools"), "--settings",
                          str(self.tmp / "service.toml"), "--quiet"], env)

    def start_service(self):
        for name in ("worker-1", "worker-2", "worker-3", "cron"):
            self.start_run(name)

    def kill9(self, name):
        p = self.procs[name]
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=10)
            self.kills += 1

    def alive(self, name):
        p = self.procs[name]
        try:
            os.kill(p.pid, 0)  # kill -0; poll() also sees a child that exited (a zombie passes kill -0)
        except ProcessLookupError:
            return False
        return p.poll() is None

    def cleanup(self):
        for name, p in reversed(list(self.procs.items())):
            if p.poll() is None:
                for sig in (signal.SIGCONT, signal.SIGKILL):
                    try:
                        os.kill(p.pid, sig)
                    except ProcessLookupError:
                        pass
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    log(f"{name} (pid {p.pid}) did not exit after SIGKILL")
        if self.args.keep_logs:
            dest = Path(self.args.keep_logs)
            dest.mkdir(parents=True, exist_ok=True)
            for f in self.tmp.glob("*.log"):
                shutil.copy2(f, dest / f.name)
            log(f"logs copied to {dest}")
        shutil.rmtree(self.tmp, ignore_errors=True)

    # --- HTTP to the simulator ---
    def get(self, path):
        try:
            with urllib.request.urlopen(self.sim + path, timeout=30) as r:
                return json.load(r)
        except (OSError, ValueError):
            return None

    def post(self, path, body, method="POST"):
        """(status, answer) of `method path` with the JSON `body` on the simulator (0 and the
        error when it got no answer; the answer parsed when it is JSON)."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.sim + path, data, {"content-type": "application/json"}, method=method)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                text = r.read().decode(errors="replace")
                try:
                    return r.status, json.loads(text)
                except ValueError:
                    return r.status, text
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")
        except OSError as e:
            return 0, str(e)

    def checked(self, path, body, ok=(200,), method="POST"):
        """`post`, with HarnessError unless the status is one of `ok`; the status."""
        code, got = self.post(path, body, method)
        if code not in ok:
            raise HarnessError(f"{method} {path} {json.dumps(body)[:200]} answered {code}: {str(got)[:300]}")
        return code

    def fault(self, body):
        """The simulator's faults set to `body` (POST /sim/faults)."""
        return self.checked("/sim/faults", body)

    def act(self, path, body):
        """A fault on one thing (/sim/preempt, /sim/kill-bot): 404 is a race the chaos allows
        (the instance or bot went meanwhile)."""
        return self.checked(path, body, ok=(200, 404))

    def cli(self, *args):
        """`gce-backend recover --redis … --namespace <ns> <args>` (Redis directly: `status`,
        `queues …`): its output parsed as JSON. Exit non-zero or output that is not JSON:
        HarnessError with the command and what it printed."""
        argv = [str(self.bin), "recover", "--redis", self.url, "--namespace", self.ns, *args]
        shown = ["gce-backend", "recover", *args]
        return parse_json(run_checked(argv, shown).stdout, " ".join(shown))

    # --- Config files ---
    def write_config(self, prefix, amount, swarming=SWARM, extra="", lifetime="1d"):
        zone = ZONES[(ord(prefix[-1]) - ord("a")) % len(ZONES)]
        path = self.tmp / "pools" / f"{prefix}.yaml"
        part = path.with_suffix(".part")  # written aside, renamed: the import never reads half a file
        part.write_text(config_yaml(prefix, amount, zone, swarming, extra, lifetime))
        part.rename(path)
        self.amounts[prefix] = amount

    def remove_config(self, prefix):
        (self.tmp / "pools" / f"{prefix}.yaml").unlink(missing_ok=True)
        self.amounts.pop(prefix, None)

    # --- observing ---
    def snapshot(self):
        """Sim state, VM records (corrupt ones apart), Config record prefixes; None if unreadable."""
        st = self.get("/sim/state")
        try:
            raw, cfg_raw = self.vm_records(), self.r.hgetall(f"{{{NS}:db}}:cfg")
        except (OSError, ConnectionError, RedisError):
            return None
        if st is None:
            return None
        vms, corrupt = {}, set()
        for k, v in raw.items():
            try:
                vm = json.loads(v)
            except ValueError:
                vm = None
            if isinstance(vm, dict) and isinstance(vm.get("hostname"), str):
                vms[k] = vm
            else:
                corrupt.add(k)
        inst = {}
        for i in st["instances"]:
            inst.setdefault(i["name"], []).append(i)
        bots = {b["botId"]: b for b in st["bots"] if not b.get("deleted")}
        let_go = {}  # prefix -> indexes its record lets go (None: the record does not decode)
        for k, v in cfg_raw.items():
            try:
                rec = json.loads(v)
                let_go[k] = [int(i) for i in rec.get("let_go", [])]
            except (ValueError, TypeError, AttributeError):
                let_go[k] = None
        return {"st": st, "vms": vms, "corrupt": corrupt, "cfgs": set(cfg_raw), "let_go": let_go, "inst": inst,
                "bots": bots}

    def vm_ok(self, s, vm):
        """The VM has a RUNNING instance named by its hostname and a connected live bot."""
        live = [i for i in s["inst"].get(vm["hostname"], []) if not i.get("deleting")]
        bot = s["bots"].get(vm["hostname"])
        return (any(i["status"] == "RUNNING" for i in live) and bool(vm.get("connected"))
                and bot is not None and not bot.get("isDead"))

    def pool_state(self, s, prefix, amount):
        """(converged, short description) of one present Config: judge_pool on the snapshot `s`."""
        recs = {k: v for k, v in s["vms"].items() if v.get("config") == prefix}
        bad = {k for k in s["corrupt"] if re.fullmatch(re.escape(prefix) + r"-\d+", k)}
        return judge_pool(prefix, amount, recs, bad, s["let_go"].get(prefix, []), lambda v: self.vm_ok(s, v))[:2]

    def gone_state(self, s, prefix):
        vms = [k for k, v in s["vms"].items() if v.get("config") == prefix]
        inst = [i for l in s["inst"].values() for i in l if i["labels"].get("gce-backend-config") == prefix]
        ok = not vms and not inst and prefix not in s["cfgs"]
        return ok, f"{prefix} gone" if ok else f"{prefix} deleting(vms={len(vms)} inst={len(inst)})"

    def converged(self, s, only=None, gone=()):
        if s is None:
            return False, "state unreadable"
        parts = [self.pool_state(s, p, a) for p, a in sorted(self.amounts.items()) if only is None or p in only]
        parts += [self.gone_state(s, p) for p in gone]
        return all(ok for ok, _ in parts), " ".join(d for _, d in parts)

    def wait_converged(self, timeout, only=None, gone=(), quiet=False, every=0.5):
        start, last, desc = time.monotonic(), 0.0, ""
        while time.monotonic() - start < timeout:
            ok, desc = self.converged(self.snapshot(), only, gone)
            if ok:
                return time.monotonic() - start
            if not quiet and time.monotonic() - last > 10:
                last = time.monotonic()
                log(f"  waiting: {desc}")
            time.sleep(every)
        log(f"  not converged after {timeout:.0f}s: {desc}")
        return None

    def dead_tasks(self, qs=None):
        """Tasks in the dead sets of every queue (of `qs`, counts already read)."""
        return sum(c.get("dead", 0) for c in (qs or self.queues()).values())

    def queues(self):
        """Every queue's counts (`recover queues list`); HarnessError when it cannot be read."""
        qs = self.cli("queues", "list")
        if not isinstance(qs, dict) or not qs or not all(isinstance(c, dict) and "dead" in c for c in qs.values()):
            raise HarnessError(f"`gce-backend recover queues list` answered no queue counts: {str(qs)[:300]}")
        return qs

    def invariants(self):
        s = self.snapshot()
        if s is None:
            return None
        host_of = {v["hostname"]: k for k, v in s["vms"].items()}
        ours = [i for l in s["inst"].values() for i in l if i["labels"].get("gce-backend") == self.deployment]
        live = [i for i in ours if not i.get("deleting")]
        bad = {k: [] for k in INVARIANTS if k != "dead_tasks"}
        bad["leaked"] = [f"{i['name']}({i['status']})" for i in live if i["name"] not in host_of]
        # The VM an instance is: its label, or (made in bulk, which labels all alike) its name
        # `<VM id>-<4 chars>`.
        per_vm = Counter(i["labels"].get("gce-backend-vm") or i["name"].rsplit("-", 1)[0] for i in live)
        bad["duplicates"] = [f"{k}x{n}" for k, n in per_vm.items() if n > 1]
        # Lost: a VM its pool wants (wanted_indexes) with no record or no live instance; extra: a
        # VM not drained that its pool does not want. A Config record that does not decode says
        # nothing of its gaps: then its pool wants the first `amount` indexes.
        for p, a in self.amounts.items():
            recs = {v["index"]: v for v in s["vms"].values() if v.get("config") == p and not v.get("drained")}
            want = wanted_indexes(a, s["let_go"].get(p) or [])
            made = {i for i, v in recs.items() if [x for x in s["inst"].get(v["hostname"], []) if not x.get("deleting")]}
            bad["lost"] += [f"{p}-{i}" for i in sorted(want - made)]
            bad["extra"] += [f"{p}-{i}" for i in sorted(set(recs) - want)]
        for k, vm in s["vms"].items():
            if [x for x in s["inst"].get(vm["hostname"], []) if not x.get("deleting")] and not self.vm_ok(s, vm):
                bad["stuck"].append(f"{k}(bot not connected)")
        qs = self.queues()
        now = self.r.now_ms()
        for q in qs:
            # (a partitioned queue's partition p keeps its leases under {ns:q:p})
            for key in self.r("KEYS", f"{{{NS}:{q}*}}:leased") or []:
                old = self.r("ZRANGEBYSCORE", key, "-inf", now - 60_000) or []
                bad["stuck"] += [f"{q}/task {t}(lease ran out >60s ago)" for t in old]
        for b, bot in s["bots"].items():
            inst = s["inst"].get(b, [])
            if b not in host_of and not (inst and all(i.get("deleting") for i in inst)):
                bad["stale_bots"].append(f"{b}({'dead' if bot.get('isDead') else 'alive'})")
        dead = self.dead_tasks(qs)
        if dead:
            for q, c in qs.items():
                if c.get("dead"):
                    for t in self.cli("queues", "--queue", q, "dead", "--limit", "10"):
                        log(f"dead task: {q} key={t.get('key')} reason={t.get('reason')} "
                            f"last_error={(t.get('last_error') or '')[:300]}")
        for k, v in bad.items():
            if v:
                log(f"{k}: {len(v)}: {' '.join(v[:20])}")
        return {k: len(v) for k, v in bad.items()} | {"dead_tasks": dead}

    def summary(self, s):
        if s is None:
            return "state unreadable (redis down?)"
        want = sum(self.amounts.values())
        good = sum(1 for v in s["vms"].values()
                   if v.get("config") in self.amounts and not v.get("drained") and self.vm_ok(s, v))
        running = sum(1 for l in s["inst"].values() for i in l if i["status"] == "RUNNING")
        return f"connected={good}/{want} records={len(s['vms'])} running_instances={running}"

    def log_sizes(self):
        return {f.name: f.stat().st_size for f in self.tmp.glob("*.log")}

    def log_digest(self, since=None, top=6):
        """The most frequent distinct WARN/ERROR lines of each process log (ids and times blurred),
        from the offsets `since` on."""
        for f in sorted(self.tmp.glob("*.log")):
            c, sample = Counter(), {}
            with open(f, "rb") as fh:
                fh.seek((since or {}).get(f.name, 0))
                for raw in fh:
                    line = re.sub(r"\x1b\[[0-9;]*m", "", raw.decode(errors="replace")).strip()
                    if not re.search(r"\b(WARN|ERROR)\b|panicked|overflow", line) or (since and NOISE.search(line)):
                        continue
                    key = re.sub(r"\d+", "N", re.sub(r"^\S+Z\s+", "", line))[:160]
                    c[key] += 1
                    sample.setdefault(key, line)
            for key, n in c.most_common(top):
                log(f"  {f.name}: {n}x {sample[key][:400]}")
