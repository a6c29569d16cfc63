"""The reconcile request and reads from the host's cache, as dicts."""

from __future__ import annotations

import json
from typing import Optional

from . import _backend
from ._types import ObjectKey, ReconcileError, ResourceType


class Context:
    """One reconcile (or finalize) call."""

    def __init__(self, type: ResourceType, key: ObjectKey, config: str = "{}",
                 retries: int = 0, last_failure: Optional[str] = None,
                 previous: Optional[dict] = None, deleted: bool = False, scheduled_at: Optional[str] = None):
        self.type = type
        self.key = key
        self._config = config
        self.retries = retries
        self.last_failure = last_failure
        #: In ``map_keys``: a modified object's state before the change (None for one created, listed or
        #: deleted). Map it too: its keys are the primaries the object left.
        self.previous = previous
        #: In ``map_keys``: whether the changed object was deleted (the object given is its last state).
        self.deleted = deleted
        #: In ``scheduled``: the time the schedule named (RFC 3339, UTC). There is no primary then: ``key`` is
        #: empty, applies must be unowned and events say what they are about.
        self.scheduled_at = scheduled_at

    @property
    def name(self) -> str:
        return self.key.name

    @property
    def namespace(self) -> Optional[str]:
        return self.key.namespace

    @property
    def config(self) -> dict:
        """The plugin's configuration (a dict; ``{}`` when none is set)."""
        try:
            return json.loads(self._config or "{}")
        except ValueError as e:
            raise ReconcileError(f"invalid configuration: {e}") from e

    def primary(self) -> Optional[dict]:
        """The primary object, or None once it is gone."""
        return self.get(self.type, self.key)

    def get(self, type: ResourceType, key: ObjectKey) -> Optional[dict]:
        """One object as a dict, or None. Raises ReconcileError if the read is denied."""
        try:
            text = _backend.get(type, key)
        except Exception as e:  # the bindings raise Err(CacheError)
            raise ReconcileError(_backend.error_text(e)) from None
        return None if text is None else json.loads(text)

    def list(self, type: ResourceType, namespace: Optional[str] = None, selector: str = "") -> list:
        """Objects of ``type`` in ``namespace`` (all when None) matching a label selector."""
        try:
            texts = _backend.list_(type, namespace, selector)
        except Exception as e:
            raise ReconcileError(_backend.error_text(e)) from None
        return [json.loads(t) for t in texts]
