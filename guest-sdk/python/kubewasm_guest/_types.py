"""The SDK's own types: plain Python, independent of the generated bindings."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional

# Verbs, spelled as in the WIT.
GET = "get"
LIST = "list"
WATCH = "watch"
APPLY = "apply"
APPLY_STATUS = "apply-status"
DELETE = "delete"
VERBS = (GET, LIST, WATCH, APPLY, APPLY_STATUS, DELETE)


@dataclass(frozen=True)
class ResourceType:
    """A Kubernetes resource type: group (empty for core), version, kind, plural, scope."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool = True

    @staticmethod
    def core(version: str, kind: str, plural: str, namespaced: bool = True) -> "ResourceType":
        """A type of the core API group (``apiVersion: v1``)."""
        return ResourceType("", version, kind, plural, namespaced)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def __str__(self) -> str:
        return f"{self.api_version} {self.kind}"


@dataclass(frozen=True)
class ObjectKey:
    """An object's identity: namespace (None when cluster-scoped) and name."""

    namespace: Optional[str]
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


class Mapping:
    """How changes of a secondary map to primary keys."""

    NONE = ("none", None)
    OWNER_REFERENCES = ("owner-references", None)
    CUSTOM = ("custom", None)
    #: Reads as triggers: the primaries whose last successful reconcile read the changed object.
    READS = ("reads", None)

    @staticmethod
    def label(key: str) -> tuple:
        """The value of label ``key`` names the primary (``name`` or ``namespace.name``)."""
        return ("label", key)


@dataclass
class Secondary:
    """A resource type other than the primary."""

    type: ResourceType
    verbs: list = field(default_factory=list)
    label_selector: str = ""
    mapping: tuple = Mapping.NONE
    #: The owned children of this type form a set: the host deletes those it owns for the primary that a
    #: reconcile no longer applies (needs ``delete``). False, the default: never pruned.
    prune: bool = False


class Declaration:
    """What a plugin declares at load; chain the methods."""

    def __init__(self, name: str, version: str, primary: ResourceType):
        self.name = name
        self.version = version
        self.primary = primary
        self.primary_verbs: list = []
        self.primary_label_selector = ""
        self.secondaries: list = []
        self.managed_finalizer = False
        self.resync_seconds: Optional[int] = None
        self.max_concurrency: Optional[int] = None
        self.config_schema: Optional[str] = None
        self.cron: Optional[str] = None

    def verbs(self, *verbs: str) -> "Declaration":
        """Verbs on the primary beyond the implied get, list and watch."""
        self.primary_verbs.extend(_checked(verbs))
        return self

    def primary_selector(self, selector: str) -> "Declaration":
        """Only primaries matching this label selector (``app=web,!legacy``)
        are watched, cached and reconciled; the default is every object."""
        self.primary_label_selector = selector
        return self

    def secondary(self, secondary: Secondary) -> "Declaration":
        secondary.verbs = _checked(secondary.verbs)
        if secondary.mapping != Mapping.NONE and WATCH not in secondary.verbs:
            secondary.verbs.append(WATCH)
        if secondary.prune and DELETE not in secondary.verbs:
            secondary.verbs.append(DELETE)
        self.secondaries.append(secondary)
        return self

    def owns(self, type: ResourceType, prune: bool = False) -> "Declaration":
        """Children of ``type`` this plugin applies and deletes, mapped back by owner references; with
        ``prune=True`` a set: those a reconcile no longer applies are deleted by the host."""
        return self.secondary(Secondary(type, [GET, LIST, APPLY, DELETE], "", Mapping.OWNER_REFERENCES, prune))

    def reads(self, type: ResourceType) -> "Declaration":
        """Objects of ``type`` this plugin only reads."""
        return self.secondary(Secondary(type, [GET, LIST]))

    def finalizer(self) -> "Declaration":
        """Ask the host to manage the finalizer ``kubewasm.dev/<name>`` and call ``finalize``."""
        self.managed_finalizer = True
        return self

    def resync(self, seconds: int) -> "Declaration":
        self.resync_seconds = seconds
        return self

    def concurrency(self, n: int) -> "Declaration":
        self.max_concurrency = n
        return self

    def schedule(self, cron: str) -> "Declaration":
        """Ask to be called on a cron schedule, in UTC (the reconciler's ``scheduled``): five fields as a
        CronJob's (``"0 3 * * *"``), six with seconds first, or a macro (``"@hourly"``)."""
        self.cron = cron
        return self

    def schema(self, schema: dict) -> "Declaration":
        """A JSON Schema the plugin's configuration must match."""
        self.config_schema = json.dumps(schema)
        return self


def _checked(verbs) -> list:
    for verb in verbs:
        if verb not in VERBS:
            raise ValueError(f"unknown verb {verb!r}: expected one of {', '.join(VERBS)}")
    return list(verbs)


@dataclass
class Event:
    """A Kubernetes event, about the primary unless ``regarding`` is set."""

    reason: str
    action: str
    note: str
    warning: bool = False
    regarding: Optional[tuple] = None  # (ResourceType, ObjectKey)


class ReconcileError(Exception):
    """Raise it (or any exception) to fail a reconcile: the host retries with backoff."""


class Outcome:
    """Desired actions and an optional requeue; chain the methods.

    Children are never pruned implicitly: an object you stop returning
    stays. Use :meth:`delete` to remove it.
    """

    def __init__(self) -> None:
        self.actions: list = []
        self.requeue_after_ms: Optional[int] = None
        self.needs_finalizer: Optional[bool] = None

    def apply(self, obj: dict, owned: bool = True, force: bool = True) -> "Outcome":
        """Server-side apply of ``obj``; ``owned`` makes the primary its
        controller owner. ``force=False`` refuses to take over fields another
        field manager (a person's ``kubectl apply``) set to other values: the
        apply fails with a conflict naming them, and the key is retried. For
        partial applies of objects people also edit."""
        self.actions.append(("apply", obj, owned, force))
        return self

    def apply_status(self, obj: dict) -> "Outcome":
        """Server-side apply of ``obj``'s status (identity and ``status`` are sent)."""
        self.actions.append(("apply-status", obj))
        return self

    def delete(self, type: ResourceType, key: ObjectKey, uid: Optional[str] = None,
               resource_version: Optional[str] = None) -> "Outcome":
        """Deletes the object, only while it has this ``uid`` (default: the
        uid the cache held for it) and this ``resource_version`` (default:
        any). A precondition that no longer holds fails the delete with a
        conflict, and the key is retried."""
        self.actions.append(("delete", type, key, (uid, resource_version)))
        return self

    def event(self, event: Event) -> "Outcome":
        self.actions.append(("event", event))
        return self

    def requeue_after(self, seconds: float) -> "Outcome":
        self.requeue_after_ms = int(seconds * 1000)
        return self

    def finalizer(self, needed: bool) -> "Outcome":
        """Whether this primary needs the managed finalizer (default: yes)."""
        self.needs_finalizer = needed
        return self

    # Inspection helpers for tests.
    def applied(self) -> list:
        return [a[1] for a in self.actions if a[0] == "apply"]

    def statuses(self) -> list:
        return [a[1] for a in self.actions if a[0] == "apply-status"]

    def deleted(self) -> list:
        return [(a[1], a[2]) for a in self.actions if a[0] == "delete"]

    def events(self) -> list:
        return [a[1] for a in self.actions if a[0] == "event"]

    def requeue(self) -> Optional[float]:
        """The requeue asked for, in seconds; ``None`` without one."""
        return None if self.requeue_after_ms is None else self.requeue_after_ms / 1000


def to_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
