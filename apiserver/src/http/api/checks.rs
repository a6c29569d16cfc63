//! What every create, update, patch and apply passes before it is stored:
//! a built-in object's decoding, defaults and validation, a custom
//! resource's schema, strict field validation, and the bounds of an object.

use std::collections::HashMap;

use kubewasm_types::info::ResourceInfo;
use serde_json::Value;

use super::Api;
use crate::http::error::ApiError;
use crate::schema::validation;

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
