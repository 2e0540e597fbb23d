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


# Machine types the benchmark's Configs use: (family as the SKUs name it, vCPUs billed, memory GiB).
# e2-small is shared-core: billed as half a vCPU (Compute Engine's pricing of E2 shared-core).
MACHINES = {"e2-small": ("E2", 0.5, 2)}


def cost_usd(h, skus, machine_type, region):
    """What the hours of `hours()` cost at the list prices of `skus` (Cloud Billing Catalog Sku
    objects of Compute Engine, on-demand, first tier): running hours at the machine type's vCPUs
    and memory (`<family> Instance Core|Ram running in …`), suspended hours at its memory as
    saved state (resource group SuspendedState), disk GiB-hours at standard persistent disk
    (PDStandard); stopped hours cost their disks only. A price missing or found twice fails."""
    family, vcpus, mem_gib = MACHINES[machine_type]

    def per_hour(what, test):
        found = [s for s in skus if region in s.get("serviceRegions", [])
                 and s["category"]["usageType"] == "OnDemand" and test(s)]
        if len(found) != 1:
            raise ValueError(f"prices: {len(found)} on-demand SKUs of {what} in {region}, not 1")
        e = found[0]["pricingInfo"][0]["pricingExpression"]
        p = e["tieredRates"][0]["unitPrice"]
        # The unit price is per usage unit, baseUnitConversionFactor base units (s or By.s) each.
        per_base = (int(p.get("units", "0")) + p.get("nanos", 0) / 1e9) / e["baseUnitConversionFactor"]
        return per_base * 3600 * {"s": 1, "By.s": 2 ** 30}[e["baseUnit"]]

    desc = lambda start: lambda s: s["description"].startswith(start)  # noqa: E731
    group = lambda g: lambda s: s["category"]["resourceGroup"] == g  # noqa: E731
    running = (vcpus * per_hour(f"{family} cores", desc(f"{family} Instance Core running in "))
               + mem_gib * per_hour(f"{family} memory", desc(f"{family} Instance Ram running in ")))
    return (h.get("running_vm_h", 0) * running
            + h.get("suspended_vm_h", 0) * mem_gib * per_hour("suspended state", group("SuspendedState"))
            + h.get("disk_gib_h", 0) * per_hour("standard persistent disk", group("PDStandard")))
