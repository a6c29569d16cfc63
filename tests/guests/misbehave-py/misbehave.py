"""A Python test plugin that misbehaves on request (config `mode`):
`ok` applies a copy of its ConfigMap, `raise` raises, `loop` never returns,
`oom` allocates until the memory limit stops it, `crash` raises inside the
component's own glue (a trap, not a failure), `sleep` sleeps for an hour,
`flood-log` logs until stopped, `flood-actions` returns 1,200 applies,
`bad-name` applies a ConfigMap named `a/b`, `system-namespace` applies one into
`kube-system`, `lie-plural` reads its ConfigMap through a type claiming the
plural `secrets` and applies `lied-<found>`, `list-pods` lists Pods (declared
with the selector `misbehave=visible`), gets `default/hidden` and applies
`listed-<names>-hidden-<found or denied>`, `language` returns an event whose
note is `python`. Its configuration must match its
schema: an object with a string `mode`."""

import time

from kubewasm_guest import APPLY, GET, LIST, Declaration, Event, ObjectKey, Outcome, ReconcileError, ResourceType, Secondary, export, log

CONFIG_MAP = ResourceType.core("v1", "ConfigMap", "configmaps")
POD = ResourceType.core("v1", "Pod", "pods")
SCHEMA = {"type": "object", "required": ["mode"], "properties": {"mode": {"type": "string"}}}


def _cm(name, namespace=None):
    meta = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


class Misbehave:
    def declare(self):
        return (Declaration("misbehave-py", "0.1.0", CONFIG_MAP).verbs(APPLY)
                .secondary(Secondary(POD, [GET, LIST], "misbehave=visible")).schema(SCHEMA))

    def reconcile(self, ctx):
        mode = ctx.config.get("mode")
        if mode == "language":
            return Outcome().event(Event("Language", "Reconcile", "python"))
        if mode == "ok":
            cm = ctx.primary()
            copy = {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": cm["metadata"]["name"] + "-copy"}, "data": cm.get("data", {})}
            return Outcome().apply(copy)
        if mode == "raise":
            raise ValueError("misbehave-py was asked to raise")
        if mode == "loop":
            n = 0
            while True:
                n += 1
        if mode == "oom":
            hoard = []
            while True:
                hoard.append(bytearray(1 << 20))
        if mode == "sleep":
            time.sleep(3600)
            return Outcome()
        if mode == "flood-log":
            while True:
                log.info("flood", x="y")
        if mode == "flood-actions":
            outcome = Outcome()
            for i in range(1_200):
                outcome.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}"}})
            return outcome
        if mode == "bad-name":
            return Outcome().apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a/b"}}, owned=False)
        if mode == "system-namespace":
            return Outcome().apply(_cm("planted", "kube-system"), owned=False)
        if mode == "lie-plural":
            lying = ResourceType("", "v1", "ConfigMap", "secrets", False)
            found = ctx.get(lying, ctx.key) is not None
            return Outcome().apply(_cm(f"lied-{str(found).lower()}"))
        if mode == "list-pods":
            listed = "-".join(p["metadata"]["name"] for p in ctx.list(POD))
            try:
                hidden = str(ctx.get(POD, ObjectKey("default", "hidden")) is not None).lower()
            except ReconcileError:
                hidden = "denied"
            return Outcome().apply(_cm(f"listed-{listed}-hidden-{hidden}"))
        raise KeyError(f"unknown mode {mode!r}")


Plugin = export(Misbehave())
