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
