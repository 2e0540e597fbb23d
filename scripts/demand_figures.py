"""The demand benchmark's figures per policy, apart from any run (scripts/bench-demand prints
them; unit-tested by scripts/harness_test.py): every task's wait, one never started counting
until the run's end, the tasks left unfinished, and the instance hours by state.

Times read from the simulator are on its clock (milliseconds); every figure returned is in
trace seconds or hours (the simulator's times `speed` times)."""
import math

# A task in one of these states has left the queue for good.
ENDED = ("COMPLETED", "BOT_DIED", "CANCELED")


def pct(values, p):
    """The p-th percentile by nearest rank (nan for none)."""
    v = sorted(values)
    return v[max(0, math.ceil(p / 100 * len(v)) - 1)] if v else float("nan")


def task_figures(mine, expected, end_ms, speed):
    """One pool's tasks (`GET /sim/tasks` items) at the run's end (`end_ms`, the simulator's
    `nowMs`), `expected` of them in its trace: `waits` (trace seconds, one per task submitted:
    started - created, or for one never started the time from its submission until it left the
    queue, canceled, or else the run's end), `never_started`, `unfinished` (the trace's tasks not
    ended, those not yet submitted included) and `interrupted` (ended BOT_DIED)."""
    waits, never = [], 0
    for t in mine:
        if t.get("startedMs") is not None:
            until = t["startedMs"]
        else:
            never += 1
            until = t["endedMs"] if t.get("endedMs") is not None else end_ms
        waits.append(max(0, until - t["createdMs"]) / 1000 * speed)
    ended = sum(1 for t in mine if t["state"] in ENDED)
    return {"waits": waits, "never_started": never, "unfinished": expected - ended,
            "interrupted": sum(1 for t in mine if t["state"] == "BOT_DIED")}


def hours(before, after, speed, disk_gib):
    """Instance hours by state between two readings of one Config's `usageByConfig` (billed as
    running: PROVISIONING to SUSPENDING; SUSPENDED; TERMINATED), and the disk GiB-hours of
    instances that each hold `disk_gib` from their insert to their delete, in every state."""
    d = lambda k: (after.get(k, 0) - before.get(k, 0)) * speed / 3600  # noqa: E731
    h = {"running_vm_h": d("runningSeconds"), "suspended_vm_h": d("suspendedSeconds"),
         "stopped_vm_h": d("stoppedSeconds")}
    h["disk_gib_h"] = sum(h.values()) * disk_gib
    return h
