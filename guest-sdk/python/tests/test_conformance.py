"""The shared conformance fixtures (tests/conformance/reads.json), which the
host runs too: the harness must answer every case as the host does."""

import json
import pathlib
import unittest

from kubewasm_guest import Declaration, ObjectKey, ResourceType, Secondary
from kubewasm_guest._types import ReconcileError
from kubewasm_guest.testing import Harness

FIXTURES = pathlib.Path(__file__).resolve().parents[3] / "tests" / "conformance" / "reads.json"


def _type(t: dict) -> ResourceType:
    return ResourceType(t["group"], t["version"], t["kind"], t["plural"], t["namespaced"])


def _declaration(d: dict) -> Declaration:
    declaration = Declaration(d["name"], d["version"], _type(d["primary"])).verbs(*d.get("primaryVerbs", []))
    for s in d.get("secondaries", []):
        declaration.secondary(Secondary(_type(s["type"]), list(s["verbs"]), s.get("labelSelector", "")))
    return declaration


class _Reader:
    """A plugin whose reconcile makes one case's read, as plugin code does."""

    def __init__(self, declaration, case):
        self.declaration, self.case = declaration, case

    def declare(self):
        return self.declaration

    def reconcile(self, ctx):
        case, t = self.case, _type(self.case["type"])
        if case["read"] == "get":
            key = case["key"]
            return {"found": ctx.get(t, ObjectKey(key.get("namespace"), key["name"])) is not None}
        items = ctx.list(t, case.get("namespace"), case.get("labelSelector", ""))
        return {"items": [
            f"{o['metadata']['namespace']}/{o['metadata']['name']}" if o["metadata"].get("namespace")
            else o["metadata"]["name"] for o in items]}


class ConformanceTest(unittest.TestCase):
    def test_the_harness_answers_every_case_as_the_host_does(self):
        fixtures = json.loads(FIXTURES.read_text())
        checked = 0
        for scenario in fixtures["scenarios"]:
            for i, case in enumerate(scenario["cases"], 1):
                harness = Harness(_Reader(_declaration(scenario["declaration"]), case))
                for obj in scenario.get("objects", []):
                    harness.object(obj)
                try:
                    got = harness.reconcile(ObjectKey("default", "any"))
                except ReconcileError as e:
                    text = str(e)
                    selector = case.get("labelSelector")
                    if text.startswith("read denied: "):
                        got = {"denied": text[len("read denied: "):]}
                    elif text.startswith(f"invalid label selector `{selector}`"):
                        got = {"invalidSelector": selector}
                    else:
                        got = {"error": text}
                with self.subTest(scenario=scenario["name"], case=i):
                    self.assertEqual(got, case["expect"])
                checked += 1
        self.assertGreaterEqual(checked, 20)


if __name__ == "__main__":
    unittest.main()
