"""A Python test plugin that misbehaves on request (config `mode`):
`ok` applies a copy of its ConfigMap, `raise` raises, `loop` never returns,
`oom` allocates until the memory limit stops it, `crash` raises inside the
component's own glue (a trap, not a failure), `sleep` sleeps for an hour,
`flood-log` logs until stopped, `flood-actions` returns 5,000 applies,
`bad-name` applies a ConfigMap named `a/b`."""

import time

from kubewasm_guest import APPLY, Declaration, Outcome, ResourceType, export, log

CONFIG_MAP = ResourceType.core("v1", "ConfigMap", "configmaps")


class Misbehave:
    def declare(self):
        return Declaration("misbehave-py", "0.1.0", CONFIG_MAP).verbs(APPLY)

    def reconcile(self, ctx):
        mode = ctx.config.get("mode")
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
            for i in range(5_000):
                outcome.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}"}})
            return outcome
        if mode == "bad-name":
            return Outcome().apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a/b"}}, owned=False)
        raise KeyError(f"unknown mode {mode!r}")


Plugin = export(Misbehave())
