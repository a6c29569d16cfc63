//! What the host tells of a plugin resource: its state as the host tracks
//! it ([`Tracked`]), the status that state shows (phase, `Ready` and
//! `Degraded` conditions, counters), written with server-side apply, and
//! a refusal's `Warning` event.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kubewasm_runtime::action::{EventBody, EventType};
use serde_json::json;

use super::spec::{Generation, ResourceId};
use super::types::{ClusterPluginResource, Phase, PluginResource, PluginStatus};
use crate::loader::{Refused, SpecError};
use crate::oci::OciError;
use crate::rights::{Reads, RightsError};

/// The field manager of status writes.
const MANAGER: &str = "kubewasm";

/// What the host does of one resource.
#[derive(Debug, Default)]
pub(super) struct Tracked {
    pub(super) uid: String,
    /// The generation last acted on (a load started, or stopped for
    /// `suspend`).
    pub(super) generation: Option<i64>,
    /// The generation the outcome below is of (`None` while it loads).
    pub(super) observed: Option<i64>,
    /// Whether a load of `generation` is in flight (its key processing
    /// until it ends).
    pub(super) loading: bool,
    /// The version running: its artifact's digest.
    pub(super) running: Option<String>,
    pub(super) suspended: bool,
    /// The latest generation's refusal.
    pub(super) refused: Option<Refusal>,
    /// What the running version reads (a tenant's account must be allowed).
    pub(super) reads: Option<Reads>,
    /// The RBAC epoch ([`super::watch::rbac`]) at which the tenant's
    /// rights were last reviewed (by a load, or a check of the running
    /// version); `None`: not yet.
    pub(super) rights_epoch: Option<u64>,
}

/// Why the latest generation was refused, as its status says it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Refusal {
    /// The `Degraded` condition's reason.
    pub(super) reason: &'static str,
    /// What went wrong.
    pub(super) message: String,
    /// Whether it may pass on its own (a registry or a pull secret not
    /// reachable yet): the load is tried again with backoff.
    pub(super) may_pass: bool,
    /// Whether it may pass when RBAC changes (the tenant's account lacked
    /// a read): the load is tried again then.
    pub(super) on_rbac: bool,
    /// Whether the directory ran a plugin of its name: the load is tried
    /// again once the name is freed.
    pub(super) name_taken: bool,
    /// The epoch of the cluster's types at which a type it declares was
    /// not served, if that is why: the load is tried again at a later one.
    pub(super) unserved_at: Option<u64>,
}

impl Refusal {
    /// How `refused` reads in a status.
    pub(super) fn of(refused: &Refused) -> Self {
        let reason = match refused {
            Refused::Load(kubewasm_runtime::LoadError::NotGranted(_)) => "ExceedsGrants",
            Refused::Load(_) | Refused::Read(_) => "ComponentRefused",
            Refused::Oci(OciError::Reference { .. }) => "InvalidSpec",
            Refused::Oci(_) => "PullFailed",
            Refused::Config { .. } => "ConfigRefused",
            Refused::Grants(_) | Refused::NoGrants { .. } => "InvalidGrants",
            Refused::NameTaken { .. } => "NameTaken",
            Refused::Spec(SpecError::PullSecret { .. }) => "PullSecretUnreadable",
            Refused::Spec(_) => "InvalidSpec",
            Refused::Rights(RightsError::Missing(_)) => "ReadsForbidden",
            Refused::Rights(RightsError::Review { .. }) => "AccessReviewFailed",
            Refused::Signature(_) => "SignatureRefused",
            Refused::Unserved { .. } => "TypeNotServed",
            Refused::Cancelled => "Cancelled",
        };
        Self {
            reason,
            message: refused.to_string(),
            may_pass: refused.may_pass(),
            name_taken: matches!(refused, Refused::NameTaken { .. }),
            on_rbac: matches!(refused, Refused::Rights(RightsError::Missing(_))),
            unserved_at: refused.unserved_at(),
        }
    }
}

impl Tracked {
    /// The status a tracked resource should show; conditions keep their
    /// `lastTransitionTime` while their status stays.
    pub(super) fn status(&self, name: &str, previous: &PluginStatus) -> PluginStatus {
        let tracked = self;
        let phase = if tracked.suspended {
            Phase::Suspended
        } else if tracked.running.is_some() {
            Phase::Running
        } else if tracked.observed.is_some() && tracked.refused.is_some() {
            Phase::Failed
        } else {
            Phase::Pending
        };
        let observed = tracked.observed.or(previous.observed_generation);
        let ready = match phase {
            Phase::Running => ("True", "Running", "a version runs and serves".to_owned()),
            Phase::Suspended => ("False", "Suspended", "spec.suspend is set".to_owned()),
            Phase::Failed => (
                "False",
                "Refused",
                "no version runs: the latest was refused".to_owned(),
            ),
            Phase::Pending => ("False", "Loading", "its first version loads".to_owned()),
        };
        let degraded = match &tracked.refused {
            Some(refusal) => ("True", refusal.reason, refusal.message.clone()),
            None => (
                "False",
                "AsExpected",
                "the latest generation runs".to_owned(),
            ),
        };
        let condition = |kind: &str, (status, reason, message): (&str, &str, String)| {
            let since = previous
                .conditions
                .iter()
                .find(|c| c.type_ == kind && c.status == status)
                .map(|c| c.last_transition_time.clone());
            Condition {
                type_: kind.to_owned(),
                status: status.to_owned(),
                reason: reason.to_owned(),
                message,
                observed_generation: observed,
                last_transition_time: since.unwrap_or_else(|| Time(jiff::Timestamp::now())),
            }
        };
        PluginStatus {
            phase: Some(phase),
            digest: tracked.running.clone().filter(|d| !d.is_empty()),
            plugin_name: Some(name.to_owned()),
            observed_generation: observed,
            conditions: vec![condition("Ready", ready), condition("Degraded", degraded)],
            last_error: tracked.refused.as_ref().map(|r| r.message.clone()),
            reconciles: previous.reconciles,
            failures: previous.failures,
        }
    }
}

/// Writes `status` to the resource `id` (server-side apply on the status
/// subresource, field manager `kubewasm`).
pub(super) async fn write(
    client: kube::Client,
    id: &ResourceId,
    status: &PluginStatus,
) -> Result<(), kube::Error> {
    let resource = match id.namespace {
        Some(_) => ApiResource::erase::<PluginResource>(&()),
        None => ApiResource::erase::<ClusterPluginResource>(&()),
    };
    let api: Api<DynamicObject> = match &id.namespace {
        Some(namespace) => Api::namespaced_with(client, namespace, &resource),
        None => Api::all_with(client, &resource),
    };
    let patch = json!({
        "apiVersion": resource.api_version,
        "kind": id.kind(),
        "status": status,
    });
    api.patch_status(
        &id.name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map(|_| ())
}

/// Posts a `Warning` event regarding the resource a refused load was of, in
/// its namespace (a ClusterPlugin's in `default`).
pub(super) async fn report(client: kube::Client, origin: Generation, refusal: Refusal) {
    let id = &origin.id;
    let namespace = id.namespace.clone().unwrap_or_else(|| "default".to_owned());
    let mut regarding = json!({
        "apiVersion": "kubewasm.dev/v1alpha1", "kind": id.kind(), "name": id.name,
        "uid": origin.uid,
    });
    if let Some(own) = &id.namespace {
        regarding["namespace"] = own.clone().into();
    }
    let event = EventBody {
        regarding,
        namespace: &namespace,
        controller: "kubewasm.dev/host",
        event_type: EventType::Warning,
        reason: refusal.reason,
        action: "Load",
        note: refusal.message,
    }
    .object(jiff::Timestamp::now());
    let api = Api::<DynamicObject>::namespaced_with(
        client,
        &namespace,
        &ApiResource::erase::<k8s_openapi::api::events::v1::Event>(&()),
    );
    let posted = match serde_json::from_value::<DynamicObject>(event) {
        Ok(event) => api.create(&PostParams::default(), &event).await,
        Err(error) => Err(kube::Error::SerdeError(error)),
    };
    if let Err(error) = posted {
        tracing::debug!(resource = %id, %error, "refusal event not written");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_should_keep_their_transition_time_while_they_hold() {
        let mut tracked = Tracked {
            uid: "u".into(),
            generation: Some(2),
            observed: Some(2),
            running: Some("sha256:abc".into()),
            ..Tracked::default()
        };
        let first = tracked.status("p", &PluginStatus::default());
        assert_eq!(first.phase, Some(Phase::Running));
        assert_eq!(first.observed_generation, Some(2));
        let again = tracked.status("p", &first);
        assert_eq!(again, first, "nothing changed: nothing to write");
        tracked.refused = Some(Refusal {
            reason: "ExceedsGrants",
            message: "declares more".into(),
            may_pass: false,
            on_rbac: false,
            name_taken: false,
            unserved_at: None,
        });
        let degraded = tracked.status("p", &first);
        assert_eq!(
            degraded.phase,
            Some(Phase::Running),
            "the old version serves"
        );
        let find = |s: &PluginStatus, kind: &str| {
            s.conditions
                .iter()
                .find(|c| c.type_ == kind)
                .cloned()
                .expect("condition")
        };
        assert_eq!(find(&degraded, "Degraded").status, "True");
        assert_eq!(find(&degraded, "Degraded").reason, "ExceedsGrants");
        assert_eq!(
            find(&degraded, "Ready").last_transition_time,
            find(&first, "Ready").last_transition_time
        );
        tracked.running = None;
        assert_eq!(tracked.status("p", &degraded).phase, Some(Phase::Failed));
    }
}
