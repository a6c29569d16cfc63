"""Write kubewasm controller plugins in Python.

A plugin is a class with ``declare`` and ``reconcile`` (and optionally
``finalize`` and ``map_keys``), exported with :func:`export`::

    from kubewasm_guest import Declaration, Outcome, export
    from kubewasm_guest.types import core_v1    # every built-in type, generated

    CONFIG_MAP = core_v1.ConfigMap

    class Hello:
        def declare(self):
            return Declaration("hello", "0.1.0", CONFIG_MAP)

        def reconcile(self, ctx):
            cm = ctx.primary()          # a dict, or None once deleted
            return Outcome()

    Plugin = export(Hello())            # the name componentize-py looks for

Objects are plain dicts (parsed JSON). Reads go to the host's caches and
are limited to the declared types; writes are desired actions the host
checks and performs. Build with ``python -m kubewasm_guest.build app -o
plugin.wasm`` (:mod:`kubewasm_guest.build`: componentize-py against the WIT
the installed package carries); test natively with
:mod:`kubewasm_guest.testing`. ``kubewasm new NAME --lang python`` starts a
project.
"""

from ._types import (
    APPLY,
    APPLY_STATUS,
    DELETE,
    GET,
    LIST,
    WATCH,
    Declaration,
    Event,
    Mapping,
    ObjectKey,
    Outcome,
    ReconcileError,
    ResourceType,
    Secondary,
)
from ._backend import now
from ._context import Context
from ._export import export
from . import log

__all__ = [
    "APPLY",
    "APPLY_STATUS",
    "DELETE",
    "GET",
    "LIST",
    "WATCH",
    "Context",
    "Declaration",
    "Event",
    "Mapping",
    "ObjectKey",
    "Outcome",
    "ReconcileError",
    "ResourceType",
    "Secondary",
    "export",
    "log",
    "now",
]
