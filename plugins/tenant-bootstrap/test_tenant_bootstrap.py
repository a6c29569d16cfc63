"""Unit tests, run natively: ``python -m unittest`` in this directory."""

import unittest

from kubewasm_guest import ObjectKey
from kubewasm_guest.testing import Harness
from tenant_bootstrap import CONFIG_MAP, TenantBootstrap

KEY = ObjectKey(None, "team-a")


def namespace(tenant=None):
    labels = {"kubewasm.dev/tenant": tenant} if tenant else {}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "uid": "ns-uid", "labels": labels}}


def child(kind, api_version, name, owner_uid="ns-uid"):
    return {"apiVersion": api_version, "kind": kind, "metadata": {
        "name": name, "namespace": "team-a",
        "ownerReferences": [{"apiVersion": "v1", "kind": "Namespace", "name": "team-a", "uid": owner_uid, "controller": True}]}}


ALL_CHILDREN = [
    child("ServiceAccount", "v1", "tenant-admin"),
    child("RoleBinding", "rbac.authorization.k8s.io/v1", "tenant-admin"),
    child("ConfigMap", "v1", "tenant-info"),
]


class TenantBootstrapTest(unittest.TestCase):
    def test_labelled_namespace_gets_its_children_and_an_event(self):
        out = Harness(TenantBootstrap()).object(namespace("acme")).reconcile(KEY)
        kinds = [o["kind"] for o in out.applied()]
        self.assertEqual(kinds, ["ServiceAccount", "RoleBinding", "ConfigMap"])
        binding = out.applied()[1]
        self.assertEqual(binding["roleRef"]["name"], "admin")
        self.assertEqual(binding["subjects"][0], {"kind": "ServiceAccount", "name": "tenant-admin", "namespace": "team-a"})
        self.assertEqual(out.applied()[2]["data"], {"tenant": "acme"})
        self.assertEqual(len(out.events()), 1)
        self.assertIn("for tenant acme", out.events()[0].note)

    def test_existing_children_are_kept_in_sync_without_an_event(self):
        h = Harness(TenantBootstrap()).object(namespace("acme"))
        for c in ALL_CHILDREN:
            h.object(c)
        out = h.reconcile(KEY)
        self.assertEqual(len(out.applied()), 3)
        self.assertEqual(out.events(), [])

    def test_removing_the_label_deletes_only_what_it_made(self):
        h = Harness(TenantBootstrap()).object(namespace())
        for c in ALL_CHILDREN[:2]:
            h.object(c)
        h.object(child("ConfigMap", "v1", "tenant-info", owner_uid="someone-else"))
        out = h.reconcile(KEY)
        self.assertEqual(out.applied(), [])
        self.assertEqual([k.name for _, k in out.deleted()], ["tenant-admin", "tenant-admin"])
        self.assertNotIn(CONFIG_MAP, [t for t, _ in out.deleted()])

    def test_deleted_namespace_needs_nothing(self):
        out = Harness(TenantBootstrap()).reconcile(KEY)
        self.assertEqual(out.actions, [])


if __name__ == "__main__":
    unittest.main()
