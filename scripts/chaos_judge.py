"""The chaos harness's judgement, apart from any fleet (unit-tested by scripts/harness_test.py):
how a pool is judged by its VMs under the VM id rule of docs/configs.md ("VM ids"), and how a
command the harness runs fails loudly."""
import itertools
import json
import subprocess


class HarnessError(Exception):
    """A command the harness ran exited non-zero or answered what it cannot parse: the run fails
    with the command and its output (a check that cannot read its input proves nothing)."""


def run_checked(argv, what=None, timeout=60):
    """`argv` run; its CompletedProcess when it exits 0, else HarnessError naming the command,
    its exit code and its output."""
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        shown = " ".join(str(a) for a in (what or argv))
        out = (r.stderr.strip() + " " + r.stdout.strip()).strip()
        raise HarnessError(f"`{shown}` exited {r.returncode}: {out[:800]}")
    return r


def parse_json(text, what):
    """`text` as JSON, else HarnessError naming `what` and the first of the text."""
    try:
        return json.loads(text)
    except ValueError as e:
        raise HarnessError(f"`{what}` answered what is not JSON ({e}): {text[:400]!r}") from None


def index_room(amount, surge=1):
    """The indexes a pool of at most `amount` VMs holds ids under, with a rolling update's
    `surge` beyond them (1: the default): 10 to the digits of its highest index (docs/configs.md,
    "VM ids"): 0-9 for up to 10 indexes, 0-99 for up to 100."""
    return 10 ** len(str(max(amount + surge, 1) - 1))


def wanted_indexes(amount, let_go):
    """The indexes a pool of `amount` wants (docs/configs.md, "VM ids"): the first `amount` not
    let go."""
    gaps = set(let_go)
    return set(itertools.islice((i for i in itertools.count() if i not in gaps), amount))


def judge_pool(prefix, amount, vms, corrupt, let_go, ok):
    """A pool judged by its VMs, as docs/configs.md ("VM ids") has them: `amount` VMs not
    drained, each healthy (`ok(vm)`), ids `<prefix>-<index>` with distinct indexes below
    index_room(amount), the wanted ones being the first `amount` indexes not let go (`let_go`,
    from the Config record; None: unreadable, then only the count and the room are judged), no
    drained VM left and no corrupt record. `vms`: the VM records of this prefix by id. Returns
    (converged, description, missing, extra): missing and extra count VMs against the amount.
    Chaos Configs roll no update, so no surge is held."""
    room = index_room(amount)
    live = {k: v for k, v in vms.items() if not v.get("drained")}
    draining = len(vms) - len(live)
    off_rule = sorted(k for k, v in live.items()
                      if k != f"{prefix}-{v.get('index')}" or not 0 <= int(v.get("index", -1)) < room)
    good = [k for k, v in live.items() if ok(v)]
    missing, extra = max(0, amount - len(live)), max(0, len(live) - amount)
    have = {int(v["index"]) for v in live.values() if isinstance(v.get("index"), int)}
    want = wanted_indexes(amount, let_go) if let_go is not None else None
    unwanted = sorted(have - want) if want is not None else []
    unfilled = sorted(want - have) if want is not None else []
    bad = sorted(corrupt)
    conv = (not missing and not extra and not draining and not off_rule and not bad and len(good) == amount
            and not unwanted and not unfilled)
    parts = [f"{prefix} {len(good)}/{amount}"]
    parts += [f"missing={missing}"] if missing else []
    parts += [f"extra={extra}"] if extra else []
    parts += [f"draining={draining}"] if draining else []
    parts += [f"unhealthy={len(live) - len(good)}"] if len(live) != len(good) else []
    parts += [f"ids_off_rule={off_rule[:5]}"] if off_rule else []
    parts += [f"not_wanted={[f'{prefix}-{i}' for i in unwanted[:5]]}"] if unwanted else []
    parts += [f"wanted_without_vm={[f'{prefix}-{i}' for i in unfilled[:5]]}"] if unfilled else []
    parts += [f"corrupt={len(bad)}"] if bad else []
    return conv, " ".join(parts), missing, extra
