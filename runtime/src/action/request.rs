//! An [`Action`] as the exact API request the applier sends (and `kubewasm
//! replay` prints): method, a path built from validated parts, each segment
//! percent-encoded, content type and body.

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::planned::{Action, Planned};
use kubewasm_core::resource::{ObjectKey, ResourceType};

/// The HTTP method of an [`ApiRequest`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Method {
    /// Creation (events).
    Post,
    /// Apply patches and JSON patches.
    Patch,
    /// Deletion.
    Delete,
}

impl Method {
    /// The method as HTTP spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Post => "POST",
            Self::Patch => "PATCH",
            Self::Delete => "DELETE",
        }
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One API request, as the applier sends it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiRequest {
    /// `apply`, `applyStatus`, `delete` or `event`.
    pub action: &'static str,
    /// HTTP method.
    pub method: Method,
    /// Path and query.
    pub path: String,
    /// Content type of the body.
    pub content_type: &'static str,
    /// The body.
    pub body: Value,
}

/// The URL path of a collection (`name` is `None`) or an object.
pub fn resource_path(
    resource: &ResourceType,
    namespace: Option<&str>,
    name: Option<&str>,
) -> String {
    let mut path = if resource.group.is_empty() {
        format!("/api/{}", resource.version)
    } else {
        format!("/apis/{}/{}", resource.group, resource.version)
    };
    if let Some(namespace) = namespace.filter(|_| resource.namespaced) {
        path.push_str("/namespaces/");
        push_segment(&mut path, namespace);
    }
    path.push('/');
    push_segment(&mut path, &resource.plural);
    if let Some(name) = name {
        path.push('/');
        push_segment(&mut path, name);
    }
    path
}

/// Appends one path segment, percent-encoding every byte that is not an
/// RFC 3986 `pchar` (names are validated first; this keeps a path's shape
/// even if a rule ever lets through a `?`, `#` or `/`).
fn push_segment(path: &mut String, segment: &str) {
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~:@!$&'()*+,;=".contains(&byte) {
            path.push(char::from(byte));
        } else {
            path.push_str(&format!("%{byte:02X}"));
        }
    }
}

const APPLY_PATCH: &str = "application/apply-patch+yaml";

impl Action {
    /// Whether the action's end is something gone (an object deleted, a
    /// finalizer removed): when the object is already gone (404), it is
    /// done.
    pub fn removes(&self) -> bool {
        matches!(
            self.0,
            Planned::Delete { .. } | Planned::Finalizer { add: false, .. }
        )
    }

    /// The object this action writes and leaves in the cluster (an apply:
    /// not a status, a finalizer patch or an event), or removes (a delete):
    /// its type, its key, and whether it remains.
    pub fn object(&self) -> Option<(&ResourceType, &ObjectKey, bool)> {
        match &self.0 {
            Planned::Apply { resource, key, .. } => Some((resource, key, true)),
            Planned::Delete { resource, key, .. } => Some((resource, key, false)),
            _ => None,
        }
    }

    /// An apply's parts (a status apply's too; nothing for another
    /// action): what the host compares with the cached object to leave
    /// out a write the server would not change.
    pub fn applied(&self) -> Option<Applied<'_>> {
        match &self.0 {
            Planned::Apply {
                resource,
                key,
                field_manager,
                object,
                force,
            } => Some(Applied {
                resource,
                key,
                field_manager,
                object,
                status: false,
                force: *force,
            }),
            Planned::ApplyStatus {
                resource,
                key,
                field_manager,
                object,
            } => Some(Applied {
                resource,
                key,
                field_manager,
                object,
                status: true,
                force: true,
            }),
            _ => None,
        }
    }

    /// The API request that performs this action.
    pub fn request(&self) -> ApiRequest {
        match &self.0 {
            Planned::Apply {
                resource,
                key,
                field_manager,
                object,
                force,
            } => ApiRequest {
                action: "apply",
                method: Method::Patch,
                path: format!(
                    "{}?fieldManager={field_manager}{}",
                    resource_path(resource, key.namespace.as_deref(), Some(&key.name)),
                    if *force { "&force=true" } else { "" }
                ),
                content_type: APPLY_PATCH,
                body: object.clone(),
            },
            Planned::ApplyStatus {
                resource,
                key,
                field_manager,
                object,
            } => ApiRequest {
                action: "applyStatus",
                method: Method::Patch,
                path: format!(
                    "{}/status?fieldManager={field_manager}&force=true",
                    resource_path(resource, key.namespace.as_deref(), Some(&key.name))
                ),
                content_type: APPLY_PATCH,
                body: object.clone(),
            },
            Planned::Delete {
                resource,
                key,
                uid,
                resource_version,
            } => {
                let mut body = json!({"apiVersion": "v1", "kind": "DeleteOptions",
                                      "propagationPolicy": "Background"});
                let mut preconditions = Map::new();
                if let Some(uid) = uid {
                    preconditions.insert("uid".into(), uid.clone().into());
                }
                if let Some(version) = resource_version {
                    preconditions.insert("resourceVersion".into(), version.clone().into());
                }
                if !preconditions.is_empty() {
                    body["preconditions"] = preconditions.into();
                }
                ApiRequest {
                    action: "delete",
                    method: Method::Delete,
                    path: resource_path(resource, key.namespace.as_deref(), Some(&key.name)),
                    content_type: "application/json",
                    body,
                }
            }
            Planned::Finalizer {
                add,
                resource,
                key,
                patch,
            } => ApiRequest {
                action: if *add {
                    "addFinalizer"
                } else {
                    "removeFinalizer"
                },
                method: Method::Patch,
                path: resource_path(resource, key.namespace.as_deref(), Some(&key.name)),
                content_type: "application/json-patch+json",
                body: patch.clone(),
            },
            Planned::Event { object } => ApiRequest {
                action: "event",
                method: Method::Post,
                path: format!(
                    "/apis/events.k8s.io/v1/namespaces/{}/events",
                    object
                        .pointer("/metadata/namespace")
                        .and_then(Value::as_str)
                        .unwrap_or("default")
                ),
                content_type: "application/json",
                body: object.clone(),
            },
        }
    }
}

/// An apply's parts ([`Action::applied`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Applied<'a> {
    /// The object's type.
    pub resource: &'a ResourceType,
    /// Its identity.
    pub key: &'a ObjectKey,
    /// The field manager.
    pub field_manager: &'a str,
    /// The apply body.
    pub object: &'a Value,
    /// Whether it applies the status subresource.
    pub status: bool,
    /// Whether it takes over fields other managers own.
    pub force: bool,
}
