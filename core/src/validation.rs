//! Kubernetes' rules for names, namespaces and labels, as the API server
//! applies them (`k8s.io/apimachinery/pkg/util/validation`).
//!
//! The host checks every name, namespace and label a plugin returns with
//! these rules before it builds a request, so nothing a plugin says can
//! change the shape of a URL (`a/b`, `..`, `?`) or smuggle a value the API
//! server would refuse. The Rust SDK's test harness uses the same functions.

use std::fmt;

use serde_json::Value;

use crate::resource::ResourceType;

/// What a name, namespace or label broke.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid {what} `{value}`: {rule}")]
pub struct Invalid {
    /// `name`, `namespace`, `label key`, `label value`.
    pub what: &'static str,
    /// The value, shortened to 80 characters.
    pub value: String,
    /// The rule it broke.
    pub rule: Rule,
}

/// A naming rule of Kubernetes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// RFC 1123 label: at most 63 lowercase alphanumerics or `-`, starting
    /// and ending alphanumeric.
    DnsLabel,
    /// RFC 1123 subdomain: at most 253 characters, DNS labels joined by `.`.
    DnsSubdomain,
    /// A path segment name: not empty, `.` or `..`, without `/` or `%`, at
    /// most 253 printable ASCII characters.
    PathSegment,
    /// A label key: an optional DNS-subdomain prefix and `/`, then a name of
    /// at most 63 alphanumerics, `-`, `_` or `.`, starting and ending
    /// alphanumeric.
    LabelKey,
    /// A label value: empty, or like the name part of a key.
    LabelValue,
    /// A label value must be a string.
    LabelString,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::DnsLabel => {
                "must be a DNS label: at most 63 lowercase letters, digits or '-', starting and ending with a letter or digit"
            }
            Self::DnsSubdomain => {
                "must be a DNS subdomain: at most 253 lowercase letters, digits, '-' or '.', starting and ending with a letter or digit"
            }
            Self::PathSegment => {
                "must be a path segment name: printable ASCII, not empty, '.' or '..', without '/' or '%', at most 253 characters"
            }
            Self::LabelKey => {
                "must be an optional DNS subdomain and '/', then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
            }
            Self::LabelValue => {
                "must be empty or at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
            }
            Self::LabelString => "must be a string",
        })
    }
}

fn invalid(what: &'static str, value: &str, rule: Rule) -> Invalid {
    Invalid {
        what,
        value: value.chars().take(80).collect(),
        rule,
    }
}

/// Whether `s` is an RFC 1123 DNS label.
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Whether `s` is an RFC 1035 DNS label: an RFC 1123 one that starts with a
/// letter.
pub fn is_dns1035_label(s: &str) -> bool {
    is_dns_label(s) && s.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
}

/// Whether `s` is an RFC 1123 subdomain: DNS labels joined by `.`, at most
/// 253 characters.
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

fn is_qualified_name_part(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && s.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric())
}

/// Checks a namespace name.
///
/// # Errors
/// [`Invalid`] unless it is a DNS label.
pub fn namespace(ns: &str) -> Result<(), Invalid> {
    if is_dns_label(ns) {
        Ok(())
    } else {
        Err(invalid("namespace", ns, Rule::DnsLabel))
    }
}

/// The rule names of objects of `resource` follow: see [`kind_name_rule`].
pub fn name_rule(resource: &ResourceType) -> Rule {
    kind_name_rule(&resource.group, &resource.kind)
}

/// The rule names of objects of `kind` in `group` follow, as a Kubernetes
/// 1.37 server checks them: a DNS label for Namespaces, Services (their
/// relaxed rule) and StatefulSets, a path segment for RBAC types
/// (`system:controller:x`) and PodDisruptionBudgets (whose validation
/// checks no name), a DNS subdomain for everything else.
pub fn kind_name_rule(group: &str, kind: &str) -> Rule {
    match (group, kind) {
        ("", "Namespace" | "Service") | ("apps", "StatefulSet") => Rule::DnsLabel,
        ("rbac.authorization.k8s.io", _) | ("policy", "PodDisruptionBudget") => Rule::PathSegment,
        _ => Rule::DnsSubdomain,
    }
}

/// Checks the name of an object of `resource`.
///
/// # Errors
/// [`Invalid`] names the rule it broke.
pub fn name(resource: &ResourceType, name: &str) -> Result<(), Invalid> {
    let rule = name_rule(resource);
    let ok = match rule {
        Rule::DnsLabel => is_dns_label(name),
        Rule::PathSegment => {
            !name.is_empty()
                && name.len() <= 253
                && name != "."
                && name != ".."
                && name
                    .bytes()
                    .all(|b| b.is_ascii_graphic() && b != b'/' && b != b'%')
        }
        _ => is_dns_subdomain(name),
    };
    if ok {
        Ok(())
    } else {
        Err(invalid("name", name, rule))
    }
}

/// Checks a label key.
///
/// # Errors
/// [`Invalid`] unless it is a qualified name.
pub fn label_key(key: &str) -> Result<(), Invalid> {
    let ok = match key.split_once('/') {
        Some((prefix, name)) => {
            !prefix.is_empty() && is_dns_subdomain(prefix) && is_qualified_name_part(name)
        }
        None => is_qualified_name_part(key),
    };
    if ok {
        Ok(())
    } else {
        Err(invalid("label key", key, Rule::LabelKey))
    }
}

/// Checks a label value.
///
/// # Errors
/// [`Invalid`] unless it is empty or a qualified name part.
pub fn label_value(value: &str) -> Result<(), Invalid> {
    if value.is_empty() || is_qualified_name_part(value) {
        Ok(())
    } else {
        Err(invalid("label value", value, Rule::LabelValue))
    }
}

/// Checks `metadata.labels` of an object, if it has any.
///
/// # Errors
/// The first [`Invalid`] key or value.
pub fn labels(object: &Value) -> Result<(), Invalid> {
    let Some(labels) = object
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
    else {
        return Ok(());
    };
    for (key, value) in labels {
        label_key(key)?;
        match value {
            Value::String(value) => label_value(value)?,
            Value::Null => {}
            other => {
                return Err(invalid(
                    "label value",
                    &other.to_string(),
                    Rule::LabelString,
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ty(group: &str, kind: &str) -> ResourceType {
        ResourceType {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            plural: String::new(),
            namespaced: true,
        }
    }

    #[test]
    fn names_should_follow_the_rule_of_their_type() {
        let cm = ty("", "ConfigMap");
        for bad in [
            "",
            "a/b",
            "..",
            ".",
            "a?b",
            "A",
            "-a",
            "a..b",
            &"a".repeat(254),
        ] {
            assert!(name(&cm, bad).is_err(), "{bad:?}");
        }
        let longest = [
            &"a".repeat(63),
            &"a".repeat(63),
            &"a".repeat(63),
            &"a".repeat(61),
        ]
        .map(String::as_str)
        .join(".");
        assert_eq!(longest.len(), 253);
        for good in ["a", "a.b-c", "0x", &longest] {
            assert!(name(&cm, good).is_ok(), "{good:?}");
        }
        // Services' relaxed rule (Kubernetes 1.37): a DNS label.
        assert!(name(&ty("", "Service"), "1abc").is_ok());
        assert!(name(&ty("", "Service"), "a.b").is_err());
        assert!(name(&ty("apps", "StatefulSet"), "a.b").is_err());
        assert!(name(&ty("policy", "PodDisruptionBudget"), "Not_Valid").is_ok());
        assert!(name(&ty("", "Namespace"), "a.b").is_err());
        let role = ty("rbac.authorization.k8s.io", "ClusterRole");
        assert!(name(&role, "system:controller:x").is_ok());
        for bad in ["..", "a/b", "a%2f", "a b", "a?b\n"] {
            assert!(name(&role, bad).is_err(), "{bad:?}");
        }
        let err = name(&cm, "a/b").expect_err("slash");
        assert!(
            err.to_string()
                .starts_with("invalid name `a/b`: must be a DNS subdomain"),
            "{err}"
        );
    }

    #[test]
    fn labels_should_follow_qualified_names() {
        assert!(label_key("app").is_ok());
        assert!(label_key("example.com/app").is_ok());
        for bad in [
            "",
            "/app",
            "a/b/c",
            "Example.com/app",
            "-app",
            &"a".repeat(64),
        ] {
            assert!(label_key(bad).is_err(), "{bad:?}");
        }
        assert!(label_value("").is_ok() && label_value("v1.2_3").is_ok());
        assert!(label_value("a b").is_err() && label_value("-a").is_err());
        let object = serde_json::json!({"metadata": {"labels": {"ok": "yes", "n": 1}}});
        assert_eq!(labels(&object).expect_err("number").rule, Rule::LabelString);
        assert!(namespace("kube-system").is_ok() && namespace("..").is_err());
    }
}
