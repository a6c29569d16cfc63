//! How the built-in controllers write: as API clients of the server they
//! run in, through [`Api::handle`] (no socket), so that every write they
//! make passes what a user's does: names from `generateName`, uids,
//! generations, field managers, validation, the conversion of views. They
//! act as `system:kube-controller-manager` under its field manager (the
//! simulated kubelet as `kubelet`), as the real ones do.
//! Reads come from the store directly, as an informer's cache would.

use std::collections::HashMap;

use bytes::Bytes;
use serde_json::Value;

use crate::http::api::{Api, Reply, Request};
use crate::http::auth::{Impersonation, User};

/// A built-in type the controllers write: where it is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kind {
    /// API group; empty for the core group.
    pub group: &'static str,
    /// Version served.
    pub version: &'static str,
    /// Plural resource name.
    pub plural: &'static str,
    /// Kind.
    pub kind: &'static str,
}

impl Kind {
    /// Where its objects are stored.
    pub fn key(&self) -> crate::store::ResourceKey {
        crate::store::ResourceKey::new(self.group, self.plural)
    }

    /// Its `apiVersion`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The path of its collection in `namespace` (or cluster-wide).
    fn path(&self, namespace: Option<&str>) -> String {
        let root = if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        match namespace {
            Some(ns) => format!("{root}/namespaces/{ns}/{}", self.plural),
            None => format!("{root}/{}", self.plural),
        }
    }
}

/// The built-in types the controllers write.
pub mod kinds {
    use super::Kind;

    const fn kind(
        group: &'static str,
        version: &'static str,
        plural: &'static str,
        kind: &'static str,
    ) -> Kind {
        Kind {
            group,
            version,
            plural,
            kind,
        }
    }

    /// Pods.
    pub const POD: Kind = kind("", "v1", "pods", "Pod");
    /// Nodes.
    pub const NODE: Kind = kind("", "v1", "nodes", "Node");
    /// Services.
    pub const SERVICE: Kind = kind("", "v1", "services", "Service");
    /// PersistentVolumeClaims.
    pub const PVC: Kind = kind("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim");
    /// PersistentVolumes.
    pub const PV: Kind = kind("", "v1", "persistentvolumes", "PersistentVolume");
    /// Deployments.
    pub const DEPLOYMENT: Kind = kind("apps", "v1", "deployments", "Deployment");
    /// ReplicaSets.
    pub const REPLICASET: Kind = kind("apps", "v1", "replicasets", "ReplicaSet");
    /// StatefulSets.
    pub const STATEFULSET: Kind = kind("apps", "v1", "statefulsets", "StatefulSet");
    /// DaemonSets.
    pub const DAEMONSET: Kind = kind("apps", "v1", "daemonsets", "DaemonSet");
    /// Jobs.
    pub const JOB: Kind = kind("batch", "v1", "jobs", "Job");
    /// CronJobs.
    pub const CRONJOB: Kind = kind("batch", "v1", "cronjobs", "CronJob");
    /// EndpointSlices.
    pub const ENDPOINTSLICE: Kind =
        kind("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice");
    /// ClusterRoles.
    pub const CLUSTERROLE: Kind = kind(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterroles",
        "ClusterRole",
    );
    /// StorageClasses.
    pub const STORAGECLASS: Kind = kind("storage.k8s.io", "v1", "storageclasses", "StorageClass");
    /// PodDisruptionBudgets.
    pub const PDB: Kind = kind(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
    );
    /// ResourceQuotas.
    pub const RESOURCEQUOTA: Kind = kind("", "v1", "resourcequotas", "ResourceQuota");
    /// HorizontalPodAutoscalers.
    pub const HPA: Kind = kind(
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
    );
}

/// An object's namespace (none when cluster-scoped) and name.
fn namespace_and_name(object: &Value) -> (Option<&str>, &str) {
    let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
    (
        text("/metadata/namespace"),
        text("/metadata/name").unwrap_or_default(),
    )
}

/// A write the server refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{method} {path}: {code} {message}")]
pub struct ClientError {
    /// The request's method.
    pub method: &'static str,
    /// The request's path.
    pub path: String,
    /// The HTTP status.
    pub code: u16,
    /// The Status' message.
    pub message: String,
}

impl ClientError {
    /// Whether the object was not there (already gone, or its namespace).
    pub fn not_found(&self) -> bool {
        self.code == 404
    }
}

/// An in-process client of the API, for one controller.
#[derive(Clone, Debug)]
pub struct Client {
    api: Api,
    manager: &'static str,
}

impl Client {
    /// A client writing as `manager` (its field manager).
    pub fn new(api: Api, manager: &'static str) -> Self {
        Self { api, manager }
    }

    /// The store, for reads.
    pub fn store(&self) -> &crate::store::Store {
        self.api.store()
    }

    async fn send(
        &self,
        method: &'static str,
        path: String,
        content_type: &str,
        body: Option<&Value>,
    ) -> Result<Value, ClientError> {
        let body = body.map_or_else(Bytes::new, |b| Bytes::from(b.to_string()));
        let query = HashMap::from([("fieldManager".to_owned(), self.manager.to_owned())]);
        let request = Request {
            method,
            path: &path,
            query,
            content_type,
            accept: "application/json",
            user_agent: "kube-controller-manager",
            body,
            user: User {
                name: "system:kube-controller-manager".into(),
                uid: None,
                groups: vec![
                    crate::http::auth::MASTERS.to_owned(),
                    crate::http::auth::AUTHENTICATED.to_owned(),
                ],
            },
            impersonate: Impersonation::default(),
        };
        match self.api.handle(request).await.warnings().1 {
            Reply::Json(code, value) if code < 300 => Ok(value),
            Reply::Json(code, status) => Err(ClientError {
                method,
                code,
                message: status["message"].as_str().unwrap_or("").to_owned(),
                path,
            }),
            _ => Err(ClientError {
                method,
                code: 500,
                message: "unexpected reply".into(),
                path,
            }),
        }
    }

    /// The object at `key`, unless it is gone or being deleted (what a
    /// controller acts on).
    pub fn live(
        &self,
        kind: Kind,
        key: &kubewasm_core::ObjectKey,
    ) -> Option<std::sync::Arc<Value>> {
        self.store()
            .get(&kind.key(), key)
            .filter(|o| o.pointer("/metadata/deletionTimestamp").is_none())
    }

    /// Merge-patches `object` (found by its own namespace and name).
    ///
    /// # Errors
    /// What the server refused.
    pub async fn patch_object(
        &self,
        kind: Kind,
        object: &Value,
        patch: &Value,
    ) -> Result<(), ClientError> {
        let (namespace, name) = namespace_and_name(object);
        self.patch(kind, namespace, name, None, patch)
            .await
            .map(drop)
    }

    /// Deletes `object` (found by its own namespace and name), in the
    /// background; gone already is not an error.
    ///
    /// # Errors
    /// What the server refused.
    pub async fn delete_object(&self, kind: Kind, object: &Value) -> Result<(), ClientError> {
        let (namespace, name) = namespace_and_name(object);
        self.delete(kind, namespace, name, None).await
    }

    /// Writes `status` into `object`'s status subresource, unless every
    /// field of it holds already (an absent field holds a null): a
    /// reconcile that changes nothing writes nothing.
    ///
    /// # Errors
    /// What the server refused.
    pub async fn write_status(
        &self,
        kind: Kind,
        object: &Value,
        status: Value,
    ) -> Result<(), ClientError> {
        let current = object.get("status");
        let holds = status.as_object().is_some_and(|fields| {
            fields.iter().all(|(field, value)| {
                current.and_then(|c| c.get(field)).unwrap_or(&Value::Null) == value
            })
        });
        if holds {
            return Ok(());
        }
        let (namespace, name) = namespace_and_name(object);
        let patch = serde_json::json!({"status": status});
        self.patch(kind, namespace, name, Some("status"), &patch)
            .await
            .map(drop)
    }

    /// Creates `object` (with `generateName` if it has no name).
    ///
    /// # Errors
    /// What the server refused.
    pub async fn create(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        mut object: Value,
    ) -> Result<Value, ClientError> {
        object["apiVersion"] = kind.api_version().into();
        object["kind"] = kind.kind.into();
        self.send(
            "POST",
            kind.path(namespace),
            "application/json",
            Some(&object),
        )
        .await
    }

    /// Merge-patches the object, or its `subresource` (`status`).
    ///
    /// # Errors
    /// What the server refused.
    pub async fn patch(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        patch: &Value,
    ) -> Result<Value, ClientError> {
        let mut path = format!("{}/{name}", kind.path(namespace));
        if let Some(sub) = subresource {
            path = format!("{path}/{sub}");
        }
        self.send("PATCH", path, "application/merge-patch+json", Some(patch))
            .await
    }

    /// Posts `body` to the object's `subresource` (`binding`).
    ///
    /// # Errors
    /// What the server refused.
    pub async fn post(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        name: &str,
        subresource: &str,
        body: &Value,
    ) -> Result<Value, ClientError> {
        let path = format!("{}/{name}/{subresource}", kind.path(namespace));
        self.send("POST", path, "application/json", Some(body))
            .await
    }

    /// Deletes the object; `grace` 0 removes a terminating Pod at once.
    /// Gone already is not an error.
    ///
    /// # Errors
    /// What the server refused.
    pub async fn delete(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        name: &str,
        grace: Option<i64>,
    ) -> Result<(), ClientError> {
        let options = match grace {
            Some(grace) => serde_json::json!({"gracePeriodSeconds": grace}),
            None => serde_json::json!({"propagationPolicy": "Background"}),
        };
        match self
            .send(
                "DELETE",
                format!("{}/{name}", kind.path(namespace)),
                "application/json",
                Some(&options),
            )
            .await
        {
            Err(e) if e.not_found() => Ok(()),
            other => other.map(drop),
        }
    }
}
