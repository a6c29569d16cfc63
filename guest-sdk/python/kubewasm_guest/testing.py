"""Run a plugin natively with plain ``python -m unittest``: fixtures stand
in for the host's cache, and reads are checked against the declaration as
the host checks them::

    from kubewasm_guest.testing import Harness
    outcome = Harness(MyPlugin()).object(ns).reconcile(ObjectKey(None, "team-a"))
"""

from __future__ import annotations

import json
import sys
from typing import Optional

from . import _backend
from ._context import Context
from ._types import GET, LIST, ObjectKey, Outcome, ResourceType


class Harness:
    """Objects and a configuration to run a reconciler against."""

    def __init__(self, reconciler, config: Optional[dict] = None):
        self.reconciler = reconciler
        self.declaration = reconciler.declare()
        self.objects: list = []
        self.config = config or {}
        self.logs: list = []

    def object(self, obj: dict) -> "Harness":
        self.objects.append(obj)
        return self

    def reconcile(self, key: ObjectKey, last_failure: Optional[str] = None) -> Outcome:
        return self._run(self.reconciler.reconcile, key, last_failure)

    def finalize(self, key: ObjectKey) -> Outcome:
        return self._run(getattr(self.reconciler, "finalize", lambda ctx: Outcome()), key, None)

    def _run(self, fn, key, last_failure) -> Outcome:
        ctx = Context(self.declaration.primary, key, json.dumps(self.config), 0, last_failure)
        _backend._native = self
        try:
            return fn(ctx)
        finally:
            _backend._native = None

    # The backend protocol.
    def _allowed(self, type: ResourceType, verb: str) -> bool:
        d = self.declaration
        if type == d.primary:
            return verb in (GET, LIST) or verb in d.primary_verbs
        return any(s.type == type and verb in s.verbs for s in d.secondaries)

    def _check(self, type: ResourceType, verb: str) -> None:
        if not self._allowed(type, verb):
            raise PermissionError(
                f"read denied: plugin `{self.declaration.name}` may not {verb} {type}: the type was not declared"
            )

    def _of(self, type: ResourceType):
        return [o for o in self.objects if o.get("apiVersion") == type.api_version and o.get("kind") == type.kind]

    def get(self, type: ResourceType, key: ObjectKey) -> Optional[str]:
        self._check(type, GET)
        for o in self._of(type):
            meta = o.get("metadata", {})
            if meta.get("name") == key.name and meta.get("namespace") == key.namespace:
                return json.dumps(o)
        return None

    def list(self, type: ResourceType, namespace: Optional[str], selector: str) -> list:
        self._check(type, LIST)
        found = [
            o for o in self._of(type)
            if (namespace is None or o.get("metadata", {}).get("namespace") == namespace)
            and _matches(selector, o.get("metadata", {}).get("labels") or {})
        ]
        found.sort(key=lambda o: (o["metadata"].get("namespace") or "", o["metadata"]["name"]))
        return [json.dumps(o) for o in found]

    def log(self, level: str, message: str, fields: list) -> None:
        self.logs.append((level, message, dict(fields)))
        print(f"[{level}] {message} {dict(fields)}", file=sys.stderr)


def _matches(selector: str, labels: dict) -> bool:
    """The API server's selector grammar: ``k=v``, ``k==v``, ``k!=v``,
    ``k in (a,b)``, ``k notin (a,b)``, ``k``, ``!k``."""
    clauses, depth, start = [], 0, 0
    for i, c in enumerate(selector):
        depth += {"(": 1, ")": -1}.get(c, 0)
        if c == "," and depth == 0:
            clauses.append(selector[start:i])
            start = i + 1
    clauses.append(selector[start:])
    for clause in filter(None, (c.strip() for c in clauses)):
        words = clause.split(None, 1)
        if len(words) == 2 and words[1].split("(")[0].strip() in ("in", "notin"):
            op, values = words[1].split("(", 1)
            wanted = {v.strip() for v in values.rstrip(")").split(",")}
            inside = labels.get(words[0]) in wanted
            if inside != (op.strip() == "in"):
                return False
        elif clause.startswith("!"):
            if clause[1:].strip() in labels:
                return False
        elif "!=" in clause:
            k, v = clause.split("!=", 1)
            if labels.get(k.strip()) == v.strip():
                return False
        elif "=" in clause:
            k, v = clause.replace("==", "=").split("=", 1)
            if labels.get(k.strip()) != v.strip():
                return False
        elif clause not in labels:
            return False
    return True
