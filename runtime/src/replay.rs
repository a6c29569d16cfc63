//! One reconcile with no cluster: fixtures in, the host's requests out.
//!
//! `kubewasm replay` loads objects (multi-document YAML, `kind: List`
//! flattened) into a [`MemoryCache`], runs one call of a plugin for a key
//! and returns the [`ApiRequest`]s the host would send. It runs the very
//! step the engine runs ([`step::run`]): the same choice of `reconcile` or
//! `finalize`, the same finalizer patches, the same planning, so what it
//! prints is what the engine sends. Plugin authors use it in their tests;
//! bug reports attach its inputs. [`map`] runs a plugin's `map-keys` for one
//! changed object instead (`replay --map`), as the engine does when a
//! secondary of a custom mapping changes. [`unconverged`] steps every
//! primary of a final state and keeps those whose step would still change
//! something (`replay --converged`: after a soak, a chaos run, a rollout).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::action::ApiRequest;
use crate::cache::{Cache, MemoryCache, MemoryCacheError};
use crate::error::MapError;
use crate::plugin::Plugin;
use crate::request::Request;
use crate::step::{self, Step, StepError};
use kubewasm_core::resource::{ObjectKey, ResourceType};

/// Why a replay failed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// A YAML document did not parse.
    #[error("failed to parse document #{index} of the objects: {source}")]
    Yaml {
        /// Position of the document, from 1.
        index: usize,
        /// The parse error.
        #[source]
        source: serde_yaml::Error,
    },
    /// An object lacks its identity.
    #[error(transparent)]
    Object(#[from] MemoryCacheError),
    /// The configuration is not YAML or JSON.
    #[error("failed to parse the configuration: {0}")]
    Config(#[source] serde_yaml::Error),
    /// The plugin's call failed.
    #[error("{0}: {source}", source = .0.source)]
    Step(#[source] StepError),
    /// The plugin's `map-keys` failed.
    #[error("map-keys failed: {0}")]
    Map(#[from] MapError),
    /// A recorded fixture is not one.
    #[error("invalid fixture: {0}")]
    Fixture(String),
}

/// What `replay --map` prints.
#[derive(Debug, Serialize)]
pub struct MapReport {
    /// Always `map-keys`.
    pub call: &'static str,
    /// The changed object (`NAMESPACE/NAME`, or `NAME`).
    pub object: String,
    /// The primary keys it maps to, in the plugin's order.
    pub keys: Vec<String>,
}

/// Runs `plugin`'s `map-keys` for `object`, of type `resource`, against
/// the objects of `cache` with the configuration `config` (JSON text): the
/// primary keys the engine would queue.
///
/// # Errors
/// [`ReplayError::Map`] if the call fails or a key is invalid.
pub fn map(
    plugin: &Plugin,
    cache: MemoryCache,
    resource: &ResourceType,
    object: &Value,
    config: &str,
) -> Result<MapReport, ReplayError> {
    let object_text = object.to_string();
    let keys = plugin.map(
        Arc::new(cache),
        resource,
        crate::request::MapChange::of(&object_text),
        config,
    )?;
    Ok(MapReport {
        call: "map-keys",
        object: ObjectKey::of(object)
            .map(|k| k.to_string())
            .unwrap_or_default(),
        keys: keys.iter().map(ToString::to_string).collect(),
    })
}

/// What a replay prints.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// `reconcile`, `finalize` or `none`.
    pub call: &'static str,
    /// The key reconciled.
    pub key: String,
    /// The requests the host would send, in order (its finalizer patches
    /// included).
    pub actions: Vec<ApiRequest>,
    /// The requeue the plugin asked for, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requeue_after_ms: Option<u128>,
}

impl Report {
    /// What `step`, run for `key`, prints.
    pub fn of(step: &Step, key: &ObjectKey) -> Self {
        Self {
            call: step.call.name(),
            key: key.to_string(),
            actions: step.actions.iter().map(|a| a.request()).collect(),
            requeue_after_ms: step.requeue_after.map(|d| d.as_millis()),
        }
    }
}

/// Parses multi-document YAML (or JSON) into objects; `kind: List`
/// documents are flattened and empty documents skipped.
///
/// # Errors
/// [`ReplayError::Yaml`] names the document that did not parse.
pub fn parse_objects(text: &str) -> Result<Vec<Value>, ReplayError> {
    let mut objects = Vec::new();
    for (i, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(document).map_err(|source| ReplayError::Yaml {
            index: i + 1,
            source,
        })?;
        match value {
            Value::Null => {}
            Value::Object(ref map) if map.get("kind").and_then(Value::as_str) == Some("List") => {
                if let Some(Value::Array(items)) = map.get("items") {
                    objects.extend(items.iter().cloned());
                }
            }
            other => objects.push(other),
        }
    }
    Ok(objects)
}

/// Gives each object without a `metadata.uid` a stable one, derived from
/// its identity (API version, kind, namespace, name): a fixture written by
/// hand replays as one read from a cluster, and the same fixture always
/// gives the same uids (hence the same owner references).
pub fn stable_uids(objects: &mut [Value]) {
    use sha2::Digest;
    for object in objects {
        let Some(metadata) = object.get("metadata").and_then(Value::as_object) else {
            continue;
        };
        if metadata
            .get("uid")
            .is_some_and(|uid| uid.as_str().is_some())
        {
            continue;
        }
        let field =
            |value: Option<&Value>| value.and_then(Value::as_str).unwrap_or_default().to_owned();
        let identity = [
            field(object.get("apiVersion")),
            field(object.get("kind")),
            field(metadata.get("namespace")),
            field(metadata.get("name")),
        ]
        .join("\n");
        let digest = hex::encode(sha2::Sha256::digest(identity.as_bytes()));
        // Shaped as a version-4 UUID, as the API server's are.
        let uid = format!(
            "{}-{}-4{}-8{}-{}",
            &digest[0..8],
            &digest[8..12],
            &digest[13..16],
            &digest[17..20],
            &digest[20..32]
        );
        object["metadata"]["uid"] = Value::String(uid);
    }
}

/// Parses a configuration (YAML or JSON) into JSON text.
///
/// # Errors
/// [`ReplayError::Config`] if it does not parse.
pub fn parse_config(text: &str) -> Result<String, ReplayError> {
    let value: Value = serde_yaml::from_str(text).map_err(ReplayError::Config)?;
    Ok(if value.is_null() {
        "{}".to_owned()
    } else {
        value.to_string()
    })
}

/// Runs one step of `plugin` for `request.key` against the objects of
/// `cache` (built with [`MemoryCache::from_objects`], which refuses an
/// object without its identity).
///
/// # Errors
/// [`ReplayError::Step`] if the call fails.
pub fn replay(
    plugin: &Plugin,
    cache: MemoryCache,
    request: &Request,
) -> Result<Report, ReplayError> {
    let cache: Arc<dyn Cache> = Arc::new(cache);
    let step = step::run(plugin, cache, request).map_err(ReplayError::Step)?;
    Ok(Report::of(&step, &request.key))
}

/// What a step of a converged primary may still plan: nothing but events
/// (an apply or a status apply already so is no change).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Unconverged {
    /// The primary (`NAMESPACE/NAME`, or `NAME`).
    pub key: String,
    /// The first request its step would send that changes something.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending: Option<ApiRequest>,
    /// Why its step failed, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

/// Whether `live` holds everything `applied` sets, so that a server-side
/// apply of it changes nothing: every field of a map with its value, lists
/// element by element (the server may add fields, defaults among them).
pub fn holds(applied: &Value, live: &Value) -> bool {
    match (applied, live) {
        (Value::Object(a), Value::Object(l)) => a
            .iter()
            .all(|(k, v)| l.get(k).is_some_and(|lv| holds(v, lv))),
        (Value::Array(a), Value::Array(l)) => {
            a.len() == l.len() && a.iter().zip(l).all(|(x, y)| holds(x, y))
        }
        _ => applied == live,
    }
}

/// Steps every primary of `plugin` among `objects` (its primary type and
/// selector, within the namespaces its grants hold, a Namespace counting
/// as in itself) against them all, with the configuration `config`; the
/// primaries not converged: a step that failed, or whose requests are not
/// all already so. Converged is level-triggered's end state: each apply
/// and status apply planned holds in the object it names (see [`holds`]),
/// and no delete, no finalizer patch is planned (against the state it ran
/// on, a planned delete is of an object that is there). Events are not
/// state.
///
/// # Errors
/// [`ReplayError::Object`] if an object lacks its identity.
pub fn unconverged(
    plugin: &Plugin,
    objects: &[Value],
    config: &str,
) -> Result<Vec<Unconverged>, ReplayError> {
    let cache: Arc<dyn Cache> = Arc::new(MemoryCache::from_objects(objects.iter().cloned())?);
    let declaration = plugin.declaration();
    let selector = kubewasm_core::selector::Selector::parse(&declaration.primary_selector).ok();
    let typed = |object: &Value| -> Option<(ResourceType, ObjectKey)> {
        let resource = declaration.resource_type(
            object.get("apiVersion")?.as_str()?,
            object.get("kind")?.as_str()?,
        )?;
        let name = object.pointer("/metadata/name")?.as_str()?;
        let key = match object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
        {
            Some(namespace) if resource.namespaced => ObjectKey::namespaced(namespace, name),
            _ => ObjectKey::cluster(name),
        };
        Some((resource.clone(), key))
    };
    // The objects the plugin may write, by the path a request names.
    let live: std::collections::HashMap<String, &Value> = objects
        .iter()
        .filter_map(|object| {
            let (resource, key) = typed(object)?;
            let path =
                crate::action::resource_path(&resource, key.namespace.as_deref(), Some(&key.name));
            Some((path, object))
        })
        .collect();
    let so = |request: &ApiRequest| {
        let path = request.path.split('?').next().unwrap_or_default();
        match request.action {
            "event" => true,
            "apply" => live.get(path).is_some_and(|l| holds(&request.body, l)),
            "applyStatus" => live
                .get(path.trim_end_matches("/status"))
                .is_some_and(|l| holds(&request.body["status"], &l["status"])),
            _ => false,
        }
    };
    let mut found = Vec::new();
    for object in objects {
        let Some((resource, key)) = typed(object) else {
            continue;
        };
        if resource != declaration.primary
            || !selector.as_ref().is_some_and(|s| s.matches(object))
            || !key
                .placed_in(&resource)
                .is_none_or(|namespace| plugin.grants().reads_namespace(namespace))
        {
            continue;
        }
        let request = Request {
            config: config.to_owned(),
            ..Request::new(key.clone())
        };
        let (pending, failed) = match step::run(plugin, Arc::clone(&cache), &request) {
            Ok(step) => (
                step.actions.iter().map(|a| a.request()).find(|r| !so(r)),
                None,
            ),
            Err(error) => (None, Some(format!("{error}: {}", error.source))),
        };
        if pending.is_some() || failed.is_some() {
            found.push(Unconverged {
                key: key.to_string(),
                pending,
                failed,
            });
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_should_read_an_apply_as_a_subset_of_the_object() {
        let live = serde_json::json!({"metadata": {"name": "a", "labels": {"x": "1", "y": "2"}},
            "spec": {"ports": [{"port": 80, "protocol": "TCP"}]}});
        assert!(holds(
            &serde_json::json!({"metadata": {"labels": {"x": "1"}}}),
            &live
        ));
        assert!(holds(
            &serde_json::json!({"spec": {"ports": [{"port": 80}]}}),
            &live
        ));
        assert!(!holds(
            &serde_json::json!({"metadata": {"labels": {"x": "2"}}}),
            &live
        ));
        assert!(!holds(
            &serde_json::json!({"spec": {"ports": [{"port": 80}, {"port": 81}]}}),
            &live
        ));
        assert!(!holds(&serde_json::json!({"status": {"ready": 1}}), &live));
    }

    #[test]
    fn parse_objects_should_flatten_lists_and_skip_empty_documents() {
        let text = "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\n\
                    apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Secret, metadata: {name: b}}\n";
        let objects = parse_objects(text).expect("valid yaml");
        let kinds: Vec<_> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
        assert_eq!(kinds, ["ConfigMap", "Secret"]);
    }

    #[test]
    fn parse_objects_should_name_the_bad_document() {
        let err = parse_objects("a: 1\n---\n: : :\n").expect_err("bad yaml");
        assert!(err.to_string().contains("document #2"), "{err}");
    }

    #[test]
    fn objects_without_uids_should_get_stable_ones() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: x}\n---\n\
                    apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: x}\n---\n\
                    apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, uid: kept}\n";
        let mut objects = parse_objects(text).expect("valid yaml");
        stable_uids(&mut objects);
        let uids: Vec<_> = objects
            .iter()
            .map(|o| o["metadata"]["uid"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert_eq!(uids[2], "kept");
        assert_ne!(uids[0], uids[1]);
        assert_eq!(uids[0].len(), 36, "{}", uids[0]);
        assert_eq!(&uids[0][14..15], "4");
        let mut again = parse_objects(text).expect("valid yaml");
        stable_uids(&mut again);
        assert_eq!(again[0]["metadata"]["uid"], uids[0].as_str(), "stable");
    }

    #[test]
    fn parse_config_should_accept_yaml_json_and_nothing() {
        assert_eq!(
            parse_config("replicas: 2").expect("yaml"),
            r#"{"replicas":2}"#
        );
        assert_eq!(
            parse_config(r#"{"a": true}"#).expect("json"),
            r#"{"a":true}"#
        );
        assert_eq!(parse_config("").expect("empty"), "{}");
    }
}
