#!/usr/bin/env python3
"""Unit tests of the chaos harness's judgement of a pool (chaos_judge.judge_pool) and of its loud failures:
a pool with a gap the rule allows passes, a pool really short or with one too many does not and
says which, and a command that exits non-zero or prints what is not JSON fails the run. And of
the demand benchmark's figures (demand_figures): a task never started waits until the run's end
and counts, unfinished ones are counted, instance hours by state and their price by SKU.
Run by scripts/test: `python3 scripts/harness_test.py`."""
import json
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chaos_judge import HarnessError, index_room, judge_pool, parse_json, run_checked, wanted_indexes  # noqa: E402
from demand_figures import cost_usd, hours, pct, task_figures  # noqa: E402


def vms(prefix, indexes, **over):
    return {f"{prefix}-{i}": {"id": f"{prefix}-{i}", "index": i, "config": prefix, **over} for i in indexes}


OK = lambda v: not v.get("sick")  # noqa: E731


class JudgePool(unittest.TestCase):
    def test_the_indexes_a_pool_may_hold_are_below_ten_to_its_digits(self):
        self.assertEqual([index_room(n, surge=0) for n in (1, 10, 11, 100, 101)], [10, 10, 100, 100, 1000])
        # A rolling update's surge (1 by default) holds one index more: 10 VMs may use index 10.
        self.assertEqual([index_room(n) for n in (1, 9, 10, 99, 100)], [10, 10, 100, 100, 1000])

    def test_the_wanted_indexes_are_the_first_amount_not_let_go(self):
        self.assertEqual(wanted_indexes(3, []), {0, 1, 2})
        self.assertEqual(wanted_indexes(3, [0, 2]), {1, 3, 4})
        self.assertEqual(wanted_indexes(0, [5]), set())

    def test_a_pool_of_0_to_amount_is_converged(self):
        conv, desc, missing, extra = judge_pool("p", 20, vms("p", range(20)), set(), [], OK)
        self.assertEqual((conv, missing, extra), (True, 0, 0), desc)

    def test_a_gap_left_by_an_idle_first_shrink_is_allowed(self):
        # pool-b shrank 21 -> 20 and let 15 go (idle), keeping 20: the record says so.
        held = [i for i in range(21) if i != 15]
        conv, desc, missing, extra = judge_pool("p", 20, vms("p", held), set(), [15], OK)
        self.assertEqual((conv, missing, extra), (True, 0, 0), desc)

    def test_a_pool_short_of_a_vm_is_refused_and_says_so(self):
        held = [i for i in range(20) if i != 15]
        conv, desc, missing, extra = judge_pool("p", 20, vms("p", held), set(), [], OK)
        self.assertEqual((conv, missing, extra), (False, 1, 0))
        self.assertIn("missing=1", desc)
        self.assertIn("wanted_without_vm=['p-15']", desc)

    def test_a_pool_with_one_too_many_is_refused_and_says_so(self):
        conv, desc, missing, extra = judge_pool("p", 20, vms("p", range(21)), set(), [], OK)
        self.assertEqual((conv, missing, extra), (False, 0, 1))
        self.assertIn("extra=1", desc)
        self.assertIn("not_wanted=['p-20']", desc)

    def test_a_gap_the_record_does_not_let_go_is_refused(self):
        held = [i for i in range(21) if i != 15]
        conv, desc, _, _ = judge_pool("p", 20, vms("p", held), set(), [], OK)
        self.assertFalse(conv, desc)
        self.assertIn("not_wanted=['p-20']", desc)

    def test_an_index_past_the_room_is_off_the_rule(self):
        # 9 VMs and a surge of 1: indexes 0 to 9.
        held = list(range(8)) + [10]
        conv, desc, _, _ = judge_pool("p", 9, vms("p", held), set(), [8, 9], OK)
        self.assertFalse(conv, desc)
        self.assertIn("ids_off_rule=['p-10']", desc)

    def test_draining_unhealthy_and_corrupt_vms_are_not_converged(self):
        pool = vms("p", range(3)) | vms("p", [3], drained=True)
        self.assertIn("draining=1", judge_pool("p", 3, pool, set(), [], OK)[1])
        pool = vms("p", range(2)) | vms("p", [2], sick=True)
        conv, desc, _, _ = judge_pool("p", 3, pool, set(), [], OK)
        self.assertFalse(conv)
        self.assertIn("unhealthy=1", desc)
        conv, desc, missing, _ = judge_pool("p", 3, vms("p", range(2)), {"p-2"}, [], OK)
        self.assertEqual((conv, missing), (False, 1))
        self.assertIn("corrupt=1", desc)

    def test_an_unreadable_record_judges_by_count_and_room(self):
        held = [i for i in range(21) if i != 15]
        conv, desc, _, _ = judge_pool("p", 20, vms("p", held), set(), None, OK)
        self.assertTrue(conv, desc)


class LoudFailures(unittest.TestCase):
    def test_a_command_that_exits_non_zero_fails_with_its_output(self):
        with self.assertRaises(HarnessError) as e:
            run_checked(["sh", "-c", "echo unrecognized subcommand queue >&2; exit 2"], ["gce-backend", "queue"])
        self.assertIn("`gce-backend queue` exited 2: unrecognized subcommand queue", str(e.exception))

    def test_an_answer_that_is_not_json_fails(self):
        with self.assertRaises(HarnessError):
            parse_json("usage: …", "gce-backend recover status")
        self.assertEqual(parse_json('{"a": 1}', "x"), {"a": 1})


def task(state, created, started=None, ended=None):
    t = {"state": state, "createdMs": created}
    if started is not None:
        t["startedMs"] = started
    if ended is not None:
        t["endedMs"] = ended
    return t


class DemandFigures(unittest.TestCase):
    def test_a_task_never_started_waits_until_the_runs_end(self):
        # Speed 6: a simulator second is 6 trace seconds; the run ends at 11 s.
        mine = [task("COMPLETED", 1000, 1000, 5000), task("RUNNING", 1000, 3000), task("PENDING", 1000)]
        f = task_figures(mine, 3, 11_000, 6)
        self.assertEqual(f["waits"], [0.0, 12.0, 60.0])
        self.assertEqual((f["never_started"], f["unfinished"], f["interrupted"]), (1, 2, 0))

    def test_the_percentiles_count_the_tasks_never_started(self):
        # 19 tasks started at once and one still pending after 100 s: p95 is the first's 0, p99 its 600.
        mine = [task("COMPLETED", 0, 0, 1000)] * 19 + [task("PENDING", 0)]
        waits = task_figures(mine, 20, 100_000, 6)["waits"]
        self.assertEqual((pct(waits, 95), pct(waits, 99)), (0.0, 600.0))
        mine = mine[:9] + [task("PENDING", 0)]
        self.assertEqual(pct(task_figures(mine, 10, 100_000, 6)["waits"], 95), 600.0)

    def test_a_task_canceled_before_it_ran_waited_until_canceled(self):
        f = task_figures([task("CANCELED", 1000, None, 2000)], 1, 50_000, 2)
        self.assertEqual((f["waits"], f["never_started"], f["unfinished"]), ([2.0], 1, 0))

    def test_the_tasks_not_yet_submitted_are_unfinished_and_have_no_wait(self):
        mine = [task("COMPLETED", 0, 0, 10), task("BOT_DIED", 0, 0, 10)]
        f = task_figures(mine, 5, 20, 1)
        self.assertEqual((len(f["waits"]), f["unfinished"], f["interrupted"]), (2, 3, 1))

    def test_hours_by_state_and_the_disks_held_in_every_state(self):
        before = {"runningSeconds": 600, "suspendedSeconds": 0}
        after = {"runningSeconds": 1200, "suspendedSeconds": 1200, "stoppedSeconds": 600}
        self.assertEqual(hours(before, after, 6, 10), {"running_vm_h": 1.0, "suspended_vm_h": 2.0,
                                                       "stopped_vm_h": 1.0, "disk_gib_h": 40.0})
        self.assertEqual(hours({}, {}, 6, 10)["disk_gib_h"], 0.0)


def sku(description, group, unit, price, regions=("us-central1",), usage="OnDemand"):
    """A Cloud Billing Catalog Sku as the Catalog API answers it (the fields priced)."""
    factor = {"h": (3600, "s"), "GiBy.h": (2 ** 30 * 3600, "By.s"), "GiBy.mo": (2 ** 30 * 3600 * 744, "By.s")}[unit]
    units, nanos = divmod(round(price * 1e9), 10 ** 9)
    return {"description": description, "serviceRegions": list(regions),
            "category": {"resourceGroup": group, "usageType": usage},
            "pricingInfo": [{"pricingExpression": {
                "usageUnit": unit, "baseUnit": factor[1], "baseUnitConversionFactor": factor[0],
                "tieredRates": [{"startUsageAmount": 0, "unitPrice": {"currencyCode": "USD", "units": str(units),
                                                                       "nanos": nanos}}]}}]}


SKUS = [sku("E2 Instance Core running in Americas", "CPU", "h", 0.02),
        sku("E2 Instance Ram running in Americas", "RAM", "GiBy.h", 0.003),
        sku("Spot Preemptible E2 Instance Core running in Americas", "CPU", "h", 0.006, usage="Preemptible"),
        sku("E2 Instance Core running in EMEA", "CPU", "h", 0.5, regions=("europe-west1",)),
        sku("Storage PD Capacity", "PDStandard", "GiBy.mo", 0.04 * 744),
        sku("Suspended VM memory and device state storage", "SuspendedState", "GiBy.mo", 0.01 * 744)]
PRICES = Path(__file__).resolve().parent.parent / "config" / "prices"


class Pricing(unittest.TestCase):
    def test_each_state_is_priced_by_its_skus_for_the_machine_type_and_region(self):
        # e2-small: half a vCPU and 2 GiB; a GiB-month of 744 h at 0.04 * 744 is 0.04 a GiB-hour.
        price = lambda h: cost_usd(h, SKUS, "e2-small", "us-central1")  # noqa: E731
        self.assertAlmostEqual(price({"running_vm_h": 10}), 10 * (0.5 * 0.02 + 2 * 0.003))
        self.assertAlmostEqual(price({"suspended_vm_h": 10}), 10 * 2 * 0.01)
        self.assertAlmostEqual(price({"stopped_vm_h": 10}), 0)
        self.assertAlmostEqual(price({"disk_gib_h": 100}), 100 * 0.04)

    def test_a_price_missing_for_the_region_fails(self):
        with self.assertRaises(ValueError) as e:
            cost_usd({"running_vm_h": 1}, SKUS, "e2-small", "europe-west1")
        self.assertIn("E2 memory in europe-west1", str(e.exception))
        with self.assertRaises(ValueError):
            cost_usd({"running_vm_h": 1}, SKUS + SKUS[:1], "e2-small", "us-central1")

    @unittest.skipUnless(sorted(PRICES.glob("compute-engine-*.json")), "no prices file in config/prices")
    def test_the_prices_file_gives_e2_small_its_published_hourly_price(self):
        # $0.016751 an hour in us-central1 (cloud.google.com/compute/vm-instance-pricing).
        skus = json.loads(sorted(PRICES.glob("compute-engine-*.json"))[-1].read_text())["skus"]
        self.assertAlmostEqual(cost_usd({"running_vm_h": 1}, skus, "e2-small", "us-central1"), 0.016751, places=5)


if __name__ == "__main__":
    unittest.main(verbosity=1)
