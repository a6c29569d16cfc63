"""``map_keys`` sees the change as the host gives it (contract 0.3.0): the
object's new state, its previous one, and whether it was deleted."""

import unittest

from kubewasm_guest import Declaration, ObjectKey, Outcome, ResourceType
from kubewasm_guest.testing import Harness

CONFIG_MAPS = ResourceType("", "v1", "ConfigMap", "configmaps")


def labelled(owner):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "ns", "labels": {"owner": owner}}}


class ByOwnerLabel:
    """Maps a ConfigMap to the primary its `owner` label names, in both states."""

    def declare(self):
        return Declaration("by-owner", "0.1.0", CONFIG_MAPS)

    def reconcile(self, ctx):
        return Outcome()

    def map_keys(self, ctx, obj):
        states = [obj] + ([ctx.previous] if ctx.previous else [])
        keys = [ObjectKey("ns", s["metadata"]["labels"]["owner"]) for s in states]
        return keys + ([ObjectKey("ns", "deleted")] if ctx.deleted else [])


class MapKeysTest(unittest.TestCase):
    def test_the_previous_state_and_a_deletion_reach_map_keys(self):
        harness = Harness(ByOwnerLabel())
        self.assertEqual(harness.map_keys(CONFIG_MAPS, labelled("a")), [ObjectKey("ns", "a")])
        self.assertEqual(harness.map_keys(CONFIG_MAPS, labelled("b"), previous=labelled("a")),
                         [ObjectKey("ns", "b"), ObjectKey("ns", "a")])
        self.assertEqual(harness.map_keys(CONFIG_MAPS, labelled("a"), deleted=True),
                         [ObjectKey("ns", "a"), ObjectKey("ns", "deleted")])


if __name__ == "__main__":
    unittest.main()
