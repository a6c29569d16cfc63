//! What every create, update, patch and apply passes before it is stored:
//! a built-in object's decoding into its Go type (by the reader a real
//! server uses for the verb, in its words: [`crate::schema::decoding`]),
//! defaults and validation, a custom resource's schema, strict field
//! validation, and the bounds of an object.

use std::collections::HashMap;

use kubewasm_types::info::ResourceInfo;
use serde_json::Value;

use super::Api;
use crate::http::error::ApiError;
use crate::schema::decoding::{self, Reader};
use crate::schema::validation;

/// The patches whose result a real server reads back into the Go type.
#[derive(Clone, Copy)]
pub(super) enum Patched {
    /// A merge or JSON patch: its result is JSON, read by the JSON decoder.
    Json,
    /// A strategic merge patch: its result is a map, read by the
    /// unstructured converter.
    Strategic,
}

impl Api {
    /// [`Api::validated`], then within [`crate::http::bounds`]: what every
    /// create, update, patch and apply passes before it is stored.
    pub(super) fn checked(
        info: &ResourceInfo,
        name: &str,
        object: Value,
        strict: bool,
    ) -> Result<Value, ApiError> {
        let object = Self::validated(info, name, object, strict)?;
        crate::http::bounds::check_object(&object)
            .map_err(|e| ApiError::out_of_bounds(info, name, &e))?;
        Ok(object)
    }

    /// Defaults, prunes and validates a custom resource against its schema
    /// ([`crate::schema::structural`]); under `fieldValidation=Strict` an unknown field
    /// is refused rather than pruned.
    fn validated(
        info: &ResourceInfo,
        name: &str,
        mut object: Value,
        strict: bool,
    ) -> Result<Value, ApiError> {
        crate::objects::normalize_builtin(info, &mut object);
        let Some(schema) = &info.schema else {
            if let (true, Some(typed)) = (strict, info.typed) {
                let known = typed(&object)
                    .map_err(|e| ApiError::bad_request(format!("strict decoding error: {e}")))?;
                let unknown = crate::schema::structural::unknown_fields(&object, &known);
                if !unknown.is_empty() {
                    return Err(unknown_fields(&unknown));
                }
            }
            let namespace = crate::objects::text_at(&object, "/metadata/namespace");
            let problems = validation::problems(info, &object, Some(namespace), Vec::new());
            if !problems.is_empty() {
                return Err(ApiError::invalid_fields(info, name, &problems));
            }
            return Ok(object);
        };
        let findings = crate::schema::structural::process(&mut object, schema);
        if strict && !findings.unknown.is_empty() {
            return Err(unknown_fields(&findings.unknown));
        }
        if !findings.errors.is_empty() {
            return Err(ApiError::invalid_fields(info, name, &findings.errors));
        }
        Ok(object)
    }

    /// A create's or update's body, read by the JSON decoder: 400, as a
    /// real server refuses a body it cannot decode.
    pub(super) fn decodable(info: &ResourceInfo, body: &Value) -> Result<(), ApiError> {
        match decoding::mismatch(info, body, Reader::Json) {
            None => Ok(()),
            Some(mismatch) => Err(ApiError::bad_request(format!(
                "{kind} in version {:?} cannot be handled as a {kind}: {mismatch}",
                info.version,
                kind = info.kind
            ))),
        }
    }

    /// A patch's result, read back into the Go type: 422 on the `patch`
    /// field, quoting the patched object (a merge or JSON patch) or the
    /// patch as Go prints a map (a strategic merge patch).
    pub(super) fn patch_decodable(
        info: &ResourceInfo,
        patched: Patched,
        patch: &Value,
        result: &Value,
    ) -> Result<(), ApiError> {
        let (reader, quoted) = match patched {
            Patched::Json => (Reader::Json, result.to_string()),
            Patched::Strategic => (Reader::Unstructured, decoding::go_printed(patch)),
        };
        match decoding::mismatch(info, result, reader) {
            None => Ok(()),
            Some(mismatch) => Err(ApiError::invalid_unnamed(&format!(
                "patch: Invalid value: {quoted:?}: {mismatch}"
            ))),
        }
    }

    /// An apply's configuration as a real server first reads it: into a
    /// map (anything but an object or null refused), then its
    /// `apiVersion` and `kind`, a value that is not a string read as empty
    /// (`invalid object type: /, Kind=Ingress`).
    pub(super) fn apply_readable(document: &Value) -> Result<(), ApiError> {
        if !document.is_object() && !document.is_null() {
            return Err(ApiError::bad_request(format!(
                "error decoding patch: error unmarshaling JSON: while decoding JSON: json: \
                 cannot unmarshal {} into Go value of type map[string]interface {{}}",
                super::request::go_type(document)
            )));
        }
        let field = |name: &str| document.get(name).filter(|v| !v.is_null());
        let text = |name: &str| field(name).and_then(Value::as_str).unwrap_or_default();
        if [field("apiVersion"), field("kind")]
            .iter()
            .flatten()
            .any(|v| !v.is_string())
        {
            let (group, version) = text("apiVersion")
                .rsplit_once('/')
                .unwrap_or(("", text("apiVersion")));
            return Err(ApiError::bad_request(format!(
                "invalid object type: {group}/{version}, Kind={}",
                text("kind")
            )));
        }
        Ok(())
    }

    /// An apply's configuration, made a typed object as a real server
    /// makes it (500): a value of the wrong shape fails the typed patch,
    /// one the conversion refuses (a quantity, a time) fails converting it.
    pub(super) fn apply_decodable(
        info: &ResourceInfo,
        name: &str,
        applied: &Value,
    ) -> Result<(), ApiError> {
        let namespace = crate::objects::text_at(applied, "/metadata/namespace");
        let gvk = format!("{}/{}, Kind={}", info.group, info.version, info.kind);
        let object = format!("{namespace}/{name}; {gvk}");
        let message = if let Some(mismatch) = decoding::mismatch(info, applied, Reader::Apply) {
            format!("failed to create typed patch object ({object}): {mismatch}")
        } else if let Some(mismatch) = decoding::mismatch(info, applied, Reader::Unstructured) {
            format!(
                "failed to convert new object ({object}) to proper version: unable to convert \
                 unstructured object to {gvk}: {mismatch}"
            )
        } else {
            return Ok(());
        };
        Err(ApiError::unreasoned(message))
    }

    /// Whether the request asks for strict field validation.
    pub(super) fn strict(query: &HashMap<String, String>) -> bool {
        query.get("fieldValidation").is_some_and(|v| v == "Strict")
    }
}

/// The refusal of fields a strict write names and its type does not know.
fn unknown_fields(fields: &[impl std::fmt::Display]) -> ApiError {
    let named: Vec<String> = fields
        .iter()
        .map(|f| format!("unknown field \"{f}\""))
        .collect();
    ApiError::bad_request(format!("strict decoding error: {}", named.join(", ")))
}
