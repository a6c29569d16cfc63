//! A test plugin of contract 0.2.0's additions. It reconciles only the
//! ConfigMaps labelled `kubewasm.dev/selected=yes` (a primary selector: the
//! host watches and caches no other), and for each, `NAME` in its
//! namespace, applies the ConfigMap `NAME-shared` without owning it and
//! without forcing: a field another manager set to another value makes the
//! apply fail with a conflict instead of overwriting it.

use kubewasm_guest::k8s_openapi::api::core::v1::ConfigMap;
use kubewasm_guest::{Context, Declaration, Outcome, Reconciler, Result, Verb};

/// The label a ConfigMap needs to be reconciled.
pub const SELECTOR: &str = "kubewasm.dev/selected=yes";

/// The plugin.
pub struct Selective;

impl Reconciler for Selective {
    fn declare() -> Declaration {
        Declaration::new::<ConfigMap>("selective", env!("CARGO_PKG_VERSION"))
            .primary_verbs([Verb::Apply])
            .primary_selector(SELECTOR)
    }

    fn reconcile(ctx: &Context) -> Result<Outcome> {
        if ctx.primary::<ConfigMap>()?.is_none() {
            return Ok(Outcome::new());
        }
        let shared = ConfigMap {
            metadata: kubewasm_guest::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(format!("{}-shared", ctx.name())),
                ..Default::default()
            },
            data: Some([("owner".to_owned(), "selective".to_owned())].into()),
            ..Default::default()
        };
        Ok(Outcome::new().apply_unforced(&shared))
    }
}

kubewasm_guest::export!(Selective);

#[cfg(test)]
mod tests {
    use kubewasm_guest::serde_json::{self, json};
    use kubewasm_guest::testing::Harness;
    use kubewasm_guest::{Action, ObjectKey};

    use super::Selective;

    fn configmap(labels: serde_json::Value) -> serde_json::Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "a", "namespace": "default", "uid": "u-a", "labels": labels}})
    }

    #[test]
    fn only_selected_configmaps_should_be_read_and_their_share_applied_unforced() {
        let key = ObjectKey::namespaced("default", "a");
        let outcome = Harness::new()
            .object(configmap(json!({"kubewasm.dev/selected": "yes"})))
            .reconcile::<Selective>(key.clone())
            .expect("reconciles");
        assert!(matches!(
            &outcome.actions()[0],
            Action::Apply { object, owned: false, force: false }
                if object["metadata"]["name"] == "a-shared"
        ));
        // The harness reads through the primary selector, as the host's cache.
        let unselected = Harness::new()
            .object(configmap(json!({})))
            .reconcile::<Selective>(key)
            .expect("reconciles");
        assert!(unselected.actions().is_empty());
    }
}
