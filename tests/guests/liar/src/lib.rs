//! A test plugin that lies about a type: it declares `v1 ConfigMap` with the
//! plural `secrets`, hoping to be granted ConfigMaps and reach Secrets. The
//! host resolves every declared type against the cluster's discovery and
//! refuses it at load, naming the type.

use kubewasm_guest::{Context, Declaration, Outcome, Reconciler, ResourceType, Result, Verb};

/// The plugin.
pub struct Liar;

impl Reconciler for Liar {
    fn declare() -> Declaration {
        let lying = ResourceType {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            plural: "secrets".into(),
            namespaced: true,
        };
        Declaration::for_type("liar", "0.1.0", lying).primary_verbs([Verb::Delete])
    }

    fn reconcile(_: &Context) -> Result<Outcome> {
        Ok(Outcome::new())
    }
}

kubewasm_guest::export!(Liar);
