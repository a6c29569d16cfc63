"""The shared conformance fixtures (tests/conformance/reads.json and
writes.json), which the host runs too: the harness must answer every case as
the host does."""

import json
import pathlib
import unittest

from kubewasm_guest import Declaration, Event, ObjectKey, Outcome, ResourceType, Secondary
from kubewasm_guest._types import ReconcileError
from kubewasm_guest.testing import Harness

CONFORMANCE = pathlib.Path(__file__).resolve().parents[3] / "tests" / "conformance"
FIXTURES = CONFORMANCE / "reads.json"


def _type(t: dict) -> ResourceType:
    return ResourceType(t["group"], t["version"], t["kind"], t["plural"], t["namespaced"])


def _declaration(d: dict) -> Declaration:
    declaration = (Declaration(d["name"], d["version"], _type(d["primary"])).verbs(*d.get("primaryVerbs", []))
                   .primary_selector(d.get("primarySelector", "")))
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


class _Writer:
    """A plugin whose reconcile returns one case's actions."""

    def __init__(self, declaration, actions):
        self.declaration, self.actions = declaration, actions

    def declare(self):
        return self.declaration

    def reconcile(self, ctx):
        outcome = Outcome()
        for action in self.actions:
            if "apply" in action:
                outcome.apply(action["apply"], owned=action.get("owned", True))
            elif "applyStatus" in action:
                outcome.apply_status(action["applyStatus"])
            elif "delete" in action:
                key = action["delete"]["key"]
                outcome.delete(_type(action["delete"]["type"]), ObjectKey(key.get("namespace"), key["name"]))
            else:
                e = action["event"]
                outcome.event(Event(e["reason"], e["action"], e["note"]))
        return outcome


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

    def test_the_harness_refuses_every_write_the_host_refuses(self):
        fixtures = json.loads((CONFORMANCE / "writes.json").read_text())
        checked = 0
        for scenario in fixtures["scenarios"]:
            for i, case in enumerate(scenario["cases"], 1):
                harness = Harness(_Writer(_declaration(scenario["declaration"]), case["actions"]))
                harness.object(scenario["primary"])
                key = scenario["key"]
                try:
                    harness.reconcile(ObjectKey(key.get("namespace"), key["name"]))
                    got = {"ok": True}
                except ReconcileError as e:
                    got = {"denied": str(e)}
                with self.subTest(scenario=scenario["name"], case=i):
                    self.assertEqual(got, case["expect"])
                checked += 1
        self.assertGreaterEqual(checked, 7)


if __name__ == "__main__":
    unittest.main()
