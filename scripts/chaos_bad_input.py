"""--bad-input of scripts/chaos: the bad inputs planted one at a time (BAD_CASES), what each
checks became of its own input, the good Config measured meanwhile (measure) and the Compute
outage at the end (outage); imported by scripts/chaos, not run by itself."""
from chaos_harness import *  # noqa: F401,F403 (the harness: processes, Redis, checks)


def measure(h, p, bound):
    """Grows Config p by 2 and times its convergence, preempts 2 of its instances and times their
    replacement, shrinks it back and times that: seconds each (None: not within bound)."""
    h.write_config(p, h.amounts[p] + 2)
    grow = h.wait_converged(bound, only=[p], quiet=True)
    s = h.snapshot() or {"vms": {}, "inst": {}}
    ok = [v for v in s["vms"].values() if v.get("config") == p and h.vm_ok(s, v)]
    victims = random.sample(ok, min(2, len(ok)))
    for v in victims:
        i = s["inst"][v["hostname"]][0]
        h.act("/sim/preempt", {"project": i["project"], "zone": i["zone"], "name": i["name"]})
    start, repl = time.monotonic(), None
    while victims and time.monotonic() - start < bound:
        s = h.snapshot()
        if s and all((n := s["vms"].get(v["id"])) and n["hostname"] != v["hostname"] and h.vm_ok(s, n)
                     for v in victims):
            repl = time.monotonic() - start
            break
        time.sleep(0.5)
    h.write_config(p, h.amounts[p] - 2)
    shrink = h.wait_converged(bound, only=[p], quiet=True)
    fmt = lambda t: "%.1fs" % t if t is not None else f"NOT within {bound:.0f}s"
    log(f"  {p}: grow by 2 converged in {fmt(grow)}, {len(victims)} preempted replaced in {fmt(repl)}, "
        f"shrink back in {fmt(shrink)}")
    return grow, repl if len(victims) == 2 else None, shrink


def plant(h, key, value, typ="HSET", field=None):
    argv = ["redis-cli", "-p", str(h.rport), typ, key] + ([field] if field else []) + [value]
    log("  planted: " + " ".join(argv[3:]))
    subprocess.run(argv, check=True, capture_output=True)


def case_queue_rec(h):
    q, workers = f"{{{NS}:count_vms}}", [n for n in h.procs if n.startswith("worker")]
    for n in workers:  # workers stopped for a moment, so the cron's count_vms pushes (each second) stay pending
        os.kill(h.procs[n].pid, signal.SIGSTOP)
    try:
        # A live task: pending, delayed, or leased to a stopped worker (pushes for its key then
        # wait as its follow-up). Every script that loads its record meets the corruption.
        end, ids, where = time.monotonic() + 15, [], ""
        while not ids and time.monotonic() < end:
            time.sleep(0.2)
            for where, ids in (("pending", h.r("LRANGE", q + ":ready", 0, -1)),
                               ("delayed", h.r("ZRANGE", q + ":delayed", 0, -1)),
                               ("leased", h.r("ZRANGE", q + ":leased", 0, -1))):
                if ids:
                    break
        tid = random.choice(ids) if ids else None
        done = int(h.r("HGET", q + ":stats", "done") or 0)
        if tid:
            plant(h, q + ":rec", "{not json", field=tid)
    finally:
        for n in workers:
            os.kill(h.procs[n].pid, signal.SIGCONT)
    if tid is None:
        log("  no live count_vms task within 15 s: nothing to corrupt")
        return (lambda: (False, "no live count_vms task to corrupt")), lambda: None
    log(f"  checking: task {tid} ({where}) goes to the dead set (or a push replaces it), count_vms keeps "
        "completing tasks")

    def check():
        rec, dead = h.r("HGET", q + ":rec", tid), h.r("ZSCORE", q + ":dead", tid)
        now = int(h.r("HGET", q + ":stats", "done") or 0)
        buried = [t for t in h.cli("queues", "--queue", "count_vms", "dead", "--limit", "50") if t.get("task_id") == tid]
        note = (f"task {tid}: in dead set={dead is not None}, listed dead={[(t.get('reason'), (t.get('last_error') or '')[:80]) for t in buried]}; "
                f"record {'still corrupt' if rec == '{not json' else 'replaced' if rec else 'gone'}; done {done}->{now}")
        # Buried (listed dead, reason corrupt) and cleared from the dead set by the cleanup, or
        # replaced by a push before a worker met it; either way count_vms went on.
        return (bool(buried) or (rec != "{not json" and dead is None)) and now > done, note

    def cleanup():  # the buried task is this case's, not a dead task of the run: only it goes
        if h.r("ZREM", q + ":dead", tid):
            h.r("HDEL", q + ":rec", tid)
            log(f"  task {tid} taken out of count_vms's dead set (any other dead task stays counted)")
    return check, cleanup


def case_cfg_rec(h):
    plant(h, f"{{{NS}:db}}:cfg", "{garbage", field="charlie")
    plant(h, f"{{{NS}:db}}:cfg:ver", "1", field="charlie")

    def check():
        # No file names charlie: its record is deleted (docs/robustness.md), and the status
        # answers meanwhile (the other Configs listed).
        st = h.cli("status")
        left = until(lambda: h.r("HGET", f"{{{NS}:db}}:cfg", "charlie") is None, 60)
        listed = sorted(c.get("prefix", "?") for c in st.get("configs", []))
        now = h.r("HGET", f"{{{NS}:db}}:cfg", "charlie")
        return left and "pool-a" in listed, (f"charlie record: {'deleted' if now is None else 'still there: ' + now[:80]}; "
                                            f"`gce-backend recover status` listed {listed}")
    return check, lambda: (h.r("HDEL", f"{{{NS}:db}}:cfg", "charlie"), h.r("HDEL", f"{{{NS}:db}}:cfg:ver", "charlie"))


def case_vm_rec(h):
    vm = "pool-a-0"
    key = h.vm_key("pool-a")
    orig, since = h.r("HGET", key, vm), h.log_sizes()
    plant(h, key, "{garbage", field=vm)

    def check():
        # Quarantined: the record rebuilt around its instance (or dropped), then the VM made
        # again; pool-a converging (measured) shows the rest. Said where an operator looks:
        # pool-a's status (stage `quarantine`; it keeps the last 20 errors) or a WARN line, from
        # whichever of a task or the heal pass met the record first.
        healed = until(lambda: h.r("HGET", key, vm) != "{garbage", 60)
        now = h.r("HGET", key, vm)

        def said():
            st = h.cli("status", "pool-a")
            return [e.get("message", "") for c in st.get("configs", []) for e in c.get("errors", [])
                    if e.get("stage") == "quarantine" and vm in e.get("message", "")]
        told = until(lambda: said() or log_lines(h, since, re.escape(vm) + r"\b.*(does not decode|quarantin)|quarantin.*" + re.escape(vm) + r"\b"), 30)
        return healed and bool(told), (f"{vm} record is now {'still {garbage' if now == '{garbage' else (now or 'absent')[:100]}; "
                                       f"said: {(told or ['nowhere'])[0][:200]}")

    def cleanup():
        if h.r("HGET", key, vm) == "{garbage":
            h.r("HSET", key, vm, orig)
            log(f"  {vm}: still corrupt, original record put back")
    return check, cleanup


def until(fn, bound, every=0.5):
    """fn() polled until it answers something true (returned) or `bound` seconds pass (its last
    answer returned)."""
    end = time.monotonic() + bound
    while True:
        got = fn()
        if got or time.monotonic() >= end:
            return got
        time.sleep(every)


def log_lines(h, since, pattern):
    """Lines of every process log written since the offsets `since` that match `pattern`."""
    out = []
    for f in sorted(h.tmp.glob("*.log")):
        with open(f, "rb") as fh:
            fh.seek(since.get(f.name, 0))
            out += [f"{f.name}: {l.decode(errors='replace').strip()}" for l in fh if re.search(pattern, l.decode(errors="replace"))]
    return out


def case_index_type_cron(h):
    """pool-b's VM index and the shared deadline index become strings: no cron job fails, the
    other Configs go on (measured), and both keys are rebuilt from the VM records."""
    keys = {h.index_key("pool-b", "ids"): "set", h.index_key("pool-b", "deadline"): "zset"}
    since = h.log_sizes()
    for k in keys:
        h.r("DEL", k)
        plant(h, k, "x", typ="SET")

    def check():
        failed = log_lines(h, since, r"cron job failed")
        types = {k: h.r("TYPE", k) for k in keys}
        healed = all(t in (want, "none") for t, want in zip(types.values(), keys.values()))
        note = f"cron failures: {len(failed)} {failed[:2]}; key types now {types}"
        return not failed and healed, note
    return check, lambda: None


def case_index_heals(h):
    """pool-b's VM index becomes a string, then pool-b grows 4 -> 6: it converges with no
    operator, no task dies, and its index is a set again."""
    key = h.index_key("pool-b", "ids")
    dead0 = h.dead_tasks()
    h.r("DEL", key)
    plant(h, key, "x", typ="SET")
    h.write_config("pool-b", 6)

    def check():
        t = h.wait_converged(120, only=["pool-b"], quiet=True)
        dead = h.dead_tasks() - dead0
        typ = h.r("TYPE", key)
        return t is not None and dead == 0 and typ == "set", \
            f"pool-b 4 -> 6: {'converged' if t is not None else 'NOT converged'}; dead tasks +{dead}; {key} is a {typ}"
    return check, lambda: h.write_config("pool-b", 4)


def case_server(mode, prefix):
    def case(h):
        host = f"{mode}.example.com"
        log(f"  planted: simulator fault swarming_servers {host}={mode}, Config {prefix} (amount 2) on it")
        h.fault({"swarming_servers": {host: mode}})
        h.write_config(prefix, 2, f"https://{host}")

        def check():
            # Its Config is applied, and its status names the server's fault; the good Config
            # converging (measured) shows the fault stayed with it.
            def errors():
                st = h.cli("status", prefix)
                return [e.get("message", "") for c in st.get("configs", []) for e in c.get("errors", [])
                        if host in e.get("message", "")]
            said = until(errors, 60)
            s = h.snapshot()
            n = sum(1 for v in s["vms"].values() if v.get("config") == prefix) if s else "?"
            stored = bool(s) and prefix in s["cfgs"]
            return stored and bool(said), f"{prefix}: stored={stored}, {n} VM records; errors naming {host}: {(said or [''])[0][:200]}"

        def cleanup():
            # The server answers again and the Config goes; a task of it that died meanwhile
            # (malformed answers spend attempts) is retried as an operator would, and must then
            # complete: dead_tasks at the end counts it otherwise.
            h.remove_config(prefix)
            h.fault({"swarming_servers": {}})
            h.gone.append(prefix)
            for q, c in h.queues().items():
                for t in h.cli("queues", "--queue", q, "dead", "--limit", "100") if c.get("dead") else []:
                    if t.get("key", "").startswith(prefix + "-"):
                        h.cli("queues", "--queue", q, "retry-dead", t["task_id"])
                        log(f"  dead task {q}/{t['task_id']} ({t['key']}: {(t.get('last_error') or '')[:100]}) "
                            "retried now that its server answers")
        return check, cleanup
    return case


def case_file(name, content, prefix=None):
    def case(h):
        path = h.tmp / "pools" / name
        path.write_bytes(content() if callable(content) else content)
        log(f"  planted: {path.name} ({path.stat().st_size} bytes)")

        def check():
            # Refused: the file's error on the status, nothing of it imported.
            def errors():
                return [f.get("message", "")[:200] for f in h.cli("status").get("files", [])
                        if f.get("path", "").endswith(name) and f.get("message")]
            err = until(errors, 60)
            cfg = bool(prefix) and prefix in (h.r("HKEYS", f"{{{NS}:db}}:cfg") or [])
            return bool(err) and not cfg, (f"Config {prefix} imported={cfg}; " if prefix else "") + f"file errors: {err}"

        def cleanup():
            path.unlink(missing_ok=True)
            h.gone.append(prefix) if prefix else None
        return check, cleanup
    return case


def big_metadata():
    meta = "  metadata:\n" + "".join(f'    - from_text: "k{i}:v"\n' for i in range(200_000))
    return config_yaml("pool-x", 1, ZONES[0], extra=meta).encode()


BAD_CASES = {"queue_rec": case_queue_rec, "cfg_rec": case_cfg_rec, "vm_rec": case_vm_rec,
             "index_type_cron": case_index_type_cron,
             "index_heals": case_index_heals, "swarming_hang": case_server("hang", "pool-h"),
             "swarming_malformed": case_server("malformed", "pool-m"),
             "deep_nesting": case_file("deep.yaml", b"[" * 200_000),
             "junk_10mb": case_file("junk.yaml", lambda: random.Random(7).randbytes(10 << 20)),
             "big_metadata": case_file("pool-x.yaml", big_metadata, "pool-x")}


def outage(h, seconds=90, bound=240):
    """The simulator's Compute silent for `seconds` (faults compute_hang) while pool-a grows by 3 and
    pool-b shrinks by 2, then back. Returns the tasks that went dead and the WARN lines of the worker
    and cron logs from its start to convergence after it (None: did not converge). The 5 % faults
    are off meanwhile, so the lines counted are the outage's own."""
    h.fault({"errors": {}})
    dead0, offsets = h.dead_tasks(), h.log_sizes()
    log(f"--- outage: Compute silent for {seconds}s; pool-a grows by 3, pool-b shrinks by 2")
    h.fault({"compute_hang": True})
    h.write_config("pool-a", h.amounts["pool-a"] + 3)
    h.write_config("pool-b", h.amounts["pool-b"] - 2)
    time.sleep(seconds)
    h.fault({"compute_hang": False})
    conv = h.wait_converged(bound, only=["pool-a", "pool-b"], gone=h.gone)
    dead = h.dead_tasks() - dead0
    warns = sum(1 for l in log_lines(h, offsets, r"\bWARN\b") if l.startswith(("worker", "cron.log")))
    log(f"  outage: {'converged %.1fs after Compute came back' % conv if conv is not None else 'NOT converged'}; "
        f"{dead} dead tasks, {warns} WARN lines")
    h.log_digest(since=offsets, top=5)
    h.fault(FAULTS)
    return dead, warns, conv


def bad_input(h, a):
    """The --bad-input mode: each case planted alone, the good Config pool-a measured, then cleaned up."""
    random.seed(a.seed)
    h.write_config("pool-a", a.vms_per_config)
    h.write_config("pool-b", 4)
    h.start_service()
    log(f"good Config pool-a ({a.vms_per_config} VMs) and pool-b (4); 5 % faults stay on")
    t = h.wait_converged(180)
    log(f"initial convergence: {'%.1fs' % t if t is not None else 'NOT REACHED'}")
    base = measure(h, "pool-a", 120)
    known = [x for x in base if x is not None]
    bound = max(30.0, 3 * max(known, default=20) + 10)
    log(f"baseline measured; bound per case: {bound:.0f}s")
    results, worst = h.results, 0.0
    for name, case in BAD_CASES.items():
        log(f"--- {name}")
        offsets = h.log_sizes()
        check, cleanup = case(h)
        log(f"  checking: pool-a grows by 2, has 2 preempted instances replaced and shrinks back, each within "
            f"{bound:.0f}s; every process stays alive")
        time.sleep(3)
        grow, repl, shrink = measure(h, "pool-a", bound)
        worst = None if worst is None or grow is None else max(worst, grow)
        down = [n for n in h.procs if not h.alive(n)]
        extra_ok, note = check()
        fails = ([f"good Config did not converge within {bound:.0f}s"] if grow is None or shrink is None else []) + \
                ([f"replacements not within {bound:.0f}s"] if repl is None else []) + \
                [f"{n} died (exit {h.procs[n].returncode})" for n in down] + ([] if extra_ok else ["case check"])
        results[name] = "FAIL" if fails else "ok"
        log(f"  {name}: {results[name]} {'; '.join(fails)} | {note}")
        h.log_digest(since=offsets, top=3)
        for n in down:
            h.start_redis() if n == "redis" else h.start_run(n) if n != "sim" else None
        cleanup()
        settled = h.wait_converged(bound, only=["pool-a", "pool-b"], gone=h.gone, quiet=True)
        log(f"  cleaned up; {'settled in %.1fs' % settled if settled is not None else 'NOT settled'}")
    dead, warns, conv = outage(h)
    left = h.dead_tasks()
    if left:
        log(f"dead tasks at the end: {left}")
        h.invariants()  # lists them
    fmt = lambda t: "%.1f" % t if t is not None else "none"
    print("chaos-bad-input: " + " ".join(f"{k}={v}" for k, v in results.items())
          + f" good_converge_s={fmt(worst)} baseline_converge_s={fmt(base[0])}"
          + f" outage_dead={dead} outage_warn_lines={warns} dead_tasks={left}", flush=True)
    outage_ok = conv is not None and dead == 0 and warns < 50 and left == 0
    return 0 if all(v == "ok" for v in results.values()) and outage_ok else 1
