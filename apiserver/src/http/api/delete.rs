//! Deletes: graceful (finalizers, propagation policies) and immediate,
//! of one object or of a collection.

use std::sync::Arc;

use serde_json::{Value, json};

use kubewasm_core::ObjectKey;

use super::Api;
use super::filter::Filter;
use super::request::{Reply, Request};
use super::route::Target;
use super::shape::{list_item, rv_of, shown};
use crate::http::error::ApiError;
use crate::objects::{begin_deletion, metadata_mut, text_at};
use crate::store::ListAt;
use kubewasm_types::crd;
use kubewasm_types::info::ResourceInfo;

/// Namespaces no delete removes, as a real server's admission has it.
const IMMORTAL_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];

/// The types whose delete answers the deleted object rather than a
/// `Status`, as their registries in Kubernetes v1.37 do
/// (`ReturnDeletedObject`); (group, plural).
const RETURN_DELETED: [(&str, &str); 19] = [
    ("", "pods"),
    ("", "services"),
    ("", "serviceaccounts"),
    ("", "persistentvolumeclaims"),
    ("", "persistentvolumes"),
    ("", "namespaces"),
    ("", "resourcequotas"),
    ("", "podtemplates"),
    ("storage.k8s.io", "csidrivers"),
    ("storage.k8s.io", "csinodes"),
    ("storage.k8s.io", "storageclasses"),
    ("storage.k8s.io", "volumeattachments"),
    ("storage.k8s.io", "volumeattributesclasses"),
    ("resource.k8s.io", "deviceclasses"),
    ("resource.k8s.io", "devicetaintrules"),
    ("resource.k8s.io", "resourceclaims"),
    ("resource.k8s.io", "resourceclaimtemplates"),
    ("resource.k8s.io", "resourceslices"),
    ("resource.k8s.io", "resourcepoolstatusrequests"),
];

/// The types whose objects orphan their dependents when a delete names no
/// propagation, for backward compatibility (their registry strategies'
/// `DefaultGarbageCollectionPolicy`: batch/v1 Jobs, core/v1
/// ReplicationControllers); every other type deletes them in the
/// background.
const ORPHAN_BY_DEFAULT: [(&str, &str); 2] = [("batch", "jobs"), ("", "replicationcontrollers")];

/// What a real server warns of when a Job's delete leaves its Pods to the
/// default (`deleteOptionWarnings` of the Job registry).
const JOB_PODS_KEPT: &str = "child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning";

/// What a delete asks for: `DeleteOptions` from the body, or the query.
#[derive(Debug, Default)]
struct DeleteOptions {
    dry_run: bool,
    /// `propagationPolicy`, or what the deprecated `orphanDependents` says;
    /// `None` when the request says neither.
    policy: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    /// `gracePeriodSeconds`, if given.
    grace: Option<i64>,
}

impl DeleteOptions {
    fn of(request: &Request<'_>) -> Result<Self, ApiError> {
        let body = request.document_or_empty()?;
        let text = |pointer: &str| {
            body.pointer(pointer)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let orphan = body
            .get("orphanDependents")
            .and_then(Value::as_bool)
            .or_else(|| request.query.get("orphanDependents")?.parse().ok());
        let policy =
            text("/propagationPolicy").or_else(|| request.query.get("propagationPolicy").cloned());
        if let (Some(_), Some(policy)) = (orphan, &policy) {
            return Err(ApiError::invalid_kind(
                "DeleteOptions.meta.k8s.io",
                "",
                format!(
                    "propagationPolicy: Invalid value: \"{policy}\": orphanDependents and deletionPropagation cannot be both set"
                ),
            ));
        }
        let policy = policy.or_else(|| {
            orphan.map(|orphan| if orphan { "Orphan" } else { "Background" }.to_owned())
        });
        if let Some(p) = &policy
            && !matches!(p.as_str(), "Background" | "Foreground" | "Orphan")
        {
            return Err(ApiError::bad_request(format!(
                "propagationPolicy: Unsupported value: \"{p}\": supported values: \"Background\", \"Foreground\", \"Orphan\""
            )));
        }
        Ok(Self {
            dry_run: Api::dry_run(&request.query)
                || body
                    .get("dryRun")
                    .and_then(Value::as_array)
                    .is_some_and(|d| d.iter().any(|v| v == "All")),
            policy,
            uid: text("/preconditions/uid"),
            resource_version: text("/preconditions/resourceVersion"),
            grace: body
                .get("gracePeriodSeconds")
                .and_then(Value::as_i64)
                .or_else(|| request.query.get("gracePeriodSeconds")?.parse().ok()),
        })
    }
}

impl DeleteOptions {
    /// The propagation of a delete of an object of `info` holding
    /// `finalizers`: the one asked for; else the one its finalizers say
    /// (an `orphan` or `foregroundDeletion` left by an earlier delete);
    /// else the type's default (`ORPHAN_BY_DEFAULT`, else `Background`).
    fn policy(&self, info: &ResourceInfo, finalizers: &[Value]) -> &str {
        if let Some(policy) = &self.policy {
            return policy;
        }
        if finalizers.iter().any(|f| f == "orphan") {
            "Orphan"
        } else if finalizers.iter().any(|f| f == "foregroundDeletion") {
            "Foreground"
        } else if ORPHAN_BY_DEFAULT.contains(&(info.group.as_str(), info.plural.as_str())) {
            "Orphan"
        } else {
            "Background"
        }
    }

    /// `reply`, with the warning a real server adds to a delete of Jobs
    /// that leaves their Pods to the default.
    fn warned(&self, info: &ResourceInfo, reply: Reply) -> Reply {
        if self.policy.is_none() && info.group == "batch" && info.plural == "jobs" {
            Reply::Warned(vec![JOB_PODS_KEPT.to_owned()], Box::new(reply))
        } else {
            reply
        }
    }
}

/// What a delete did.
enum Deleted {
    /// Marked for deletion: finalizers (or the namespace controller) finish.
    Marked(Arc<Value>),
    /// Removed; its last state.
    Gone(Arc<Value>),
}

impl Api {
    pub(super) fn delete(
        &self,
        target: &Target,
        name: &str,
        request: &Request<'_>,
    ) -> Result<Reply, ApiError> {
        let info = &target.info;
        let options = DeleteOptions::of(request)?;
        let deleted = match self.delete_object(info, &self.key(target, name), name, &options) {
            Ok(deleted) => deleted,
            // The type's warning goes with a refusal too: a real registry
            // gives it before it looks for the object.
            Err(error) => {
                return Ok(options.warned(info, Reply::Json(error.code, error.status())));
            }
        };
        let reply = match deleted {
            Deleted::Marked(object) => Reply::Json(200, shown(info, &object)),
            Deleted::Gone(last)
                if RETURN_DELETED.contains(&(info.group.as_str(), info.plural.as_str())) =>
            {
                Reply::Json(200, shown(info, &last))
            }
            Deleted::Gone(last) => {
                let mut details = json!({"name": name, "group": info.group, "kind": info.plural,
                                         "uid": last.pointer("/metadata/uid").cloned().unwrap_or(Value::Null)});
                crate::http::error::omit_empty_group(&mut details);
                Reply::Json(
                    200,
                    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                           "details": details}),
                )
            }
        };
        Ok(options.warned(info, reply))
    }

    /// `deletecollection`: deletes every object of the collection its
    /// selectors pick, each as a delete of its own would (finalizers,
    /// propagation, dry run); answers the list of what it deleted, as it
    /// was before. An object deleted meanwhile by someone else is skipped.
    pub(super) fn delete_collection(
        &self,
        target: &Target,
        request: &Request<'_>,
    ) -> Result<Reply, ApiError> {
        let info = &target.info;
        let filter = Filter::from_query(&request.query, info, self.config.shard_selectors)?;
        let options = DeleteOptions::of(request)?;
        let snapshot = self.store.list(
            &info.storage_key(),
            target.namespace.as_deref(),
            ListAt::Latest,
        )?;
        let mut items = Vec::new();
        for object in snapshot.items.iter().filter(|o| filter.matches(o)) {
            let Some(key) = ObjectKey::of(object) else {
                continue;
            };
            // The answer lists the objects as they were before (a real
            // store answers the list it read), not as the delete left them.
            match self.delete_object(info, &key, &key.name, &options) {
                Ok(_) => items.push(list_item(info, object)),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        let reply = Reply::Json(
            200,
            json!({"kind": info.list_kind, "apiVersion": info.api_version(),
                   "metadata": super::read::list_metadata(info, self.store.current_rv()),
                   "items": items}),
        );
        Ok(options.warned(info, reply))
    }

    /// The grace period a simulated kubelet gets to stop a Pod bound to a
    /// Node before it is removed: the one asked for, else the Pod's
    /// `terminationGracePeriodSeconds` (30 s by default); none when no
    /// kubelet runs, for a Pod not bound or finished, or with 0 asked
    /// (removed at once, as `--grace-period=0 --force` does).
    fn kubelet_grace(&self, info: &ResourceInfo, pod: &Value, asked: Option<i64>) -> Option<i64> {
        let bound = !text_at(pod, "/spec/nodeName").is_empty()
            && !matches!(text_at(pod, "/status/phase"), "Succeeded" | "Failed");
        if self.config.simulate_workloads.is_none()
            || !(info.group.is_empty() && info.plural == "pods")
            || !bound
        {
            return None;
        }
        let grace = asked
            .or_else(|| {
                pod.pointer("/spec/terminationGracePeriodSeconds")
                    .and_then(Value::as_i64)
            })
            .unwrap_or(30);
        (grace > 0).then_some(grace)
    }

    /// Deletes one object: checks the preconditions, then marks it (it has
    /// finalizers, the policy adds one, or it is a namespace) or removes it.
    fn delete_object(
        &self,
        info: &ResourceInfo,
        key: &ObjectKey,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        let current = self
            .store
            .get(&info.storage_key(), key)
            .ok_or_else(|| ApiError::not_found(info, name))?;
        // A namespace is emptied by the namespace controller (`gc`) first.
        let is_namespace = info.group.is_empty() && info.plural == "namespaces";
        // The namespaces a cluster cannot live without (NamespaceLifecycle).
        if is_namespace && IMMORTAL_NAMESPACES.contains(&name) {
            return Err(ApiError::forbidden(format!(
                "namespaces \"{name}\" is forbidden: this namespace may not be deleted"
            )));
        }
        let record = text_at(&current, "/metadata/uid");
        if let Some(uid) = &options.uid
            && is_namespace
            && record != uid
        {
            // The namespace registry checks it itself, in its own words.
            return Err(ApiError::conflict(
                info,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {record}"
                ),
            ));
        }
        if let Some(uid) = &options.uid
            && record != uid
        {
            return Err(ApiError::precondition_failed(
                info,
                name,
                &format!(
                    "the UID in the precondition ({uid}) does not match the UID in record ({}). The object might have been deleted and then recreated",
                    text_at(&current, "/metadata/uid")
                ),
            ));
        }
        if let Some(rv) = &options.resource_version
            && rv_of(&current) != Some(rv.as_str())
        {
            return Err(ApiError::precondition_failed(
                info,
                name,
                &format!(
                    "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({}). The object might have been modified",
                    rv_of(&current).unwrap_or_default()
                ),
            ));
        }
        let mut finalizers: Vec<Value> = current
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        // Events are not garbage collected: a real server's store for
        // them adds no finalizer of the collector's, and deletes at once.
        let collected = info.plural != "events";
        let gc_finalizer = match options.policy(info, &finalizers) {
            "Foreground" if collected => Some("foregroundDeletion"),
            "Orphan" if collected => Some("orphan"),
            _ => None,
        };
        if let Some(f) = gc_finalizer
            && !finalizers.iter().any(|x| x == f)
        {
            finalizers.push(f.into());
        }
        let grace = self.kubelet_grace(info, &current, options.grace);
        if !finalizers.is_empty() || is_namespace || grace.is_some() {
            // Graceful: mark, and let the finalizers' owners (or the
            // kubelet) finish.
            let deleting = move |object: &Value| -> Result<Value, ApiError> {
                let mut next = object.clone();
                if let Some(m) = metadata_mut(&mut next) {
                    begin_deletion(m, grace.unwrap_or(0));
                    if !finalizers.is_empty() {
                        m.insert("finalizers".into(), Value::Array(finalizers));
                    }
                }
                if is_namespace {
                    // Its registry marks it without a grace period.
                    if let Some(m) = metadata_mut(&mut next) {
                        m.shift_remove("deletionGracePeriodSeconds");
                    }
                    next["status"] = json!({"phase": "Terminating"});
                }
                Ok(next)
            };
            if options.dry_run {
                return Ok(Deleted::Marked(Arc::new(deleting(&current)?)));
            }
            let written = self.store.update(&info.storage_key(), key, deleting)?;
            return Ok(Deleted::Marked(written.object));
        }
        // A Pod's deletion is always graceful to a real server: one with no
        // grace left is marked (`deletionTimestamp`, a grace of 0, its
        // generation counted), then removed as marked; watchers see both.
        let pod = info.group.is_empty() && info.plural == "pods";
        let mark = |object: &Value| -> Result<Value, ApiError> {
            let mut next = object.clone();
            if let Some(m) = metadata_mut(&mut next) {
                begin_deletion(m, 0);
            }
            Ok(next)
        };
        if options.dry_run {
            return Ok(Deleted::Gone(if pod {
                Arc::new(mark(&current)?)
            } else {
                current
            }));
        }
        if pod {
            self.store.update(&info.storage_key(), key, mark)?;
        }
        let last = self
            .store
            .delete::<ApiError>(&info.storage_key(), key, |_| Ok(()))
            .map_err(|_| ApiError::not_found(info, name))?;
        if crd::is_crd(info) {
            self.retire(&last);
        }
        Ok(Deleted::Gone(last))
    }
}
