"""tenant-bootstrap: every Namespace labelled ``kubewasm.dev/tenant=<name>``
gets a ServiceAccount ``tenant-admin``, a RoleBinding granting it the
``admin`` ClusterRole in that namespace, and a ConfigMap ``tenant-info``
holding the tenant name. An event on the Namespace says when they are
(re)created. Removing the label removes them.
"""

from kubewasm_guest import Declaration, Event, ObjectKey, Outcome, log
from kubewasm_guest.types import core_v1, rbac_v1

TENANT_LABEL = "kubewasm.dev/tenant"

NAMESPACE = core_v1.Namespace
SERVICE_ACCOUNT = core_v1.ServiceAccount
ROLE_BINDING = rbac_v1.RoleBinding
CONFIG_MAP = core_v1.ConfigMap

ADMIN = "tenant-admin"
INFO = "tenant-info"


def desired(namespace: str, tenant: str) -> list:
    """The three children of a tenant namespace, as (type, object)."""
    labels = {TENANT_LABEL: tenant, "app.kubernetes.io/managed-by": "kubewasm-tenant-bootstrap"}

    def meta(name):
        return {"name": name, "namespace": namespace, "labels": labels}

    return [
        (SERVICE_ACCOUNT, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(ADMIN)}),
        (ROLE_BINDING, {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta(ADMIN),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
            "subjects": [{"kind": "ServiceAccount", "name": ADMIN, "namespace": namespace}],
        }),
        (CONFIG_MAP, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(INFO), "data": {"tenant": tenant}}),
    ]


def controlled_by(obj: dict, uid: str) -> bool:
    refs = obj.get("metadata", {}).get("ownerReferences") or []
    return any(r.get("uid") == uid and r.get("controller") for r in refs)


class TenantBootstrap:
    def declare(self) -> Declaration:
        return (
            Declaration("tenant-bootstrap", "0.1.0", NAMESPACE)
            .owns(SERVICE_ACCOUNT)
            .owns(ROLE_BINDING)
            .owns(CONFIG_MAP)
        )

    def reconcile(self, ctx) -> Outcome:
        ns = ctx.primary()
        if ns is None:
            return Outcome()  # deleting a Namespace deletes what is in it
        name = ns["metadata"]["name"]
        uid = ns["metadata"].get("uid", "")
        tenant = (ns["metadata"].get("labels") or {}).get(TENANT_LABEL, "")
        out = Outcome()
        children = desired(name, tenant)
        if tenant:
            missing = [obj["kind"] for t, obj in children if ctx.get(t, ObjectKey(name, obj["metadata"]["name"])) is None]
            for _, obj in children:
                out.apply(obj)
            if missing:
                log.info("bootstrapping tenant", tenant=tenant, missing=",".join(missing))
                out.event(Event("TenantBootstrapped", "Apply", f"created {', '.join(missing)} for tenant {tenant}"))
        else:
            for t, obj in children:
                key = ObjectKey(name, obj["metadata"]["name"])
                existing = ctx.get(t, key)
                # Only what we made: a user's own `tenant-info` stays.
                if existing is not None and controlled_by(existing, uid):
                    out.delete(t, key)
        return out
