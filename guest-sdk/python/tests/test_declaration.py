"""Children as a set, opt-in (contract 0.3.0)."""

import unittest

from kubewasm_guest import Declaration, ResourceType
from kubewasm_guest.types import apps_v1

CONFIG_MAPS = ResourceType("", "v1", "ConfigMap", "configmaps")


class DeclarationTest(unittest.TestCase):
    def test_children_form_a_set_only_when_asked(self):
        d = Declaration("sets", "0.1.0", CONFIG_MAPS).owns(apps_v1.Deployment).owns(apps_v1.Deployment, prune=True)
        owned, pruned = d.secondaries
        self.assertFalse(owned.prune)
        self.assertTrue(pruned.prune)
        self.assertIn("delete", pruned.verbs)


if __name__ == "__main__":
    unittest.main()


class ScheduledTest(unittest.TestCase):
    def test_a_scheduled_call_runs_on_the_harness_with_its_time_and_no_primary(self):
        from kubewasm_guest import Outcome
        from kubewasm_guest.testing import Harness

        class Report:
            def declare(self):
                return Declaration("report", "0.1.0", CONFIG_MAPS).verbs("apply").schedule("@hourly")

            def reconcile(self, ctx):
                return Outcome()

            def scheduled(self, ctx):
                return Outcome().apply({"apiVersion": "v1", "kind": "ConfigMap",
                                        "metadata": {"name": "report", "namespace": "default"},
                                        "data": {"at": ctx.scheduled_at, "key": ctx.key.name}}, owned=False)

        self.assertEqual(Report().declare().cron, "@hourly")
        out = Harness(Report()).scheduled("2026-12-03T10:00:00Z")
        self.assertEqual(out.applied()[0]["data"], {"at": "2026-12-03T10:00:00Z", "key": ""})
