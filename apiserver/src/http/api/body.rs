//! A write's body read as the object it names: a JSON object whose
//! `apiVersion` and `kind`, when given, are the target's, and whose name,
//! for a write to one object, is the URL's; refused otherwise in a real
//! server's words (its decoder's for a built-in type, its validation's for
//! a custom resource).

use serde_json::Value;

use super::Api;
use super::request::Request;
use crate::http::error::ApiError;
use kubewasm_types::info::ResourceInfo;

/// A body of another kind than the target's, as a real server refuses it:
/// a custom resource's is invalid (its `kind` field, the error about the
/// kind it names), a built-in's cannot be decoded (a kind its scheme does
/// not register in that version).
fn wrong_kind(info: &ResourceInfo, kind: &str, body: &Value) -> ApiError {
    if info.custom {
        let named = ResourceInfo {
            kind: kind.to_owned(),
            ..info.clone()
        };
        let name = body
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        return ApiError::invalid(
            &named,
            name,
            format!("kind: Invalid value: {kind:?}: must be {}", info.kind),
        );
    }
    unregistered(info, &info.api_version(), kind)
}

/// A built-in body of a group version or kind its scheme does not
/// register (`apiVersion: apps/v9`), as a real server's decoder refuses it.
fn unregistered(info: &ResourceInfo, api_version: &str, kind: &str) -> ApiError {
    let version = api_version.rsplit_once('/').map_or(api_version, |(_, v)| v);
    ApiError::bad_request(format!(
        "{kind} in version {version:?} cannot be handled as a {}: no kind {kind:?} is registered for \
         version {api_version:?} in scheme \"pkg/runtime/scheme.go:111\"",
        info.kind,
    ))
}

impl Api {
    /// The request's object, decoded; its `apiVersion` and `kind`, when
    /// given, must be the target's.
    pub(super) fn body(info: &ResourceInfo, request: &Request<'_>) -> Result<Value, ApiError> {
        let body: Value = request.object_document(&info.kind)?;
        if !body.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request must be a JSON object",
            ));
        }
        // Empty is unset, as Go's decoder reads it.
        let field = |f: &str| {
            body.get(f)
                .and_then(Value::as_str)
                .filter(|v| !v.is_empty())
        };
        if let Some(api_version) = field("apiVersion")
            && api_version != info.api_version()
        {
            if !info.custom {
                let kind = field("kind").unwrap_or(&info.kind);
                return Err(unregistered(info, api_version, kind));
            }
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({api_version}) does not match the expected API version ({})",
                info.api_version()
            )));
        }
        if let Some(kind) = field("kind")
            && kind != info.kind
        {
            return Err(wrong_kind(info, kind, &body));
        }
        Ok(body)
    }

    /// [`Api::body`] of a write to the object `name`: a name in the body
    /// must be that one.
    pub(super) fn body_named(
        info: &ResourceInfo,
        request: &Request<'_>,
        name: &str,
    ) -> Result<Value, ApiError> {
        let body = Self::body(info, request)?;
        same_name(&body, name)?;
        Ok(body)
    }
}

/// Refuses (400) an object whose name is not the one its URL names, in a
/// real server's words.
pub(super) fn same_name(object: &Value, name: &str) -> Result<(), ApiError> {
    match object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|n| *n != name)
    {
        Some(sent) => Err(ApiError::bad_request(format!(
            "the name of the object ({sent}) does not match the name on the URL ({name})"
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use kubewasm_types::registry::Registry;

    fn info(group: &str, version: &str, plural: &str) -> ResourceInfo {
        Registry::builtin()
            .get(group, version, plural)
            .cloned()
            .expect("served")
    }

    /// The real kube-apiserver's answers (v1.37.2, `make difference`).
    #[test]
    fn a_body_of_another_kind_should_be_refused_in_the_real_servers_words() {
        let body = json!({"kind": "Wrong", "metadata": {"name": "c"}});
        let builtin = wrong_kind(&info("apps", "v1", "deployments"), "Wrong", &body);
        assert_eq!(builtin.code, 400);
        assert_eq!(
            builtin.status()["message"],
            "Wrong in version \"v1\" cannot be handled as a Deployment: no kind \"Wrong\" is \
             registered for version \"apps/v1\" in scheme \"pkg/runtime/scheme.go:111\""
        );
        let gadget = ResourceInfo {
            group: "difference.example.com".to_owned(),
            kind: "Gadget".to_owned(),
            custom: true,
            ..info("", "v1", "configmaps")
        };
        let custom = wrong_kind(&gadget, "Wrong", &body).status();
        assert_eq!(custom["code"], 422);
        assert_eq!(
            custom["message"],
            "Wrong.difference.example.com \"c\" is invalid: kind: Invalid value: \"Wrong\": must be Gadget"
        );
        assert_eq!(custom["details"]["kind"], "Wrong");
        assert_eq!(custom["details"]["causes"][0]["field"], "kind");
    }
}
