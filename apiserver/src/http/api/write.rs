//! Writes: create, update, the patch flavours and server-side apply, with
//! the rules every write obeys (immutable metadata, `/status`, generation,
//! finalizers during deletion, schemas, bounds, field ownership).

use std::collections::HashMap;

use kubewasm_core::ObjectKey;
use serde_json::{Value, json};

use super::Api;
use super::body::same_name;
use super::checks::Patched;
use super::request::{Reply, Request};
use super::route::Target;
use super::shape::{part_of, rv_of, served, shown};
use super::{admission, strategy};
use crate::http::auth::User;
use crate::http::auth::escalation::Writer;
use crate::http::error::ApiError;
use crate::mutation::apply;
use crate::mutation::patch::{json_patch, merge_patch};
use crate::objects::{
    generate_name, metadata_mut, name_problems, new_uid, now, spec_changed, strings_at,
    validate_generate_name,
};
use crate::schema::{conversion, validation};
use crate::store::StoreError;
use kubewasm_types::crd;
use kubewasm_types::info::ResourceInfo;

/// The API group of RBAC, whose writes are checked for escalation.
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// The patch flavours, by content type.
#[derive(Clone, Copy)]
enum PatchType {
    Merge,
    Json,
    Strategic,
}

impl Api {
    pub(super) fn dry_run(query: &HashMap<String, String>) -> bool {
        query.get("dryRun").is_some_and(|d| d == "All")
    }

    pub(super) fn create(&self, target: &Target, request: &Request<'_>) -> Result<Reply, ApiError> {
        let info = &target.info;
        let mut object = Self::body(info, request)?;
        Self::decodable(info, &object)?;
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.shift_remove("managedFields");
        }
        // The creator owns every field it set (`Update` in `managedFields`),
        // defaults the decoder sets included.
        crate::objects::omit_empty_metadata(&mut object);
        crate::objects::decoded_defaults(info, &mut object);
        apply::record_update(
            &Self::zero(info),
            &mut object,
            &Self::manager(request),
            &info.api_version(),
            info.custom,
            apply::Part::of(info.status, None),
        );
        self.insert(target, object, &request.query, &request.user)
    }

    /// What a creation starts from: Go's zero object of a built-in type
    /// (its fields without `omitempty` are written), nothing for a custom
    /// resource.
    pub(super) fn zero(info: &ResourceInfo) -> Value {
        if info.custom {
            json!({})
        } else {
            crate::schema::defaults::zero(&info.api_version(), &info.kind)
        }
    }

    /// Stores a new object: names, uid, timestamps, generation, status rules.
    pub(super) fn insert(
        &self,
        target: &Target,
        mut object: Value,
        query: &HashMap<String, String>,
        user: &User,
    ) -> Result<Reply, ApiError> {
        let info = &target.info;
        let metadata = metadata_mut(&mut object)
            .ok_or_else(|| ApiError::bad_request("metadata must be an object"))?;
        let name = match metadata
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        {
            Some(name) => name.to_owned(),
            None => match metadata.get("generateName").and_then(Value::as_str) {
                Some(prefix) => {
                    let name = generate_name(prefix);
                    validate_generate_name(prefix)
                        .map_err(|why| ApiError::invalid(info, &name, why))?;
                    name
                }
                None => String::new(),
            },
        };
        let problems = name_problems(info, &name);
        if !problems.is_empty() {
            // Refused with everything else the type's validation finds.
            let all = validation::problems(info, &object, target.namespace.as_deref(), problems);
            return Err(ApiError::invalid_fields(info, &name, &all));
        }
        match (
            &target.namespace,
            metadata
                .get("namespace")
                .and_then(Value::as_str)
                .filter(|ns| !ns.is_empty()),
        ) {
            (Some(url), Some(body)) if url != body => {
                return Err(ApiError::bad_request(format!(
                    "the namespace of the provided object does not match the namespace sent on the request ({body} != {url})"
                )));
            }
            _ => {}
        }
        if let Some(namespace) = &target.namespace {
            if self
                .store
                .get(
                    &crate::store::ResourceKey::new("", "namespaces"),
                    &ObjectKey::cluster(namespace.clone()),
                )
                .is_none()
            {
                return Err(ApiError {
                    code: 404,
                    reason: "NotFound",
                    message: format!("namespaces \"{namespace}\" not found"),
                    details: Some(json!({"name": namespace, "kind": "namespaces"})),
                });
            }
            metadata.insert("namespace".into(), namespace.clone().into());
        }
        metadata.insert("name".into(), name.clone().into());
        metadata.insert("uid".into(), new_uid().into());
        metadata.insert("creationTimestamp".into(), now().into());
        if info.generation {
            metadata.insert("generation".into(), 1.into());
        } else {
            metadata.remove("generation");
        }
        for server_owned in [
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ] {
            metadata.remove(server_owned);
        }
        if info.status
            && let Some(map) = object.as_object_mut()
        {
            // The strategy resets it to Go's zero status, whose fields
            // without `omitempty` are written (a DaemonSet's counts): what
            // a controller's first status write is compared with.
            match crate::schema::defaults::zero(&info.api_version(), &info.kind)
                .get_mut("status")
                .map(Value::take)
            {
                Some(zero) if !info.custom => map.insert("status".into(), zero),
                _ => map.remove("status"),
            };
        }
        strategy::phase_transition(info, None, &mut object);
        if crd::is_crd(info) {
            super::crds::created_status(&mut object);
        }
        let addresses = if info.group.is_empty() && info.plural == "services" {
            Some(self.allocate_service(info, &name, &mut object)?)
        } else {
            None
        };
        if info.group == "batch" && info.plural == "jobs" {
            strategy::job_selector(&mut object, &name);
        }
        if info.group.is_empty()
            && info.plural == "pods"
            && let Some(namespace) = &target.namespace
        {
            admission::admit_pod(&self.store, info, namespace, &mut object)?;
        }
        if self.config.simulate_workloads.is_some() {
            admission::protect_storage(info, &mut object);
        }
        if info.group.is_empty() && info.plural == "namespaces" {
            // The strategy's: a namespace is created with the `kubernetes`
            // finalizer, which its lifecycle removes once it is emptied.
            strategy::kubernetes_finalizer(&mut object);
        }
        let object = Self::checked(info, &name, served(info, &object), Self::strict(query))?;
        Self::no_escalation(info, &name, self.writer(target, user).as_ref(), &object)?;
        if crd::is_crd(info) {
            crd::served_types(&object).map_err(|why| ApiError::invalid(info, &name, why))?;
        }
        if Self::dry_run(query) {
            return Ok(Reply::Json(201, object));
        }
        let key = self.key(target, &name);
        let created = self
            .store
            .create(
                &info.storage_key(),
                &key,
                conversion::to_storage(info, object),
            )
            .map_err(|e| match e {
                StoreError::AlreadyExists { .. } => ApiError::already_exists(info, &name),
                other => other.into(),
            })?;
        if let Some(addresses) = addresses {
            addresses.keep();
        }
        if crd::is_crd(info) {
            self.establish(&key, &created)?;
        }
        Ok(Reply::Json(201, shown(info, &created)))
    }

    /// Merges what a write may change into the current object: the rules
    /// of the main resource and of `/status`, finalizers during deletion,
    /// generation bumps.
    pub(super) fn next_version(
        info: &ResourceInfo,
        name: &str,
        subresource: Option<&str>,
        current: &Value,
        mut desired: Value,
    ) -> Result<Value, ApiError> {
        let current_meta = current
            .get("metadata")
            .cloned()
            .unwrap_or_else(|| json!({}));
        // A built-in type's status strategy takes the object as sent, its
        // spec as it was; a custom resource's takes the status alone.
        let builtin_status = subresource == Some("status") && !info.custom;
        // A Namespace's `finalize` takes the object as sent, its status as
        // it was (the namespace finalize strategy): its finalizers change.
        let finalize = subresource == Some("finalize");
        if let Some(part) = subresource
            .and_then(|s| part_of(info, s))
            .filter(|_| !builtin_status && !finalize)
        {
            // A subresource writes its part of the object, and nothing else
            // (and the fields' owners: an apply's entry for it).
            let mut next = current.clone();
            let (parent, field) = part.rsplit_once('/').unwrap_or(("", part));
            let value = desired.pointer_mut(part).map(Value::take);
            if let (Some(owners), Some(metadata)) = (
                desired
                    .pointer_mut("/metadata/managedFields")
                    .map(Value::take),
                metadata_mut(&mut next),
            ) {
                metadata.insert("managedFields".into(), owners);
            }
            if let Some(Value::Object(map)) = if parent.is_empty() {
                Some(&mut next)
            } else {
                next.pointer_mut(parent)
            } {
                match value {
                    Some(value) => map.insert(field.to_owned(), value),
                    None => map.shift_remove(field),
                };
            }
            crate::objects::decoded_defaults(info, &mut next);
            return Ok(next);
        }
        if info.group.is_empty() && subresource.is_none() {
            match info.plural.as_str() {
                "namespaces" => strategy::keep_finalizers(current, &mut desired),
                "services" => strategy::keep_allocated(current, &mut desired),
                _ => {}
            }
        }
        if builtin_status {
            strategy::status_strategy(info, current, &mut desired);
            strategy::phase_transition(info, Some(current), &mut desired);
        } else if info.status {
            match current.get("status") {
                Some(status) => desired["status"] = status.clone(),
                None => {
                    if let Some(map) = desired.as_object_mut() {
                        map.remove("status");
                    }
                }
            }
        }
        let metadata = metadata_mut(&mut desired)
            .ok_or_else(|| ApiError::bad_request("metadata must be an object"))?;
        for immutable in [
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ] {
            match current_meta.get(immutable) {
                Some(v) => metadata.insert(immutable.into(), v.clone()),
                None => metadata.remove(immutable),
            };
        }
        if current_meta.get("deletionTimestamp").is_some() {
            let before = strings_at(&current_meta, "/finalizers");
            let after = metadata
                .get("finalizers")
                .map(|f| strings_at(f, ""))
                .unwrap_or_default();
            if after.iter().any(|f| !before.contains(f)) {
                return Err(ApiError::invalid(
                    info,
                    name,
                    "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted",
                ));
            }
        }
        // Compared as decoded: defaults the writer left out change nothing.
        crate::objects::decoded_defaults(info, &mut desired);
        if info.group.is_empty() && info.plural == "pods" && subresource.is_none() {
            validation::pod_update(current, &desired)
                .map_err(|why| ApiError::invalid(info, name, why))?;
        }
        // An EndpointSlice has no spec: its strategy counts its labels too;
        // a Deployment's counts its annotations (where rollbacks were asked).
        let counted = match info.group.as_str() {
            "discovery.k8s.io" => Some("/metadata/labels"),
            "apps" if info.kind == "Deployment" => Some("/metadata/annotations"),
            _ => None,
        };
        let relabelled = subresource.is_none()
            && counted.is_some_and(|pointer| current.pointer(pointer) != desired.pointer(pointer));
        if info.generation && (spec_changed(current, &desired) || relabelled) {
            let generation = current_meta
                .get("generation")
                .and_then(Value::as_i64)
                .unwrap_or(0)
                + 1;
            if let Some(m) = metadata_mut(&mut desired) {
                m.insert("generation".into(), generation.into());
            }
        }
        Ok(served(info, &desired))
    }

    /// [`Api::next_version`] (decoded: defaulted), with the fields the write changed recorded as
    /// `manager`'s (`Update` in `managedFields`).
    pub(super) fn updated(
        info: &ResourceInfo,
        name: &str,
        subresource: Option<&str>,
        current: &Value,
        desired: Value,
        manager: &str,
        strict: bool,
    ) -> Result<Value, ApiError> {
        let mut desired = desired;
        crate::objects::omit_empty_metadata(&mut desired);
        let mut next = Self::next_version(info, name, subresource, current, desired)?;
        if apply::tracked(current) {
            apply::record_update(
                current,
                &mut next,
                manager,
                &info.api_version(),
                info.custom,
                apply::Part::of(info.status, subresource),
            );
        } else if let Some(metadata) = next.get_mut("metadata").and_then(Value::as_object_mut) {
            // Nobody owns its fields: an update does not start it.
            metadata.shift_remove("managedFields");
        }
        Self::checked(info, name, next, strict)
    }

    /// What the writer of an RBAC object holds, read before the write;
    /// `None` for any other object, and for `system:masters` (never
    /// refused: the policy is not read for it).
    fn writer(&self, target: &Target, user: &User) -> Option<Writer> {
        (target.info.group == RBAC_GROUP && target.subresource.is_none() && !user.is_master())
            .then(|| Writer::of(&self.store, user, target.namespace.as_deref().unwrap_or("")))
    }

    /// Refuses a Role, ClusterRole or binding granting what its writer does
    /// not hold ([`crate::http::auth::escalation`]).
    fn no_escalation(
        info: &ResourceInfo,
        name: &str,
        writer: Option<&Writer>,
        object: &Value,
    ) -> Result<(), ApiError> {
        match writer {
            Some(writer) => writer.check(&info.plural, object).map_err(|why| {
                ApiError::forbidden(format!(
                    "{}.{} \"{name}\" is forbidden: {why}",
                    info.plural, info.group
                ))
            }),
            None => Ok(()),
        }
    }

    /// Stores `update(current)` for the object, then removes it if it is
    /// being deleted and has no finalizer left.
    pub(super) fn write(
        &self,
        target: &Target,
        name: &str,
        dry_run: bool,
        user: &User,
        update: impl FnOnce(&Value) -> Result<Value, ApiError>,
    ) -> Result<Reply, ApiError> {
        let info = &target.info;
        // Read before the store is held: the checks inside run under it.
        let writer = self.writer(target, user);
        // `update` works on the view the request names; the store keeps
        // the stored form.
        let update = |current: &Value| -> Result<Value, ApiError> {
            let next = update(&conversion::from_storage(info, current))?;
            Self::no_escalation(info, name, writer.as_ref(), &next)?;
            Ok(conversion::to_storage(info, next))
        };
        let key = self.key(target, name);
        let not_found = |e: ApiError| {
            if e.code == 404 && e.reason == "NotFound" {
                ApiError::not_found(info, name)
            } else {
                e
            }
        };
        if dry_run {
            let current = self
                .store
                .get(&info.storage_key(), &key)
                .ok_or_else(|| ApiError::not_found(info, name))?;
            return Ok(Reply::Json(200, shown(info, &update(&current)?)));
        }
        // A write that takes the last finalizer off an object being
        // deleted is not stored: the object is deleted as it was (a real
        // store's `errEmptiedFinalizers`), so watchers see it go with its
        // last stored state, and the writer gets the object as its write
        // made it (the store deletes with it as the state it expects).
        let emptied: std::cell::Cell<Option<(String, Value)>> = std::cell::Cell::new(None);
        let written = self.store.update(&info.storage_key(), &key, |current| {
            let next = update(current)?;
            let finalizers_left = next
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| !f.is_empty());
            if next.pointer("/metadata/deletionTimestamp").is_some() && !finalizers_left {
                emptied.set(Some((rv_of(current).unwrap_or_default().to_owned(), next)));
                return Err(ApiError::conflict(info, name, "its finalizers are emptied"));
            }
            Ok(next)
        });
        if let Some((seen, mut written)) = emptied.take() {
            let last = self
                .store
                .delete::<ApiError>(&info.storage_key(), &key, |current| {
                    if rv_of(current) == Some(seen.as_str()) {
                        Ok(())
                    } else {
                        Err(ApiError::conflict(
                            info,
                            name,
                            "the object has been modified; please apply your changes to the latest version and try again",
                        ))
                    }
                })
                .map_err(not_found)?;
            if crd::is_crd(info) {
                self.retire(&last);
            }
            if let (Some(Value::Object(meta)), Some(rv)) =
                (written.get_mut("metadata"), rv_of(&last))
            {
                meta.insert("resourceVersion".into(), rv.into());
            }
            return Ok(Reply::Json(200, shown(info, &written)));
        }
        let written = written.map_err(not_found)?;
        let object = &written.object;
        if crd::is_crd(info) && written.changed && target.subresource.is_none() {
            self.establish(&key, object)?;
        }
        Ok(Reply::Json(200, shown(info, object)))
    }

    pub(super) fn update(
        &self,
        target: &Target,
        name: &str,
        request: &Request<'_>,
    ) -> Result<Reply, ApiError> {
        let info = target.info.clone();
        let desired = Self::body_named(&info, request, name)?;
        // An update's object names itself, as the URL does.
        if crate::objects::text_at(&desired, "/metadata/name").is_empty() {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({name} based on URL) was undeterminable: name must be provided"
            )));
        }
        Self::decodable(&info, &desired)?;
        let subresource = target.subresource.clone();
        if info.create_on_update
            && subresource.is_none()
            && self
                .store
                .get(&info.storage_key(), &self.key(target, name))
                .is_none()
        {
            return self.create(target, request);
        }
        let wanted_rv = rv_of(&desired).map(str::to_owned);
        let unconditional = info.unconditional_update;
        let manager = Self::manager(request);
        let strict = Self::strict(&request.query);
        self.write(target, name, Self::dry_run(&request.query), &request.user, |current| {
            match (&wanted_rv, rv_of(current)) {
                (Some(wanted), Some(actual)) if wanted != actual => {
                    return Err(ApiError::conflict(
                        &info,
                        name,
                        "the object has been modified; please apply your changes to the latest version and try again",
                    ));
                }
                (None, _) if !unconditional => {
                    return Err(ApiError::version_required(&info, name));
                }
                _ => {}
            }
            Self::updated(&info, name, subresource.as_deref(), current, desired, &manager, strict)
        })
    }

    pub(super) fn patch(
        &self,
        target: &Target,
        name: &str,
        request: &Request<'_>,
    ) -> Result<Reply, ApiError> {
        let info = target.info.clone();
        let content_type = request.content_type.split(';').next().unwrap_or("").trim();
        if content_type == "application/apply-patch+yaml" {
            return self.server_side_apply(target, name, request);
        }
        let flavour = match content_type {
            "application/merge-patch+json" => PatchType::Merge,
            "application/json-patch+json" => PatchType::Json,
            // Built-in types only, as the API server: custom resources have no
            // patch strategy.
            "application/strategic-merge-patch+json" if !info.custom => PatchType::Strategic,
            _ => return Err(ApiError::unsupported_patch(info.custom)),
        };
        let patch: Value = request.document()?;
        let subresource = target.subresource.clone();
        let manager = Self::manager(request);
        let strict = Self::strict(&request.query);
        self.write(
            target,
            name,
            Self::dry_run(&request.query),
            &request.user,
            |current| {
                let mut desired = current.clone();
                let patched = match flavour {
                    PatchType::Merge => {
                        merge_patch(&mut desired, &patch);
                        Patched::Json
                    }
                    PatchType::Json => {
                        json_patch(&mut desired, &patch)
                            .map_err(|e| ApiError::patch_failed(&info, name, &e))?;
                        Patched::Json
                    }
                    PatchType::Strategic => {
                        crate::mutation::strategic::apply(&mut desired, &patch)
                            .map_err(|why| ApiError::invalid(&info, name, why))?;
                        Patched::Strategic
                    }
                };
                Self::patch_decodable(&info, patched, &patch, &desired)?;
                // A patch may not rename, as a PUT may not.
                same_name(&desired, name)?;
                Self::updated(
                    &info,
                    name,
                    subresource.as_deref(),
                    current,
                    desired,
                    &manager,
                    strict,
                )
            },
        )
    }

    /// The field manager of a write: `fieldManager`, else what a real
    /// server takes: the `User-Agent` up to its first `/`, its printable
    /// characters, at most 128 bytes (`kubectl/v1.32.4 (linux/amd64) …` is
    /// `kubectl`).
    pub(super) fn manager(request: &Request<'_>) -> String {
        if let Some(manager) = request.query.get("fieldManager").filter(|m| !m.is_empty()) {
            return manager.clone();
        }
        let mut manager = String::new();
        let prefix = request.user_agent.split('/').next().unwrap_or_default();
        for c in prefix.chars().filter(|c| !c.is_control()) {
            if manager.len() + c.len_utf8() > 128 {
                break;
            }
            manager.push(c);
        }
        if manager.is_empty() {
            // As apimachinery's buildManagerInfo names a write with neither.
            manager.push_str("unknown");
        }
        manager
    }
}
