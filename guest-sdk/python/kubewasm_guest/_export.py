"""Turns a reconciler into the ``Plugin`` class componentize-py exports.

The generated bindings (``wit_world``) exist only inside a component, so
they are imported when a method runs, never at import time: the app module
stays importable by native tests.
"""

from __future__ import annotations

import json
import traceback

from ._context import Context
from ._types import Declaration, Mapping, ObjectKey, Outcome, ResourceType, to_json


def export(reconciler):
    """The class to bind to the name ``Plugin`` in the app module."""

    class Plugin:
        def declare(self):
            return _declaration(reconciler.declare())

        def reconcile(self, request):
            return _run(reconciler.reconcile, request)

        def finalize(self, request):
            fn = getattr(reconciler, "finalize", None) or (lambda ctx: Outcome())
            return _run(fn, request)

        def scheduled(self, request):
            fn = getattr(reconciler, "scheduled", None) or (lambda ctx: Outcome())
            declared = reconciler.declare()
            ctx = Context(declared.primary, ObjectKey(None, ""), request.config, scheduled_at=request.scheduled_at)
            return _call(fn, ctx)

        def map_keys(self, request):
            from componentize_py_types import Err
            from wit_world.exports import plugin as p
            from wit_world.imports import types as t

            fn = getattr(reconciler, "map_keys", None)
            if fn is None:
                return []
            try:
                obj = json.loads(request.object)
                meta = obj.get("metadata", {})
                previous = None if request.previous is None else json.loads(request.previous)
                ctx = Context(_sdk_type(request.type), ObjectKey(meta.get("namespace"), meta.get("name", "")),
                              request.config, previous=previous, deleted=request.deleted)
                keys = fn(ctx, obj)
                return [t.ObjectKey(k.namespace, k.name) for k in keys]
            except Exception as e:  # the plugin's failure, reported with where it happened
                raise Err(p.Failure(_describe(e))) from None

    return Plugin


def _wit_type(t, rt: ResourceType):
    return t.ResourceType(rt.group, rt.version, rt.kind, rt.plural, rt.namespaced)


def _sdk_type(wt) -> ResourceType:
    return ResourceType(wt.group, wt.version, wt.kind, wt.plural, wt.namespaced)


def _verbs(t, verbs):
    return [t.Verb[v.upper().replace("-", "_")] for v in verbs]


def _mapping(p, mapping):
    kind, value = mapping
    return {
        "none": lambda: p.Mapping_None_(),
        "owner-references": lambda: p.Mapping_OwnerReferences(),
        "label": lambda: p.Mapping_Label(value),
        "custom": lambda: p.Mapping_Custom(),
        "reads": lambda: p.Mapping_Reads(),
    }[kind]()


def _declaration(d: Declaration):
    from wit_world.exports import plugin as p
    from wit_world.imports import types as t

    return p.Declaration(
        name=d.name,
        version=d.version,
        primary=_wit_type(t, d.primary),
        primary_verbs=_verbs(t, d.primary_verbs),
        primary_selector=d.primary_label_selector,
        secondaries=[
            p.Secondary(_wit_type(t, s.type), _verbs(t, s.verbs), s.label_selector, _mapping(p, s.mapping),
                        s.prune)
            for s in d.secondaries
        ],
        managed_finalizer=d.managed_finalizer,
        resync_seconds=d.resync_seconds,
        max_concurrency=d.max_concurrency,
        config_schema=d.config_schema,
        schedule=d.cron,
    )


def _run(fn, request):
    ctx = Context(
        _sdk_type(request.type),
        ObjectKey(request.key.namespace, request.key.name),
        request.config,
        request.retries,
        request.last_failure,
    )
    return _call(fn, ctx)


def _call(fn, ctx):
    """Runs ``fn`` on ``ctx`` and converts its outcome, or its failure."""
    from componentize_py_types import Err
    from wit_world.exports import plugin as p

    try:
        outcome = fn(ctx)
        if not isinstance(outcome, Outcome):
            raise TypeError(f"{getattr(fn, '__name__', 'the call')} must return an Outcome, not {type(outcome).__name__}")
        return _outcome(p, outcome)
    except Exception as e:  # every failure is the plugin's, reported with where it happened
        raise Err(p.Failure(_describe(e))) from None


def _describe(e: BaseException) -> str:
    """The exception and the plugin's line that raised it
    (``KeyError: 'spec' (at app.py:12 in reconcile)``)."""
    detail = "".join(traceback.format_exception_only(type(e), e)).strip()
    frames = [f for f in traceback.extract_tb(e.__traceback__) if "kubewasm_guest" not in f.filename]
    if frames:
        frame = frames[-1]
        detail += f" (at {frame.filename.rsplit('/', 1)[-1]}:{frame.lineno} in {frame.name})"
    return detail


def _outcome(p, outcome: Outcome):
    from wit_world.imports import types as t

    actions = []
    for action in outcome.actions:
        kind = action[0]
        if kind == "apply":
            actions.append(p.Action_Apply(p.Apply(to_json(action[1]), action[2], action[3])))
        elif kind == "apply-status":
            actions.append(p.Action_ApplyStatus(to_json(action[1])))
        elif kind == "delete":
            _, rt, key, (uid, resource_version) = action
            actions.append(p.Action_Delete(p.Deletion(_wit_type(t, rt), t.ObjectKey(key.namespace, key.name),
                                                      p.Preconditions(uid, resource_version))))
        else:
            event = action[1]
            regarding = None
            if event.regarding is not None:
                rt, key = event.regarding
                regarding = (_wit_type(t, rt), t.ObjectKey(key.namespace, key.name))
            kind = p.EventType.WARNING if event.warning else p.EventType.NORMAL
            actions.append(p.Action_Event(p.Event(regarding, kind, event.reason, event.action, event.note)))
    return p.Outcome(actions, outcome.requeue_after_ms, outcome.needs_finalizer)
