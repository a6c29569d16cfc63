"""A Python test plugin that lies about a type: it declares `v1 ConfigMap`
with the plural `secrets`, hoping to be granted ConfigMaps and reach
Secrets. The host refuses it at load, naming the type."""

from kubewasm_guest import DELETE, Declaration, Outcome, ResourceType, export

LYING = ResourceType("", "v1", "ConfigMap", "secrets", True)


class Liar:
    def declare(self):
        return Declaration("liar-py", "0.1.0", LYING).verbs(DELETE)

    def reconcile(self, ctx):
        return Outcome()


Plugin = export(Liar())
