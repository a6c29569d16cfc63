//! Plugin resources as the tests drive them: the CRDs installed, `Plugin`
//! objects written, their statuses read, tenants' accounts and rights.

use serde_json::Value;

use crate::host::{Host, apply, get_json};
use crate::{Apiserver, workspace_root};

/// An API server with the plugin CRDs installed from `deploy/crds.yaml`.
pub fn server_with_crds(flags: &[&str]) -> Apiserver {
    let server = Apiserver::start_with(flags);
    apply(&server, &workspace_root().join("deploy/crds.yaml"));
    server
}

/// A `Plugin` in `namespace` running `source`, with more of its spec
/// (YAML lines indented by two) after `source`.
pub fn plugin(namespace: &str, name: &str, source: &str, spec: &str) -> String {
    format!(
        "apiVersion: kubewasm.dev/v1alpha1\nkind: Plugin\nmetadata:\n  name: {name}\n  \
         namespace: {namespace}\nspec:\n  source: {source}\n{spec}"
    )
}

/// The status of the Plugin `namespace/name`.
pub fn status(server: &Apiserver, namespace: &str, name: &str) -> Value {
    get_json(server, &["plugin", name, "-n", namespace])
        .map(|p| p["status"].clone())
        .unwrap_or(Value::Null)
}

/// Whether `object` (a Pod, a Node) has its `Ready` condition `True` and is
/// not being deleted.
pub fn ready(object: &Value) -> bool {
    object["metadata"]["deletionTimestamp"].is_null()
        && condition(&object["status"], "Ready")["status"] == "True"
}

/// The condition `kind` of a status.
pub fn condition(status: &Value, kind: &str) -> Value {
    status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == kind)
        .cloned()
        .unwrap_or(Value::Null)
}

/// The number a metric series shows, 0 when absent.
pub fn counted(host: &Host, series: &str) -> f64 {
    host.metric(series).unwrap_or(0.0)
}

/// The ServiceAccount `kubewasm-tenant` of `namespace` (the account a
/// tenant's plugin acts as with `--impersonate-tenants`), with a Role of
/// `verbs` on `resources` bound to it.
pub fn tenant_rights(server: &Apiserver, namespace: &str, verbs: &str, resources: &str) {
    server.ok(&[
        "-n",
        namespace,
        "create",
        "serviceaccount",
        "kubewasm-tenant",
    ]);
    tenant_role(server, namespace, "kubewasm-tenant", verbs, resources);
}

/// A Role `name` in `namespace` with `verbs` on `resources`, and its
/// RoleBinding `name` to the tenant's ServiceAccount `kubewasm-tenant`.
pub fn tenant_role(server: &Apiserver, namespace: &str, name: &str, verbs: &str, resources: &str) {
    server.ok(&[
        "-n",
        namespace,
        "create",
        "role",
        name,
        &format!("--verb={verbs}"),
        &format!("--resource={resources}"),
    ]);
    server.ok(&[
        "-n",
        namespace,
        "create",
        "rolebinding",
        name,
        &format!("--role={name}"),
        &format!("--serviceaccount={namespace}:kubewasm-tenant"),
    ]);
}
