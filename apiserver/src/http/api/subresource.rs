//! Subresources beyond `/status`: `/scale` (as `autoscaling/v1` Scale) and
//! a Pod's `/binding` (the scheduler's write), also reached as the core
//! group's `bindings` resource (the Binding names its Pod).

use serde_json::{Value, json};

use super::Api;
use super::request::{Reply, Request};
use super::route::Target;
use crate::http::auth::rbac::{Attributes, Policy};
use crate::http::error::ApiError;
use crate::mutation::patch::{json_patch, merge_patch};
use kubewasm_types::info::ResourceInfo;

impl Api {
    /// The `autoscaling/v1` Scale of an object.
    pub(super) fn scale_of(object: &Value) -> Value {
        let selector = object
            .pointer("/spec/selector/matchLabels")
            .and_then(Value::as_object)
            .map(|labels| {
                labels
                    .iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default();
        let meta = |f: &str| {
            object
                .pointer(&format!("/metadata/{f}"))
                .cloned()
                .unwrap_or(Value::Null)
        };
        let mut scale = json!({
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {"name": meta("name"), "namespace": meta("namespace"), "uid": meta("uid"),
                         "resourceVersion": meta("resourceVersion"), "creationTimestamp": meta("creationTimestamp")},
            "spec": {"replicas": object.pointer("/spec/replicas").cloned().unwrap_or(json!(1))},
            "status": {"replicas": object.pointer("/status/replicas").cloned().unwrap_or(json!(0)), "selector": selector},
        });
        // As Go writes it: no `spec.replicas` when it is 0.
        crate::schema::defaults::apply("autoscaling/v1", "Scale", &mut scale);
        scale
    }

    pub(super) fn get_scale(&self, target: &Target, name: &str) -> Result<Reply, ApiError> {
        let object = self
            .store
            .get(&target.info.storage_key(), &self.key(target, name))
            .ok_or_else(|| ApiError::not_found(&target.info, name))?;
        Ok(Reply::Json(200, Self::scale_of(&object)))
    }

    /// A write to `/scale`: the new Scale's `spec.replicas` becomes the
    /// object's.
    pub(super) fn update_scale(
        &self,
        target: &Target,
        name: &str,
        request: &Request<'_>,
    ) -> Result<Reply, ApiError> {
        let info = target.info.clone();
        let body: Value = request.document()?;
        let content_type = request
            .content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_owned();
        let manager = Self::manager(request);
        let strict = Self::strict(&request.query);
        let reply = self.write(
            target,
            name,
            Self::dry_run(&request.query),
            &request.user,
            |current| {
                let mut scale = Self::scale_of(current);
                match (request.method, content_type.as_str()) {
                    ("PUT", _) => scale = body.clone(),
                    (_, "application/json-patch+json") => {
                        json_patch(&mut scale, &body)
                            .map_err(|why| ApiError::invalid(&info, name, why))?;
                    }
                    _ => merge_patch(&mut scale, &body),
                }
                // Absent is 0, as Go decodes it (and writes a Scale of 0).
                let given = scale.pointer("/spec/replicas");
                let replicas = given
                    .map_or(Some(0), Value::as_i64)
                    .filter(|r| *r >= 0)
                    .ok_or_else(|| negative_replicas(&info, name, given))?;
                let mut desired = current.clone();
                desired["spec"]["replicas"] = replicas.into();
                Self::updated(
                    &info,
                    name,
                    Some("scale"),
                    current,
                    desired,
                    &manager,
                    strict,
                )
            },
        )?;
        match reply {
            Reply::Json(code, object) => Ok(Reply::Json(code, Self::scale_of(&object))),
            other => Ok(other),
        }
    }

    /// `pods/binding`, as the scheduler binds: the Pod's `spec.nodeName`
    /// and its `PodScheduled` condition, in one write; a Pod already bound
    /// is a conflict.
    pub(super) fn bind(
        &self,
        target: &Target,
        name: &str,
        request: &Request<'_>,
    ) -> Result<Reply, ApiError> {
        let info = target.info.clone();
        let binding: Value = request.document()?;
        let node = binding
            .pointer("/target/name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| ApiError::invalid_kind("Binding", name, "target.name: Required value"))?
            .to_owned();
        let manager = Self::manager(request);
        self.write(
            target,
            name,
            Self::dry_run(&request.query),
            &request.user,
            |current| {
                if let Some(bound) = current
                    .pointer("/spec/nodeName")
                    .and_then(Value::as_str)
                    .filter(|n| !n.is_empty())
                {
                    return Err(ApiError::conflict(
                        &info,
                        name,
                        &format!("pod {name} is already assigned to node \"{bound}\""),
                    ));
                }
                let mut desired = current.clone();
                desired["spec"]["nodeName"] = node.clone().into();
                let scheduled = json!({"type": "PodScheduled", "status": "True",
                    "lastProbeTime": null, "lastTransitionTime": crate::objects::now()});
                let mut conditions: Vec<Value> = current
                    .pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                conditions.retain(|c| c["type"] != "PodScheduled");
                conditions.push(scheduled);
                // Through `binding`: a Pod's update may not set its Node.
                let mut next = Self::updated(
                    &info,
                    name,
                    Some("binding"),
                    current,
                    desired,
                    &manager,
                    false,
                )?;
                next["status"]["conditions"] = conditions.into();
                Ok(next)
            },
        )?;
        Ok(Reply::Json(
            201,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
        ))
    }

    /// A `Binding` created in `namespace` (`POST …/namespaces/NS/bindings`):
    /// the Pod it names bound as through its `binding` subresource, for a
    /// user who may create `bindings` there.
    pub(super) fn create_binding(
        &self,
        namespace: &str,
        request: &Request<'_>,
    ) -> Result<Reply, ApiError> {
        if request.method != "POST" {
            return Err(ApiError::not_allowed());
        }
        let create = Attributes {
            verb: "create".into(),
            resource: "bindings".into(),
            namespace: namespace.into(),
            ..Attributes::default()
        };
        if !Policy::of(&self.store).allows(&request.user, &create) {
            return Err(ApiError::forbidden(create.forbidden_message(&request.user)));
        }
        let binding: Value = request.document()?;
        let name = binding
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| {
                ApiError::invalid_kind(
                    "Binding",
                    "",
                    "metadata.name: Required value: name is required",
                )
            })?
            .to_owned();
        let pods = self
            .registry()
            .get("", "v1", "pods")
            .cloned()
            .ok_or_else(ApiError::no_route)?;
        let target = Target {
            info: pods,
            namespace: Some(namespace.to_owned()),
            name: Some(name.clone()),
            subresource: Some("binding".to_owned()),
        };
        self.bind(&target, &name, request)
    }
}

/// A Scale's negative (or not integer) `spec.replicas`, as a real server
/// refuses it: a custom resource's by its CRD's replicas path, a built-in's
/// as an `autoscaling` Scale.
fn negative_replicas(info: &ResourceInfo, name: &str, given: Option<&Value>) -> ApiError {
    let value = given.map_or_else(|| "null".to_owned(), Value::to_string);
    if info.custom {
        return ApiError::invalid(
            info,
            name,
            format!(".spec.replicas: Invalid value: {value}: should be a non-negative integer"),
        );
    }
    let scale = ResourceInfo {
        group: "autoscaling".to_owned(),
        kind: "Scale".to_owned(),
        ..info.clone()
    };
    ApiError::invalid(
        &scale,
        name,
        format!("spec.replicas: Invalid value: {value}: must be greater than or equal to 0"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubewasm_types::registry::Registry;

    fn info(group: &str, version: &str, plural: &str) -> ResourceInfo {
        Registry::builtin()
            .get(group, version, plural)
            .cloned()
            .expect("served")
    }

    #[test]
    fn negative_replicas_should_be_refused_as_a_real_server_refuses_them() {
        let custom = ResourceInfo {
            group: "difference.example.com".to_owned(),
            kind: "Gadget".to_owned(),
            custom: true,
            ..info("apps", "v1", "deployments")
        };
        // The real kube-apiserver's answer (v1.37.2, `make difference`).
        assert_eq!(
            negative_replicas(&custom, "a", Some(&json!(-1))).status()["message"],
            "Gadget.difference.example.com \"a\" is invalid: .spec.replicas: Invalid value: -1: \
             should be a non-negative integer"
        );
        let builtin = negative_replicas(&info("apps", "v1", "deployments"), "a", Some(&json!(-1)));
        assert_eq!(
            builtin.status()["message"],
            "Scale.autoscaling \"a\" is invalid: spec.replicas: Invalid value: -1: must be greater \
             than or equal to 0"
        );
    }
}
