"""Harness of scripts/attack: the service it attacks (redis-server, `gce-backend sim`, `gce-backend
run` with its tokens, settings and configs directory beside a secret file), the attacker's
listener, the loopback Swarming server, HTTP helpers and the tally and leak scan of the probes
(imported by scripts/attack; not run by itself)."""
import http.client
import http.server
import secrets
import threading
from pathlib import Path

from chaos_harness import *  # noqa: F401,F403 (processes, Redis, settings, logging)

NAMESPACE, SWARM_OK = "attack", "https://swarm.example.com"
API = "/api/gce-backend/v1"
# [http] for a short run: timeouts of seconds, a small connection cap, token buckets a flood of a
# few hundred calls empties while the other probes stay under them.
HEADER_S, IDLE_S, MAX_CONN = 2, 31, 64  # idle_timeout: 31 s at least
HTTP = {"header_read_timeout": f'"{HEADER_S}s"', "idle_timeout": f'"{IDLE_S}s"', "max_connections": str(MAX_CONN),
        "per_token": "{rate = 20.0, burst = 100}", "per_address": "{rate = 500.0, burst = 5000}",
        "register_per_address": "{rate = 2.0, burst = 20}"}
# Added to the shipped settings, which keep their open tenant ([tenants."*"]).
TENANTS = """
[tenants.team-a]
prefixes = ["team-a-*"]
projects = ["team-a-proj"]
service_accounts = ["default", "bots@team-a-proj.iam.gserviceaccount.com"]
max_vms = 5

# team-b also owns web-*: a short prefix such as `w` would block it.
[tenants.team-b]
prefixes = ["team-b-*", "web-*"]
projects = ["team-b-proj"]
service_accounts = ["bots@team-b-proj.iam.gserviceaccount.com"]
max_vms = 5
"""
# name: (role, group)
TOKENS = {"admin": ("admin", None), "writer-a": ("writer", "team-a"), "reader-a": ("reader", "team-a"),
          "writer-b": ("writer", "team-b"), "metrics": ("metrics", None), "expired": ("reader", "team-a"),
          "revoked": ("reader", "team-a"), "flood": ("reader", "team-a")}


def set_keys(text, changes):
    """`text` (TOML) with the keys of `changes` {(section, key): value} given those values; each
    must be in `text` already."""
    out, section, done = [], "", set()
    for line in text.splitlines():
        m = re.match(r"\[(.*)\]", line)
        section = m.group(1) if m else section
        kv = re.match(r"(\w+)\s*=", line)
        if kv and (section, kv.group(1)) in changes:
            line = f"{kv.group(1)} = {changes[(section, kv.group(1))]}"
            done.add((section, kv.group(1)))
        out.append(line)
    if set(changes) - done:
        raise RuntimeError(f"config/service.toml has no {sorted(set(changes) - done)}: the settings cannot be set")
    return "\n".join(out) + "\n"


def body(prefix, team="a", amount=1, **over):
    """A Config (JSON, also valid YAML) of `team`, amount..amount VMs, on `swarming=`, with `over`
    replacing fields (an attribute's name replaces that attribute)."""
    attrs = {"project": f"team-{team}-proj", "zone": "us-central1-b",
             "machine_type": "zones/{{.Zone}}/machineTypes/e2-standard-2",
             "disk": [{"image": "projects/debian-cloud/global/images/debian-12", "size": 10,
                       "type": "zones/{{.Zone}}/diskTypes/pd-ssd"}],
             "network_interface": [{"network": "global/networks/default"}],
             "service_account": [{"email": f"bots@team-{team}-proj.iam.gserviceaccount.com",
                                  "scope": ["https://www.googleapis.com/auth/cloud-platform"]}]}
    c = {"prefix": prefix, "amount": {"min": amount, "max": amount}, "attributes": attrs, "lifetime": "1d",
         "timeout": "10m", "swarming": over.pop("swarming"), "owner": [f"team-{team}"]}
    for k in [k for k in over if k in attrs or k == "metadata"]:
        attrs[k] = over.pop(k)
    c.update(over)
    return c


class Attacker(threading.Thread):
    """The attacker's server: a loopback listener that counts the connections it gets and keeps the
    first bytes of each."""

    def __init__(self):
        super().__init__(daemon=True)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.port, self.hits, self.seen, self.stop = self.sock.getsockname()[1], 0, [], threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.hits += 1
            try:
                conn.settimeout(1)
                self.seen.append(conn.recv(200).split(b"\r\n")[0].decode(errors="replace"))
            except OSError:
                pass
            conn.close()


def forwarder(sim_url):
    """A loopback Swarming server: passes each pRPC call on to the simulator's server of the same
    name (`POST /prpc/…` → `SIM/swarming/127.0.0.1:<port>/prpc/…`). Returns the server (its
    `calls` counts them)."""
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_):
            pass

        def do_POST(self):
            self.server.calls += 1
            data = self.rfile.read(int(self.headers.get("content-length") or 0))
            host = f"127.0.0.1:{self.server.server_address[1]}"
            req = urllib.request.Request(f"{sim_url}/swarming/{host}{self.path}", data, method="POST",
                                         headers={"content-type": self.headers.get("content-type", "")})
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    status, headers, out = r.status, r.headers, r.read()
            except urllib.error.HTTPError as e:
                status, headers, out = e.code, e.headers, e.read()
            except OSError as e:
                status, headers, out = 502, {}, str(e).encode()
            self.send_response(status)
            for k, v in headers.items():
                if k.lower() not in ("connection", "transfer-encoding", "content-length", "date", "server"):
                    self.send_header(k, v)
            self.send_header("content-length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads, srv.calls = True, 0
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def fields(text):
    try:
        v = json.loads(text)
    except ValueError:
        return []
    return [f.get("field", "") for f in v.get("fields") or [] if isinstance(f, dict)] if isinstance(v, dict) else []


def short(text, n=300):
    return re.sub(r"\s+", " ", text)[:n]


class Target(Harness):
    """The service, its tokens and files, the HTTP helpers, and the probes' tally."""

    def __init__(self, args):
        super().__init__(args)
        self.ns = NAMESPACE
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.tmp = Path(tempfile.mkdtemp(prefix="gce-attack-"))
        self.tried, self.refused, self.failed, self.controls = 0, 0, [], []
        self.answers, self.refused_prefixes = [], {}
        self.marker = "ATTACK-SECRET-" + secrets.token_hex(8)
        self.canary = "ATTACK-ENV-" + secrets.token_hex(8)

    # --- tally ---
    def probe(self, name, ok, got):
        self.tried += 1
        if ok:
            self.refused += 1
            log(f"  ok   {name}: {short(got, 160)}")
        else:
            self.failed.append(name)
            print(f"FAIL {name}: {short(got, 600)}", flush=True)
        return ok

    def control(self, name, ok, got):
        """A check that the setup tests what it claims (not a probe: nothing is refused)."""
        if not ok:
            self.controls.append(name)
            print(f"FAIL control {name}: {short(got, 600)}", flush=True)
        else:
            log(f"  control {name}: {short(got, 160)}")
        return ok

    # --- setup ---
    def setup(self, binary):
        self.binary(binary)
        for d in ("redis", "pools", "pools/scripts"):
            (self.tmp / d).mkdir()
        self.pools = self.tmp / "pools"
        self.rport, self.sport, self.aport = free_port(), free_port(), free_port()
        self.url, self.sim = f"redis://127.0.0.1:{self.rport}/0", f"http://127.0.0.1:{self.sport}"
        self.root = f"http://127.0.0.1:{self.aport}"
        for k in [k for k in os.environ if k.startswith("GCE_BACKEND_")]:
            os.environ.pop(k)  # nothing of the caller's environment configures the service
        os.environ["ATTACK_CANARY"] = self.canary  # in the service's environment: /proc/self/environ
        self.start_redis()
        self.spawn("sim", [str(self.bin), "sim", "--listen", f"127.0.0.1:{self.sport}", "--op-ms", "200",
                           "--provision-ms", "100", "--stage-ms", "100", "--bot-connect-ms", "200"])
        self.r = Redis(self.rport)
        self.wait_up()
        self.attacker = Attacker()
        self.attacker.start()
        self.swarm = forwarder(self.sim)
        self.server = f"http://127.0.0.1:{self.swarm.server_address[1]}"
        changes = {("http", k): v for k, v in HTTP.items()}
        changes[("swarming", "servers")] = json.dumps([SWARM_OK, self.server])
        (self.tmp / "service.toml").write_text(set_keys(settings_text(8), changes) + TENANTS)
        self.secret = self.tmp / "secret.txt"
        self.secret.write_text(f"{self.marker}: hunter2\npassword: {self.marker}\n")
        self.write_tokens()
        self.write_files()
        log(f"redis {self.url}, simulator {self.sim}, Swarming (loopback, to the simulator) {self.server}, "
            f"attacker's listener 127.0.0.1:{self.attacker.port}, API {self.root}, temp dir {self.tmp}")

    def write_tokens(self):
        self.tokens, self.entries = {}, {}
        for name, (role, group) in TOKENS.items():
            argv = [str(self.bin), "token", "--name", name, "--role", role] + (["--group", group] if group else [])
            out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30).stdout
            self.tokens[name] = re.search(r"^# (gbt_\w+)$", out, re.M).group(1)
            entry = out[out.index("[[token]]"):].strip() + "\n"
            if name == "expired":
                entry += 'expires = "2001-01-01T00:00:00Z"\n'
            self.entries[name] = entry
        self.tokens_file = self.tmp / "tokens.toml"
        self.save_tokens(TOKENS)

    def save_tokens(self, names):
        part = self.tokens_file.with_suffix(".part")  # replaced by a rename, as a secret store does
        part.write_text("\n".join(self.entries[n] for n in names))
        part.rename(self.tokens_file)

    def write_files(self):
        """The configs directory: a good Config reading a file of its own, and the hostile files."""
        p = self.pools
        (p / "scripts/start.sh").write_text("#!/bin/sh\necho CONTROL-START\n")
        (p / "link.txt").symlink_to(self.secret)
        files = {
            "team-a-files": self.cfg("team-a-files", metadata=[{"from_file": "startup-script:scripts/start.sh"}]),
            "team-a-pw": self.cfg("team-a-pw", metadata=[{"from_file": "pw:../../../../etc/passwd"}]),
            "team-a-abs": self.cfg("team-a-abs", metadata=[{"from_file": f"abs:{self.secret}"}]),
            "team-a-sym": self.cfg("team-a-sym", metadata=[{"from_file": "sym:link.txt"}]),
            "team-a-env": self.cfg("team-a-env", metadata=[{"from_file": "env:/proc/self/environ"}]),
            "team-a-ssrf": body("team-a-ssrf", swarming=f"http://127.0.0.1:{self.attacker.port}"),
            "team-a-long": self.cfg("team-a-long", lifetime="10000000000mo"),
            "team-a-fifo": self.cfg("team-a-fifo", metadata=[{"from_file": "k:pipe"}]),
            "team-a-dir": self.cfg("team-a-dir", metadata=[{"from_file": "k:scripts"}]),
        }
        os.mkfifo(p / "pipe")  # opened, a FIFO without a writer blocks the reader
        os.mkfifo(p / "team-a-pipecfg.yaml")
        for name, c in files.items():
            (p / f"{name}.yaml").write_text(json.dumps(c, indent=1) + "\n")
        (p / "team-a-self.yaml").symlink_to(self.secret)  # a Config file that is a link to the secret
        self.bad_files = [n for n in files if n != "team-a-files"] + ["team-a-self", "team-a-pipecfg"]

    def start_service(self):
        self.spawn("service", [str(self.bin), "run", "--redis", self.url, "--namespace", NAMESPACE,
                               "--gce-endpoint", self.sim, "--swarming-endpoint", "http://{host}",
                               "--tokens", str(self.tokens_file), "--root-url", self.root,
                               "--listen", f"127.0.0.1:{self.aport}", "--configs", str(self.pools),
                               "--settings", str(self.tmp / "service.toml"), "--quiet"])

    def wait_ready(self, timeout=60):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if not self.alive("service"):
                raise RuntimeError(f"the service exited ({self.procs['service'].returncode}): {self.tail()}")
            if self.call("GET", "/readyz", keep=False)[0] == 200:
                return
            time.sleep(0.2)
        raise RuntimeError(f"the service did not answer /readyz within {timeout}s: {self.tail()}")

    def tail(self, n=1500):
        return (self.tmp / "service.log").read_text(errors="replace")[-n:]

    # --- HTTP ---
    def call(self, method, path, token=None, data=None, timeout=15, keep=True, retry=False):
        """(status, headers, text) of one request (0 and the error when it got no answer); the
        answer is kept for the leak scan. `retry`: a 429 is waited out (3 times at most)."""
        for _ in range(4):
            headers = {"content-type": "application/json"} if data is not None else {}
            if token:
                headers["authorization"] = f"Bearer {self.tokens[token]}"
            raw = json.dumps(data).encode() if data is not None else None
            req = urllib.request.Request(self.root + path, raw, headers, method=method)
            try:
                with urllib.request.urlopen(req, timeout=timeout) as r:
                    status, hdrs, text = r.status, r.headers, r.read().decode(errors="replace")
            except urllib.error.HTTPError as e:
                status, hdrs, text = e.code, e.headers, e.read().decode(errors="replace")
            except (OSError, http.client.HTTPException) as e:
                status, hdrs, text = 0, {}, f"no answer: {e}"
            if keep:
                self.answers.append(text)
            if not (retry and status == 429):
                break
            time.sleep(min(5, int(hdrs.get("retry-after") or 1)))
        return status, hdrs, text

    def cfg(self, prefix, team="a", amount=1, **over):
        """`body` on the loopback Swarming server unless `swarming=` says otherwise."""
        return body(prefix, team, amount, **({"swarming": self.server} | over))

    def create(self, token, prefix, c):
        return self.call("POST", f"{API}/configs/{prefix}", token, c)

    def expect(self, name, token, prefix, c, field, status=400):
        """createConfig must answer `status` naming `field`; the prefix is checked unstored later."""
        st, _, text = self.create(token, prefix, c)
        named = field is None or field in fields(text) or field in text
        self.refused_prefixes.setdefault(prefix, name)
        return self.probe(name, st == status and named, f"{st} {text}" if st != status or not named else
                          f"{st} naming {field}" if field else f"{st} {text}")

    # --- connections ---
    def hold(self, socks, sender, bound):
        """Seconds until the server closed each socket (None: still open after `bound`)."""
        t0, closed, last = time.monotonic(), {}, 0.0
        while len(closed) < len(socks) and time.monotonic() - t0 < bound:
            now = time.monotonic() - t0
            if sender and now - last >= 0.5:
                last = now
                for i, s in enumerate(socks):
                    if i not in closed:
                        try:
                            s.sendall(sender)
                        except OSError:
                            closed[i] = now
            for i, s in enumerate(socks):
                if i in closed:
                    continue
                try:
                    s.setblocking(False)
                    if s.recv(4096) == b"":
                        closed[i] = now
                except BlockingIOError:
                    pass
                except OSError:
                    closed[i] = now
            time.sleep(0.05)
        for s in socks:
            s.close()
        return [closed.get(i) for i in range(len(socks))]

    def hammer(self, n, method, path, headers, data, bound):
        """`n` requests on keep-alive connections (at most `bound` seconds): statuses counted, the
        first 429's Retry-After, and how often the server closed a kept-alive connection unsaid
        (the request is then sent again on a new one; a second failure counts as its answer)."""
        counts, retry, conn, t0, dropped = Counter(), None, None, time.monotonic(), 0
        for i in range(n):
            if time.monotonic() - t0 > bound:
                break
            for again in (False, True):
                try:
                    conn = conn or http.client.HTTPConnection("127.0.0.1", self.aport, timeout=10)
                    conn.request(method, path, data(i) if data else None, headers)
                    r = conn.getresponse()
                    text = r.read().decode(errors="replace")
                    counts[r.status] += 1
                    if r.status == 429 and retry is None:
                        retry = r.getheader("retry-after")
                    if r.status != 429 and len(self.answers) < 20000:
                        self.answers.append(text)
                    break
                except (OSError, http.client.HTTPException) as e:
                    conn and conn.close()
                    conn = None
                    dropped += not again
                    if again:
                        counts[type(e).__name__] += 1
        conn and conn.close()
        return counts, retry, time.monotonic() - t0, dropped

    # --- the leak scan ---
    def leaks(self):
        logs = {f.name: f.read_text(errors="replace") for f in self.tmp.glob("*.log")}
        marks = {"secret file": self.marker, "service environment": self.canary, "/etc/passwd": "root:x:0:0:"}
        marks |= {f"token {n}": t for n, t in self.tokens.items()}
        n = 0
        for what, mark in marks.items():
            where = [f"API answer/status #{i}" for i, a in enumerate(self.answers) if mark in a]
            where += [f"log {name}" for name, text in logs.items() if mark in text]
            if where:
                n += len(where)
                print(f"LEAK {what}: found in {', '.join(where[:5])}", flush=True)
        panics = sum(t.count("panicked") for t in logs.values())
        if panics:
            for name, text in logs.items():
                for line in [l for l in text.splitlines() if "panicked" in l][:3]:
                    print(f"PANIC {name}: {short(line, 400)}", flush=True)
        return n, panics
