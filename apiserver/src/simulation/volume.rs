//! The simulated volume provisioner: a default StorageClass `standard`
//! (provisioner [`PROVISIONER`]); a PersistentVolumeClaim of it (or of no
//! class: the default one is written in) gets a PersistentVolume
//! `pvc-<uid>` of the size and access modes it asked for, bound to it both
//! ways, and both are `Bound`. Claims of another provisioner's classes are
//! left alone. A volume bound to no claim is made `Available`
//! ([`Unclaimed`]), as the real binder makes it. A claim being deleted
//! loses its protection finalizer once no running Pod mounts it
//! ([`ClaimProtection`]), a volume once it is not `Bound`
//! ([`VolumeProtection`]).

use kubewasm_core::ObjectKey;
use serde_json::{Value, json};

use super::client::{Client, ClientError, Kind, kinds};
use super::reconcile::{Next, Reconciler};
use crate::objects::{CLAIM_PROTECTION, VOLUME_PROTECTION, text_at};
use crate::store::{Event, Store};

/// The provisioner of the simulated StorageClass.
pub const PROVISIONER: &str = "kubewasm.dev/simulated";
/// The default StorageClass' name.
pub const DEFAULT_CLASS: &str = "standard";

/// The default StorageClass.
pub fn default_class() -> Value {
    json!({"metadata": {"name": DEFAULT_CLASS,
                        "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
           "provisioner": PROVISIONER, "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"})
}

/// The provisioner.
#[derive(Debug)]
pub struct Volumes {
    client: Client,
}

impl Volumes {
    /// A provisioner writing through `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

impl Reconciler for Volumes {
    fn primary(&self) -> Kind {
        kinds::PVC
    }

    async fn reconcile(&self, key: &ObjectKey) -> Result<Next, ClientError> {
        let store = self.client.store();
        let Some(claim) = store.get(&kinds::PVC.key(), key) else {
            return Ok(Next::Done);
        };
        if text_at(&claim, "/status/phase") == "Bound"
            || claim.pointer("/metadata/deletionTimestamp").is_some()
        {
            return Ok(Next::Done);
        }
        let ns = key.namespace.as_deref();
        let class = match text_at(&claim, "/spec/storageClassName") {
            "" => DEFAULT_CLASS,
            named => named,
        };
        let ours = store
            .get(&kinds::STORAGECLASS.key(), &ObjectKey::cluster(class))
            .is_some_and(|c| text_at(&c, "/provisioner") == PROVISIONER);
        if !ours {
            return Ok(Next::Done);
        }
        let volume = format!("pvc-{}", text_at(&claim, "/metadata/uid"));
        let size = claim
            .pointer("/spec/resources/requests/storage")
            .cloned()
            .unwrap_or_else(|| "1Gi".into());
        let modes = claim
            .pointer("/spec/accessModes")
            .cloned()
            .unwrap_or_else(|| json!(["ReadWriteOnce"]));
        let pv = json!({"metadata": {"name": volume, "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER}},
            "spec": {"capacity": {"storage": size}, "accessModes": modes, "persistentVolumeReclaimPolicy": "Delete",
                     "storageClassName": class, "volumeMode": "Filesystem",
                     "hostPath": {"path": format!("/var/lib/kubewasm/{volume}"), "type": ""},
                     "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": ns,
                                  "name": key.name, "uid": text_at(&claim, "/metadata/uid")}}});
        match self.client.create(kinds::PV, None, pv).await {
            Err(e) if e.code != 409 => return Err(e),
            _ => {}
        }
        self.client
            .patch(
                kinds::PV,
                None,
                &volume,
                Some("status"),
                &json!({"status": {"phase": "Bound"}}),
            )
            .await?;
        let bind = json!({"metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes",
                                                        "pv.kubernetes.io/bound-by-controller": "yes"}},
                          "spec": {"volumeName": volume, "storageClassName": class}});
        self.client
            .patch(kinds::PVC, ns, &key.name, None, &bind)
            .await?;
        let status = json!({"status": {"phase": "Bound", "accessModes": modes, "capacity": {"storage": size}}});
        self.client
            .patch(kinds::PVC, ns, &key.name, Some("status"), &status)
            .await?;
        Ok(Next::Done)
    }
}

/// The binder's part for volumes: one that is bound to no claim (`Pending`
/// as created) becomes `Available`, as the real binder writes it.
#[derive(Debug)]
pub struct Unclaimed {
    client: Client,
}

impl Unclaimed {
    /// A binder writing through `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

impl Reconciler for Unclaimed {
    fn primary(&self) -> Kind {
        kinds::PV
    }

    async fn reconcile(&self, key: &ObjectKey) -> Result<Next, ClientError> {
        let Some(volume) = self.client.store().get(&kinds::PV.key(), key) else {
            return Ok(Next::Done);
        };
        let pending = matches!(text_at(&volume, "/status/phase"), "" | "Pending");
        if pending
            && volume.pointer("/spec/claimRef").is_none()
            && volume.pointer("/metadata/deletionTimestamp").is_none()
        {
            self.client
                .write_status(kinds::PV, &volume, json!({"phase": "Available"}))
                .await?;
        }
        Ok(Next::Done)
    }
}

/// Takes `finalizer` off `object` (of `kind`) if it is being deleted and
/// holds it, unless `in_use`.
async fn unprotect(
    client: &Client,
    kind: Kind,
    object: &Value,
    finalizer: &str,
    in_use: impl FnOnce() -> bool,
) -> Result<Next, ClientError> {
    let finalizers: Vec<Value> = object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if object.pointer("/metadata/deletionTimestamp").is_none()
        || !finalizers.iter().any(|f| f == finalizer)
        || in_use()
    {
        return Ok(Next::Done);
    }
    let kept: Vec<Value> = finalizers.into_iter().filter(|f| f != finalizer).collect();
    client
        .patch_object(kind, object, &json!({"metadata": {"finalizers": kept}}))
        .await?;
    Ok(Next::Done)
}

/// The PVC protection controller: a claim being deleted is let go once no
/// Pod that has not finished mounts it.
#[derive(Debug)]
pub struct ClaimProtection {
    client: Client,
}

impl ClaimProtection {
    /// The controller writing through `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

/// The claims a Pod mounts.
fn claims_of(pod: &Value) -> impl Iterator<Item = &str> {
    pod.pointer("/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.pointer("/persistentVolumeClaim/claimName")?.as_str())
}

impl Reconciler for ClaimProtection {
    fn primary(&self) -> Kind {
        kinds::PVC
    }

    /// A Pod concerns the claims it mounts.
    fn keys(&self, _store: &Store, event: &Event) -> Vec<ObjectKey> {
        if event.resource == kinds::POD.key() {
            let namespace = event
                .object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .map(str::to_owned);
            return claims_of(&event.object)
                .map(|claim| ObjectKey {
                    namespace: namespace.clone(),
                    name: claim.to_owned(),
                })
                .collect();
        }
        super::reconcile::own_or_owner(self.primary(), event)
    }

    async fn reconcile(&self, key: &ObjectKey) -> Result<Next, ClientError> {
        let store = self.client.store();
        let Some(claim) = store.get(&kinds::PVC.key(), key) else {
            return Ok(Next::Done);
        };
        let in_use = || {
            store
                .objects(&kinds::POD.key(), key.namespace.as_deref())
                .iter()
                .filter(|p| !matches!(text_at(p, "/status/phase"), "Succeeded" | "Failed"))
                .any(|p| claims_of(p).any(|c| c == key.name))
        };
        unprotect(&self.client, kinds::PVC, &claim, CLAIM_PROTECTION, in_use).await
    }
}

/// The PV protection controller: a volume being deleted is let go once it
/// is not `Bound`.
#[derive(Debug)]
pub struct VolumeProtection {
    client: Client,
}

impl VolumeProtection {
    /// The controller writing through `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

impl Reconciler for VolumeProtection {
    fn primary(&self) -> Kind {
        kinds::PV
    }

    async fn reconcile(&self, key: &ObjectKey) -> Result<Next, ClientError> {
        let Some(volume) = self.client.store().get(&kinds::PV.key(), key) else {
            return Ok(Next::Done);
        };
        let bound = text_at(&volume, "/status/phase") == "Bound";
        unprotect(&self.client, kinds::PV, &volume, VOLUME_PROTECTION, || {
            bound
        })
        .await
    }
}
