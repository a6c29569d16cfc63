"""Run a plugin natively with plain ``python -m unittest``: fixtures stand
in for the host's cache, and reads and writes are checked against the
declaration as the host checks them (a write the host would refuse fails the
reconcile with the host's exact refusal)::

    from kubewasm_guest.testing import Harness
    outcome = Harness(MyPlugin()).object(ns).reconcile(ObjectKey(None, "team-a"))
"""

from __future__ import annotations

import json
import sys
from typing import Optional

from . import _backend, _rules
from ._context import Context
from ._types import (
    APPLY,
    APPLY_STATUS,
    DELETE,
    GET,
    LIST,
    WATCH,
    ObjectKey,
    Outcome,
    ReconcileError,
    ResourceType,
)


class _Denied(Exception):
    """A write the grants refuse."""


class _Invalid(Exception):
    """A write the host refuses as malformed."""


class Harness:
    """Objects and a configuration to run a reconciler against."""

    def __init__(self, reconciler, config: Optional[dict] = None, now=None):
        """``now`` (a ``datetime``) is what :func:`kubewasm_guest.now`
        returns during the calls, as the host's clock for a call."""
        self.reconciler = reconciler
        self.declaration = reconciler.declare()
        self.objects: list = []
        self.config = config or {}
        self.now = now
        self.logs: list = []

    def object(self, obj: dict) -> "Harness":
        self.objects.append(obj)
        return self

    def reconcile(self, key: ObjectKey, last_failure: Optional[str] = None) -> Outcome:
        return self._run(self.reconciler.reconcile, key, last_failure)

    def finalize(self, key: ObjectKey) -> Outcome:
        return self._run(getattr(self.reconciler, "finalize", lambda ctx: Outcome()), key, None)

    def scheduled(self, at: str) -> Outcome:
        """Runs the reconciler's ``scheduled`` for the time ``at`` (RFC 3339) the schedule named: no primary,
        an empty key."""
        return self._run(getattr(self.reconciler, "scheduled", lambda ctx: Outcome()), ObjectKey(None, ""), None,
                         scheduled_at=at)

    def map_keys(self, type: ResourceType, obj: dict, previous: Optional[dict] = None,
                 deleted: bool = False) -> list:
        """Runs the reconciler's ``map_keys`` for ``obj``, a changed object of
        the secondary type ``type`` (with its state before the change, or
        deleted: ``obj`` is then its last state), reading this harness's
        objects: the primary keys the host would queue."""
        fn = getattr(self.reconciler, "map_keys", None)
        if fn is None:
            return []
        meta = obj.get("metadata", {})
        ctx = Context(type, ObjectKey(meta.get("namespace"), meta.get("name", "")), json.dumps(self.config),
                      previous=previous, deleted=deleted)
        _backend._native = self
        try:
            return list(fn(ctx, obj))
        finally:
            _backend._native = None

    def _run(self, fn, key, last_failure, scheduled_at: Optional[str] = None) -> Outcome:
        ctx = Context(self.declaration.primary, key, json.dumps(self.config), 0, last_failure,
                      scheduled_at=scheduled_at)
        _backend._native = self
        try:
            outcome = fn(ctx)
        finally:
            _backend._native = None
        if isinstance(outcome, Outcome):
            self._check_writes(outcome, key)
        return outcome

    def _check_writes(self, outcome: Outcome, key: ObjectKey) -> None:
        """The host's write rules (``kubewasm_runtime::action::plan``, held to its
        answers by ``tests/conformance/writes.json``): every apply, status
        apply and delete needs its verb declared on its type; its target's
        scope, namespace and name must be valid (a namespaced object without a
        namespace goes to the primary's), its labels too; an owned child needs
        the primary cached and in its namespace."""
        for index, action in enumerate(outcome.actions, 1):
            try:
                if action[0] == "delete":
                    self._check_target(self._granted(action[1], DELETE)[0], action[2])
                elif action[0] in (APPLY, APPLY_STATUS):
                    declared, target = self._check_object(action[1], action[0], key)
                    if action[0] == APPLY and action[2]:
                        self._check_owner(declared, target, key)
            except _Denied as why:
                raise ReconcileError(f"action #{index} denied: plugin `{self.declaration.name}` {why}") from None
            except _Invalid as why:
                raise ReconcileError(f"action #{index} is invalid: {why}") from None

    def _granted(self, type: ResourceType, verb: str) -> tuple:
        """What :meth:`_held` says of ``type``, if ``verb`` is declared on it;
        else the host's denial (reads and writes alike)."""
        held = self._held(type)
        why = "the type was not declared" if held is None else (
            None if verb in held[1] else "the verb was not declared for this type")
        if why:
            raise _Denied(f"may not {verb} {type}: {why}")
        return held

    def _check_object(self, obj: dict, verb: str, key: ObjectKey) -> tuple:
        group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
        declared = self._granted(ResourceType(group, version, str(obj.get("kind", "")), ""), verb)[0]
        meta = obj.get("metadata") or {}
        if not isinstance(meta.get("name"), str):
            raise _Invalid("object lacks `metadata.name`")
        namespace = meta.get("namespace")
        if declared.namespaced and namespace is None:
            namespace = key.namespace
        target = ObjectKey(namespace, meta["name"])
        self._check_target(declared, target)
        why = _rules.labels_error(obj)
        if why:
            raise _Invalid(why)
        return declared, target

    @staticmethod
    def _check_target(type: ResourceType, target: ObjectKey) -> None:
        if type.namespaced and target.namespace is None:
            raise _Invalid(f"{type} `{target.name}` needs a namespace")
        if not type.namespaced and target.namespace is not None:
            raise _Invalid(f"{type} is cluster-scoped but `{target.name}` names namespace `{target.namespace}`")
        why = (target.namespace is not None and _rules.namespace_error(target.namespace)) \
            or _rules.name_error(type, target.name)
        if why:
            raise _Invalid(why)

    def _check_owner(self, type: ResourceType, child: ObjectKey, key: ObjectKey) -> None:
        primary = self.declaration.primary
        cannot = f"cannot own {type} `{child}`"
        cached = next((o for o in self.objects if o.get("apiVersion") == primary.api_version
                       and o.get("kind") == primary.kind and o.get("metadata", {}).get("name") == key.name
                       and o.get("metadata", {}).get("namespace") == key.namespace), None)
        if cached is None:
            raise _Invalid(f"{cannot}: the primary `{key}` is not in the cache")
        if not isinstance(cached.get("metadata", {}).get("uid"), str):
            raise _Invalid(f"{cannot}: the primary has no uid")
        if primary.namespaced and key.namespace != child.namespace:
            raise _Invalid(f"{cannot}: an owner reference cannot cross namespaces (primary `{key}`)")

    # The backend protocol: the host's read rules (``kubewasm_runtime::reads``),
    # held to its answers by the shared conformance fixtures.
    def _held(self, type: ResourceType):
        """The declared form of ``type``, the verbs held on it and the
        requirements of its declared selector; types match by group,
        version and kind."""
        d = self.declaration
        same = lambda t: (t.group, t.version, t.kind) == (type.group, type.version, type.kind)  # noqa: E731
        if same(d.primary):
            return d.primary, [GET, LIST, WATCH, *d.primary_verbs], _rules.parse_selector(d.primary_label_selector)
        for s in d.secondaries:
            if same(s.type):
                return s.type, s.verbs, _rules.parse_selector(s.label_selector)
        return None

    def _visible(self, type: ResourceType, verb: str) -> tuple:
        try:
            declared, _, requirements = self._granted(type, verb)
        except _Denied as why:
            raise PermissionError(f"read denied: plugin `{self.declaration.name}` {why}") from None
        return declared, [
            o for o in self.objects
            if o.get("apiVersion") == declared.api_version and o.get("kind") == declared.kind
            and _rules.matches(requirements, o)
        ]

    def get(self, type: ResourceType, key: ObjectKey) -> Optional[str]:
        declared, objects = self._visible(type, GET)
        if not _rules.is_valid_name(declared, key.name):
            return None
        for o in objects:
            meta = o.get("metadata", {})
            if meta.get("name") == key.name and meta.get("namespace") == key.namespace:
                return json.dumps(o)
        return None

    def list(self, type: ResourceType, namespace: Optional[str], selector: str) -> list:
        requirements = _rules.parse_selector(selector)
        _, objects = self._visible(type, LIST)
        found = [
            o for o in objects
            if (namespace is None or o.get("metadata", {}).get("namespace") == namespace)
            and _rules.matches(requirements, o)
        ]
        found.sort(key=lambda o: (o["metadata"].get("namespace") or "", o["metadata"]["name"]))
        return [json.dumps(o) for o in found]

    def log(self, level: str, message: str, fields: list) -> None:
        self.logs.append((level, message, dict(fields)))
        print(f"[{level}] {message} {dict(fields)}", file=sys.stderr)

