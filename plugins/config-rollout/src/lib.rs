//! Rolls a Deployment's pods when its configuration changes.
//!
//! A ConfigMap labelled `kubewasm.dev/rollout: <deployment>` belongs to the
//! Deployment of that name in its namespace. The plugin keeps a hash of
//! those ConfigMaps in an annotation of the Deployment's pod template
//! (`kubewasm.dev/config-hash` unless configured otherwise), so a change of
//! their data rolls the pods, as stakater/Reloader does. When no ConfigMap
//! is left, the annotation is removed.
//!
//! What it shows of the contract that `myapp` does not: a label-selected
//! secondary mapped to primaries through a label, a partial server-side
//! apply of an object the plugin does not own (it touches only its own
//! field), configuration with a schema, and events.

use std::collections::BTreeMap;

use kubewasm_guest::k8s_openapi::api::apps::v1::Deployment;
use kubewasm_guest::k8s_openapi::api::core::v1::ConfigMap;
use kubewasm_guest::serde_json::json;
use kubewasm_guest::{
    Context, Declaration, Event, Mapping, Outcome, Reconciler, Result, Secondary, Verb,
};
use serde::Deserialize;

/// The label that ties a ConfigMap to a Deployment.
pub const ROLLOUT_LABEL: &str = "kubewasm.dev/rollout";

/// The plugin.
pub struct ConfigRollout;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Config {
    #[serde(default = "default_annotation")]
    annotation: String,
}

fn default_annotation() -> String {
    "kubewasm.dev/config-hash".into()
}

impl Reconciler for ConfigRollout {
    fn declare() -> Declaration {
        Declaration::new::<Deployment>("config-rollout", env!("CARGO_PKG_VERSION"))
            .primary_verbs([Verb::Apply])
            .secondary(
                Secondary::of::<ConfigMap>()
                    .verbs([Verb::Get, Verb::List])
                    .label_selector(ROLLOUT_LABEL)
                    .mapping(Mapping::Label(ROLLOUT_LABEL.into())),
            )
            .config_schema(json!({
                "type": "object",
                "properties": {"annotation": {"type": "string", "minLength": 1}},
                "additionalProperties": false,
            }))
    }

    fn reconcile(ctx: &Context) -> Result<Outcome> {
        let config: Config = ctx.config()?;
        let Some(deployment) = ctx.primary::<Deployment>()? else {
            return Ok(Outcome::new());
        };
        let selector = format!("{ROLLOUT_LABEL}={}", ctx.name());
        let configmaps = ctx.list::<ConfigMap>(ctx.namespace(), &selector)?;
        let current = deployment
            .spec
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.annotations.as_ref())
            .and_then(|a| a.get(&config.annotation))
            .cloned();
        let desired = (!configmaps.is_empty()).then(|| config_hash(&configmaps));
        if current == desired {
            return Ok(Outcome::new());
        }
        // Our field manager owns only the annotation: applying the object
        // without it (no ConfigMap left) removes it.
        let mut patch = json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": ctx.name(), "namespace": ctx.namespace()},
        });
        let note = match &desired {
            Some(hash) => {
                patch["spec"] = json!({"template": {"metadata": {"annotations": {config.annotation.as_str(): hash}}}});
                format!(
                    "configuration hash is now {hash} ({} ConfigMaps): rolling pods",
                    configmaps.len()
                )
            }
            None => {
                "no ConfigMap is labelled for this Deployment any more: hash removed".to_owned()
            }
        };
        kubewasm_guest::log::info(
            "configuration changed",
            &[("hash", desired.as_deref().unwrap_or("none"))],
        );
        Ok(Outcome::new()
            .apply_json_unforced(patch)
            .event(Event::normal("ConfigChanged", "Rollout", note)))
    }
}

kubewasm_guest::export!(ConfigRollout);

/// FNV-1a over the ConfigMaps' names and data, in name order: stable across
/// runs and languages, and changed by any edit of a key or value.
pub fn config_hash(configmaps: &[ConfigMap]) -> String {
    let mut sorted: Vec<&ConfigMap> = configmaps.iter().collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for b in bytes.iter().chain([&0xff]) {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for cm in sorted {
        feed(cm.metadata.name.as_deref().unwrap_or_default().as_bytes());
        for (k, v) in cm.data.iter().flat_map(BTreeMap::iter) {
            feed(k.as_bytes());
            feed(v.as_bytes());
        }
        for (k, v) in cm.binary_data.iter().flat_map(BTreeMap::iter) {
            feed(k.as_bytes());
            feed(&v.0);
        }
    }
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubewasm_guest::serde_json::Value;
    use kubewasm_guest::testing::Harness;
    use kubewasm_guest::{Action, ObjectKey};

    fn deployment(annotation: Option<&str>) -> Value {
        let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {}, "template": {"metadata": {}}}});
        if let Some(hash) = annotation {
            d["spec"]["template"]["metadata"]["annotations"] =
                json!({"kubewasm.dev/config-hash": hash});
        }
        d
    }

    fn configmap(name: &str, target: &str, value: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default", "labels": {ROLLOUT_LABEL: target}},
            "data": {"KEY": value}})
    }

    fn key() -> ObjectKey {
        ObjectKey::namespaced("default", "web")
    }

    fn hash_of(outcome: &Outcome) -> Option<Value> {
        outcome.applied().next().map(|p| {
            p["spec"]["template"]["metadata"]["annotations"]["kubewasm.dev/config-hash"].clone()
        })
    }

    #[test]
    fn reconcile_should_annotate_then_settle() {
        let first = Harness::new()
            .object(deployment(None))
            .object(configmap("a", "web", "1"))
            .object(configmap("other", "api", "x"))
            .reconcile::<ConfigRollout>(key())
            .expect("reconciles");
        let hash = hash_of(&first).expect("an apply");
        assert!(matches!(
            first.actions()[0],
            Action::Apply {
                owned: false,
                force: false,
                ..
            }
        ));
        assert!(matches!(first.actions()[1], Action::Event(_)));

        let settled = Harness::new()
            .object(deployment(hash.as_str()))
            .object(configmap("a", "web", "1"))
            .reconcile::<ConfigRollout>(key())
            .expect("reconciles");
        assert!(settled.actions().is_empty(), "same data, nothing to do");

        let changed = Harness::new()
            .object(deployment(hash.as_str()))
            .object(configmap("a", "web", "2"))
            .reconcile::<ConfigRollout>(key())
            .expect("reconciles");
        assert_ne!(hash_of(&changed), Some(hash));
    }

    #[test]
    fn reconcile_should_remove_the_hash_when_no_configmap_is_left() {
        let outcome = Harness::new()
            .object(deployment(Some("abc")))
            .reconcile::<ConfigRollout>(key())
            .expect("reconciles");
        let patch = outcome.applied().next().expect("an apply");
        assert!(patch.get("spec").is_none(), "{patch}");
    }

    #[test]
    fn reconcile_should_refuse_unknown_configuration() {
        let err = Harness::new()
            .object(deployment(None))
            .config(json!({"annotaton": "typo"}))
            .reconcile::<ConfigRollout>(key())
            .expect_err("typo");
        assert!(err.message().contains("unknown field"), "{err}");
    }
}
