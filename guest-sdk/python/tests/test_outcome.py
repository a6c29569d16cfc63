"""The test helpers of an outcome, the same in every language's SDK:
applied, statuses, deleted, events, requeue."""

import unittest

from kubewasm_guest import Event, ObjectKey, Outcome, ResourceType


class OutcomeTest(unittest.TestCase):
    def test_the_helpers_show_each_kind_of_action_in_order(self):
        config_maps = ResourceType("", "v1", "ConfigMap", "configmaps")
        outcome = (Outcome()
                   .apply({"kind": "ConfigMap", "metadata": {"name": "a"}})
                   .apply_status({"kind": "ConfigMap", "status": {"ok": True}})
                   .delete(config_maps, ObjectKey("default", "old"))
                   .event(Event("Seen", "Reconcile", "hello"))
                   .requeue_after(30))
        self.assertEqual(outcome.applied()[0]["metadata"]["name"], "a")
        self.assertEqual(outcome.statuses()[0]["status"], {"ok": True})
        self.assertEqual(outcome.deleted(), [(config_maps, ObjectKey("default", "old"))])
        self.assertEqual([e.note for e in outcome.events()], ["hello"])
        self.assertEqual(outcome.requeue(), 30)
        self.assertIsNone(Outcome().requeue())


if __name__ == "__main__":
    unittest.main()


class ClockTest(unittest.TestCase):
    def test_the_harness_clock_is_what_now_returns_during_a_call(self):
        from datetime import datetime, timezone

        from kubewasm_guest import Declaration, ObjectKey, Outcome, ResourceType, now
        from kubewasm_guest.testing import Harness

        seen = []

        class Clock:
            def declare(self):
                return Declaration("clock", "0.1.0", ResourceType.core("v1", "ConfigMap", "configmaps"))

            def reconcile(self, ctx):
                seen.append(now())
                return Outcome()

        at = datetime(2026, 1, 1, tzinfo=timezone.utc)
        Harness(Clock(), now=at).reconcile(ObjectKey("default", "a"))
        Harness(Clock()).reconcile(ObjectKey("default", "a"))
        self.assertIs(seen[0], at)
        self.assertIsNot(seen[1], at)
        self.assertIsNotNone(seen[1].tzinfo)
