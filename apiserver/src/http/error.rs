//! Kubernetes `Status` errors: what every failed request answers.

use serde_json::{Value, json};

use crate::http::bounds::BoundError;
use crate::http::decode::DecodeError;
use crate::mutation::patch::PatchError;
use crate::schema::protobuf::ProtobufError;
use crate::store::StoreError;
use kubewasm_types::info::ResourceInfo;

/// A failed request: an HTTP code, a `reason` clients match on, a message.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{reason} ({code}): {message}")]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// Machine-readable reason (`NotFound`, `Conflict`, …).
    pub reason: &'static str,
    /// Human-readable message.
    pub message: String,
    /// `details` of the Status (name, group, kind, causes), if any.
    pub details: Option<Value>,
}

impl ApiError {
    /// An error of `code` with its Status `reason` and `message`.
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    /// Adds `details` naming the object.
    #[must_use]
    pub fn about(mut self, info: &ResourceInfo, name: &str) -> Self {
        self.details = Some(json!({"name": name, "group": info.group, "kind": info.plural}));
        self
    }

    /// 500 with no reason: how a real server answers some requests it
    /// refuses (a shard selector it cannot read, an apply it cannot make a
    /// typed object of), unlike an `InternalError`, which it did not
    /// foresee.
    pub fn unreasoned(message: impl Into<String>) -> Self {
        Self::new(500, "", message)
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 404 NotFound, for a path under `/api` or a served group that names
    /// no resource, as a real server words it (empty details, no path).
    pub fn no_route() -> Self {
        let mut error = Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        );
        error.details = Some(json!({}));
        error
    }

    /// 404 NotFound, for an object.
    pub fn not_found(info: &ResourceInfo, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", resource_name(info)),
        )
        .about(info, name)
    }

    /// 409 AlreadyExists.
    pub fn already_exists(info: &ResourceInfo, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", resource_name(info)),
        )
        .about(info, name)
    }

    /// 409 Conflict: a stale resourceVersion or a failed precondition.
    pub fn conflict(info: &ResourceInfo, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                resource_name(info)
            ),
        )
        .about(info, name)
    }

    /// 409 Conflict of a delete's precondition, as a real registry words
    /// it: about the kind (`ConfigMap`, `Deployment.apps`), not the
    /// resource.
    pub fn precondition_failed(info: &ResourceInfo, name: &str, why: &str) -> Self {
        let named = registry_type(info);
        let kind = qualified_kind(&named);
        let mut error = Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {kind} \"{name}\": {why}"),
        );
        let mut details = json!({"name": name, "group": named.group, "kind": info.kind});
        omit_empty_group(&mut details);
        error.details = Some(details);
        error
    }

    /// 422 Invalid.
    pub fn invalid(info: &ResourceInfo, name: &str, why: impl std::fmt::Display) -> Self {
        Self::invalid_fields(info, name, &[why.to_string()])
    }

    /// 422 Invalid: a PUT without `metadata.resourceVersion` of a type whose
    /// strategy wants one. A real server names the type by its resource
    /// here (`leases`), in the message and in `details.kind` alike.
    pub fn version_required(info: &ResourceInfo, name: &str) -> Self {
        let why = "metadata.resourceVersion: Invalid value: 0: must be specified for an update";
        let mut error = Self::invalid(info, name, why);
        error.message = format!("{} \"{name}\" is invalid: {why}", resource_name(info));
        if let Some(details) = error.details.as_mut() {
            details["kind"] = info.plural.clone().into();
        }
        error
    }

    /// 422 Invalid with one cause per error (`<field>: <Reason>: <detail>`,
    /// as field errors are worded), which kubectl prints after `is invalid:`.
    pub fn invalid_fields(info: &ResourceInfo, name: &str, errors: &[String]) -> Self {
        let why = match errors {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let causes = causes(errors);
        let named = registry_type(info);
        let named = named.as_ref();
        let kind = qualified_kind(named);
        let mut error = Self::new(
            422,
            "Invalid",
            format!("{kind} \"{name}\" is invalid: {why}"),
        )
        .about(named, name);
        if let Some(details) = error.details.as_mut() {
            details["kind"] = info.kind.clone().into();
            details["causes"] = causes.into();
            omit_empty_group(details);
        }
        error
    }

    /// 422 Invalid: a request's options (`kind`, `PatchOptions`) lack
    /// `field` (an apply without `fieldManager`), as a real server words
    /// it: the options kind in `meta.k8s.io`, with an empty name.
    pub fn option_required(kind: &str, field: &str, why: &str) -> Self {
        Self::options_invalid(kind, &[format!("{field}: Required value: {why}")])
    }

    /// 422 Invalid: a request's options (`kind`, `ListOptions`) refused,
    /// one cause per error (`<field>: <Reason>: <detail>`).
    pub fn options_invalid(kind: &str, errors: &[String]) -> Self {
        let why = match errors {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let mut invalid = Self::new(
            422,
            "Invalid",
            format!("{kind}.meta.k8s.io \"\" is invalid: {why}"),
        );
        invalid.details = Some(json!({"group": "meta.k8s.io", "kind": kind,
            "causes": causes(errors)}));
        invalid
    }

    /// 401 Unauthorized.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403 Forbidden.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    /// 422 Invalid about no kind and no name, with one cause (`<field>:
    /// <detail>`): a patch whose result cannot be read back (` "" is
    /// invalid: patch: Invalid value: …`).
    pub fn invalid_unnamed(field_error: &str) -> Self {
        let (field, message) = field_error.split_once(": ").unwrap_or(("", field_error));
        let mut error = Self::new(422, "Invalid", format!(" \"\" is invalid: {field_error}"));
        error.details = Some(json!({"causes": [
            {"reason": "FieldValueInvalid", "message": message, "field": field}
        ]}));
        error
    }

    /// 422 Invalid, for a kind that is not a stored resource (a review, a
    /// TokenRequest).
    pub fn invalid_kind(kind: &str, name: &str, why: impl std::fmt::Display) -> Self {
        Self::new(
            422,
            "Invalid",
            format!("{kind} \"{name}\" is invalid: {why}"),
        )
    }

    /// 422 Invalid for a review of `group`, named with no kind and no name
    /// as a real server names a LocalSubjectAccessReview it refuses
    /// (`.authorization.k8s.io "" is invalid: …`).
    pub fn invalid_review(group: &str, errors: &[String]) -> Self {
        let why = match errors {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let mut error = Self::new(422, "Invalid", format!(".{group} \"\" is invalid: {why}"));
        error.details = Some(json!({"group": group, "causes": causes(errors)}));
        error
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    /// 405 for a verb the resource does not serve, in a real server's words
    /// (a Namespace's deletecollection, a review's GET).
    pub fn not_allowed() -> Self {
        let mut refused = Self::method_not_allowed(
            "the server does not allow this method on the requested resource",
        );
        refused.details = Some(serde_json::json!({}));
        refused
    }

    /// 415 UnsupportedMediaType for a PATCH: the patch types the type
    /// takes (a custom resource has no strategic merge), in a real
    /// server's order.
    pub fn unsupported_patch(custom: bool) -> Self {
        let accepted = if custom {
            "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
        } else {
            "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml"
        };
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {accepted}"
            ),
        )
    }

    /// 410 Expired.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 413 RequestEntityTooLarge.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("request entity too large: limit is {limit} bytes"),
        )
    }

    /// 429 TooManyRequests: a bound on what one may hold at once.
    pub fn too_many_requests(message: impl Into<String>) -> Self {
        Self::new(429, "TooManyRequests", message).retry_after(1)
    }

    /// Asks the client to wait `seconds` before retrying
    /// (`details.retryAfterSeconds`; the response's `Retry-After` header
    /// says the same).
    #[must_use]
    pub fn retry_after(mut self, seconds: u32) -> Self {
        self.details = Some(json!({"retryAfterSeconds": seconds}));
        self
    }

    /// 504 Timeout: a resourceVersion newer than the server's.
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(504, "Timeout", message)
    }

    /// The `Status` object, its fields in a real server's order (`details`
    /// before `code`; a core group's empty `group` left out): clients that
    /// compare an error's text see the same text.
    pub fn status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        });
        if self.reason.is_empty() {
            // `omitempty`: a failure of no known reason (a 500) has none.
            if let Some(fields) = status.as_object_mut() {
                fields.shift_remove("reason");
            }
        }
        if let Some(details) = &self.details {
            let mut details = details.clone();
            omit_empty_group(&mut details);
            status["details"] = details;
        }
        status["code"] = self.code.into();
        status
    }
}

/// A `Status`'s `details` as a real server writes them: a core group's
/// empty `group` left out (`omitempty`).
pub(crate) fn omit_empty_group(details: &mut Value) {
    if let Some(map) = details.as_object_mut()
        && map.get("group").is_some_and(|g| g == "")
    {
        map.shift_remove("group");
    }
}

/// The type a registry's own errors (validation, preconditions) name: an
/// events.k8s.io Event is the core Event it is stored as.
fn registry_type(info: &ResourceInfo) -> std::borrow::Cow<'_, ResourceInfo> {
    if info.group == "events.k8s.io" {
        std::borrow::Cow::Owned(ResourceInfo {
            group: String::new(),
            ..info.clone()
        })
    } else {
        std::borrow::Cow::Borrowed(info)
    }
}

/// A kind as errors about an object name it: `ConfigMap`,
/// `Lease.coordination.k8s.io`.
/// The `causes` of field errors worded `<field>: <Reason>: <detail>`.
fn causes(errors: &[String]) -> Vec<Value> {
    errors
        .iter()
        .map(|e| {
            let (field, message) = e.split_once(": ").unwrap_or(("", e));
            let reason = match message.split_once(':').map_or(message, |(r, _)| r) {
                "Required value" => "FieldValueRequired",
                "Forbidden" => "FieldValueForbidden",
                "Unsupported value" => "FieldValueNotSupported",
                "Too long" => "FieldValueTooLong",
                "Too many" => "FieldValueTooMany",
                "Duplicate value" => "FieldValueDuplicate",
                _ => "FieldValueInvalid",
            };
            json!({"reason": reason, "message": message, "field": field})
        })
        .collect()
}

fn qualified_kind(info: &ResourceInfo) -> String {
    if info.group.is_empty() {
        info.kind.clone()
    } else {
        format!("{}.{}", info.kind, info.group)
    }
}

fn resource_name(info: &ResourceInfo) -> String {
    if info.group.is_empty() {
        info.plural.clone()
    } else {
        format!("{}.{}", info.plural, info.group)
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Expired { .. } => Self::expired(error.to_string()),
            StoreError::TooLarge { .. } => Self::timeout(error.to_string()),
            StoreError::AlreadyExists { ref key, .. } => {
                Self::new(409, "AlreadyExists", error.to_string()).with_name(&key.name)
            }
            StoreError::Persist(_) => Self::new(500, "InternalError", error.to_string()),
            StoreError::NotFound { ref key, .. } => {
                Self::new(404, "NotFound", error.to_string()).with_name(&key.name)
            }
        }
    }
}

impl From<DecodeError> for ApiError {
    fn from(error: DecodeError) -> Self {
        match error {
            DecodeError::Unsupported(_) | DecodeError::Protobuf(ProtobufError::Unsupported(_)) => {
                Self::new(415, "UnsupportedMediaType", error.to_string())
            }
            DecodeError::Json(_) | DecodeError::Yaml(_) | DecodeError::Protobuf(_) => {
                Self::bad_request(error.to_string())
            }
        }
    }
}

impl ApiError {
    /// An object out of [`crate::http::bounds`]: 413 when too large, 422 when
    /// too deep.
    pub fn out_of_bounds(info: &ResourceInfo, name: &str, error: &BoundError) -> Self {
        match error {
            BoundError::TooLarge { .. } => {
                Self::new(413, "RequestEntityTooLarge", error.to_string()).about(info, name)
            }
            BoundError::TooDeep { .. } => Self::invalid(info, name, error),
        }
    }

    /// A JSON patch that failed: 413 when it grows the object too much,
    /// 422 otherwise. A patch that cannot apply (a failed `test`, a path
    /// that names nothing) is answered as a real server answers it, with
    /// `NewGenericServerResponse`'s words and nothing more; this server's
    /// own bounds say what was refused.
    pub fn patch_failed(info: &ResourceInfo, name: &str, error: &PatchError) -> Self {
        match error {
            PatchError::TooLarge { .. } => {
                Self::new(413, "RequestEntityTooLarge", error.to_string()).about(info, name)
            }
            PatchError::TestFailed { .. }
            | PatchError::NoPath { .. }
            | PatchError::BadIndex { .. } => {
                let mut error = Self::new(
                    422,
                    "Invalid",
                    "the server rejected our request due to an error in our request",
                );
                error.details = Some(json!({}));
                error
            }
            _ => Self::invalid(info, name, error),
        }
    }

    fn with_name(mut self, name: &str) -> Self {
        self.details = Some(json!({"name": name}));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubewasm_types::registry::Registry;

    fn info(group: &str, plural: &str) -> ResourceInfo {
        Registry::builtin()
            .all()
            .find(|t| t.group == group && t.plural == plural)
            .cloned()
            .expect("served")
    }

    #[test]
    fn a_status_should_read_as_a_real_servers_to_the_byte() {
        // kube-apiserver v1.37.2's answer to a second create of ConfigMap dup.
        assert_eq!(
            ApiError::already_exists(&info("", "configmaps"), "dup")
                .status()
                .to_string(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps \"dup\" already exists","reason":"AlreadyExists","details":{"name":"dup","kind":"configmaps"},"code":409}"#
        );
        let apps = ApiError::not_found(&info("apps", "deployments"), "web").status();
        assert_eq!(
            apps["details"],
            json!({"name": "web", "group": "apps", "kind": "deployments"})
        );
        assert_eq!(ApiError::bad_request("no").status()["code"], 400);
    }
}
