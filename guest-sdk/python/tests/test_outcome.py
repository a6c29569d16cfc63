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
