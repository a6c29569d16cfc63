//! CustomResourceDefinitions: which types a CRD serves, and whether it is
//! valid (the checks, and the messages, of the API server's 422).

use serde_json::Value;

use crate::info::ResourceInfo;
use crate::value::strings_at;

/// The storage group of CRDs.
pub const GROUP: &str = "apiextensions.k8s.io";
/// The plural of CRDs.
pub const PLURAL: &str = "customresourcedefinitions";

/// Whether a type is the CRD type itself.
pub fn is_crd(info: &ResourceInfo) -> bool {
    info.group == GROUP && info.plural == PLURAL
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

/// Checks a CRD and returns the types it serves, one per served version.
///
/// # Errors
/// A message for a 422: the name must be `<plural>.<group>`, names and
/// versions must be set.
pub fn served_types(crd: &Value) -> Result<Vec<ResourceInfo>, String> {
    let group = str_at(crd, "/spec/group").ok_or("spec.group: Required value")?;
    let plural = str_at(crd, "/spec/names/plural").ok_or("spec.names.plural: Required value")?;
    let kind = str_at(crd, "/spec/names/kind").ok_or("spec.names.kind: Required value")?;
    check_names(crd, group, plural, kind)?;
    let name = str_at(crd, "/metadata/name").unwrap_or("");
    if name != format!("{plural}.{group}") {
        return Err(format!(
            "metadata.name: Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"
        ));
    }
    let namespaced = match str_at(crd, "/spec/scope") {
        Some("Namespaced") => true,
        Some("Cluster") => false,
        other => {
            return Err(format!(
                "spec.scope: Unsupported value: {other:?}: supported values: \"Cluster\", \"Namespaced\""
            ));
        }
    };
    let strings = |pointer: &str| strings_at(crd, pointer);
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .filter(|v| !v.is_empty())
        .ok_or(
            "spec.versions: Invalid value: must have exactly one version marked as storage version",
        )?;
    if versions
        .iter()
        .filter(|v| v.get("storage") == Some(&Value::Bool(true)))
        .count()
        != 1
    {
        return Err(
            "spec.versions: Invalid value: must have exactly one version marked as storage version"
                .into(),
        );
    }
    for (i, version) in versions.iter().enumerate() {
        check_metadata_schema(i, version)?;
    }
    let storage_version_hash = versions
        .iter()
        .find(|v| v.get("storage") == Some(&Value::Bool(true)))
        .and_then(|v| v.get("name")?.as_str())
        .map(|storage| storage_version_hash(group, storage, kind));
    Ok(versions
        .iter()
        .filter(|v| v.get("served") != Some(&Value::Bool(false)))
        .filter_map(|v| {
            let version = v.get("name")?.as_str()?;
            Some(ResourceInfo {
                group: group.to_owned(),
                version: version.to_owned(),
                kind: kind.to_owned(),
                list_kind: str_at(crd, "/spec/names/listKind")
                    .map_or_else(|| format!("{kind}List"), str::to_owned),
                plural: plural.to_owned(),
                singular: str_at(crd, "/spec/names/singular")
                    .map_or_else(|| kind.to_lowercase(), str::to_owned),
                namespaced,
                short_names: strings("/spec/names/shortNames"),
                categories: strings("/spec/names/categories"),
                status: v.pointer("/subresources/status").is_some(),
                scale: v.pointer("/subresources/scale").is_some(),
                generation: true,
                create_on_update: false,
                unconditional_update: false,
                custom: true,
                storage_version_hash: storage_version_hash.clone(),
                schema: v
                    .pointer("/schema/openAPIV3Schema")
                    .cloned()
                    .map(std::sync::Arc::new),
                typed: None,
                field_schema: None,
                printer_columns: v
                    .get("additionalPrinterColumns")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
            })
        })
        .collect())
}

/// apimachinery's `StorageVersionHash`: the first 8 bytes of the SHA-256 of
/// `group/version/kind` (`core` for the core group), in base64.
fn storage_version_hash(group: &str, version: &str, kind: &str) -> String {
    use base64::Engine;
    use sha2::Digest;
    let group = if group.is_empty() { "core" } else { group };
    let digest = sha2::Sha256::digest(format!("{group}/{version}/{kind}"));
    base64::engine::general_purpose::STANDARD.encode(&digest[..8])
}

/// A version's schema may say of `metadata` only that it is an object and
/// restrict its `name` and `generateName`: the rest is the server's
/// (`controller-gen` writes `metadata: {type: object}`).
fn check_metadata_schema(index: usize, version: &Value) -> Result<(), String> {
    let Some(metadata) = version.pointer("/schema/openAPIV3Schema/properties/metadata") else {
        return Ok(());
    };
    let names_only = metadata.as_object().is_some_and(|m| {
        m.iter().all(|(key, value)| match key.as_str() {
            "type" => value == "object",
            "description" => true,
            "properties" => value
                .as_object()
                .is_some_and(|p| p.keys().all(|k| k == "name" || k == "generateName")),
            _ => false,
        })
    });
    if names_only {
        return Ok(());
    }
    Err(format!(
        "spec.versions[{index}].schema.openAPIV3Schema.properties[metadata]: Forbidden: must not specify anything \
         other than name and generateName, but metadata is implicitly specified"
    ))
}

/// The annotation that lets a CRD use a `k8s.io` or `kubernetes.io` group.
pub const API_APPROVED: &str = "api-approved.kubernetes.io";

/// The group and plural a CRD may claim: a dotted DNS subdomain that no
/// built-in type uses (so a CRD can never shadow, or on deletion take,
/// a built-in resource), a protected group only when approved, a DNS label
/// for a plural.
fn check_names(crd: &Value, group: &str, plural: &str, kind: &str) -> Result<(), String> {
    use kubewasm_core::validation::{is_dns_label, is_dns_subdomain, is_dns1035_label};
    if !group.contains('.') || !is_dns_subdomain(group) {
        return Err(format!(
            "spec.group: Invalid value: \"{group}\": should be a domain with at least one dot"
        ));
    }
    if crate::registry::Registry::builtin()
        .all()
        .any(|t| t.group == group)
    {
        return Err(format!(
            "spec.group: Invalid value: \"{group}\": is served by the built-in API"
        ));
    }
    let protected = [".k8s.io", ".kubernetes.io"]
        .iter()
        .any(|suffix| group.ends_with(suffix) || group == &suffix[1..]);
    let approved = crd
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(API_APPROVED))
        .is_some();
    if protected && !approved {
        return Err(format!(
            "metadata.annotations[{API_APPROVED}]: Required value: protected groups must have approval annotation \"{API_APPROVED}\", see https://github.com/kubernetes/enhancements/pull/1111"
        ));
    }
    if !is_dns_label(plural) {
        return Err(format!(
            "spec.names.plural: Invalid value: \"{plural}\": a lowercase RFC 1123 label"
        ));
    }
    // As the API server: a kind is a DNS-1035 label but for its case, and
    // so is each version's name (what generated code names them by).
    if !is_dns1035_label(&kind.to_ascii_lowercase()) {
        return Err(format!(
            "spec.names.kind: Invalid value: \"{kind}\": may have mixed case, but should otherwise match: [a-z]([-a-z0-9]*[a-z0-9])?"
        ));
    }
    let versions = crd.pointer("/spec/versions").and_then(Value::as_array);
    for (i, version) in versions.into_iter().flatten().enumerate() {
        let name = version
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !is_dns1035_label(name) {
            return Err(format!(
                "spec.versions[{i}].name: Invalid value: \"{name}\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn crd(name: &str) -> Value {
        json!({"metadata": {"name": name}, "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "myapps", "kind": "MyApp", "shortNames": ["ma"]},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}}},
                {"name": "v1beta1", "served": false, "storage": false}]}})
    }

    #[test]
    fn a_crd_should_serve_its_served_versions() {
        let types = served_types(&crd("myapps.example.com")).expect("valid");
        assert_eq!(types.len(), 1);
        let t = &types[0];
        assert_eq!(
            (t.kind.as_str(), t.list_kind.as_str(), t.singular.as_str()),
            ("MyApp", "MyAppList", "myapp")
        );
        assert!(t.namespaced && t.status && !t.scale && t.custom);
        assert_eq!(t.short_names, ["ma"]);
    }

    #[test]
    fn a_crd_should_say_of_metadata_only_its_name_rules() {
        let with = |metadata: Value| {
            let mut c = crd("myapps.example.com");
            c["spec"]["versions"][0]["schema"] = json!({"openAPIV3Schema": {"type": "object", "properties": {"metadata": metadata}}});
            served_types(&c)
        };
        assert!(with(json!({"type": "object"})).is_ok(), "controller-gen's");
        assert!(with(json!({"type": "object", "properties": {"name": {"maxLength": 9}}})).is_ok());
        for refused in [
            json!({"type": "object", "properties": {"labels": {"type": "object"}}}),
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
            json!({"type": "string"}),
        ] {
            assert_eq!(
                with(refused).err().as_deref(),
                Some(
                    "spec.versions[0].schema.openAPIV3Schema.properties[metadata]: Forbidden: must not \
                     specify anything other than name and generateName, but metadata is implicitly specified"
                )
            );
        }
    }

    #[test]
    fn a_crd_should_never_claim_a_built_in_or_protected_group() {
        let claim = |group: &str, plural: &str| {
            let mut c = crd(&format!("{plural}.{group}"));
            c["spec"]["group"] = group.into();
            c["spec"]["names"]["plural"] = plural.into();
            served_types(&c)
        };
        for (group, plural) in [
            ("apps", "deployments"),
            ("", "configmaps"),
            ("rbac.authorization.k8s.io", "roles"),
            ("apiextensions.k8s.io", "customresourcedefinitions"),
            ("example.com", "Bad_Plural"),
            ("new.k8s.io", "things"),
        ] {
            assert!(
                claim(group, plural).is_err(),
                "{group}/{plural} was accepted"
            );
        }
        let mut approved = crd("things.new.k8s.io");
        approved["spec"]["group"] = "new.k8s.io".into();
        approved["spec"]["names"]["plural"] = "things".into();
        approved["metadata"]["annotations"] = json!({API_APPROVED: "unapproved, testing"});
        assert!(served_types(&approved).is_ok());
    }

    #[test]
    fn a_crd_should_refuse_a_kind_or_version_that_is_no_dns_1035_label() {
        let mut bad_kind = crd("myapps.example.com");
        bad_kind["spec"]["names"]["kind"] = "W = 1\nimport os\nX".into();
        let err = served_types(&bad_kind).expect_err("bad kind");
        assert!(err.starts_with("spec.names.kind: Invalid value"), "{err}");
        let mut bad_version = crd("myapps.example.com");
        bad_version["spec"]["versions"][1]["name"] = "v1'); throw 1;('".into();
        let err = served_types(&bad_version).expect_err("bad version");
        assert!(
            err.starts_with("spec.versions[1].name: Invalid value"),
            "{err}"
        );
    }

    #[test]
    fn a_crd_should_be_named_plural_dot_group() {
        let err = served_types(&crd("wrong.example.com")).expect_err("bad name");
        assert!(err.contains("must be spec.names.plural"), "{err}");
    }
}
