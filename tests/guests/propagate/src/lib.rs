//! A test plugin whose primary is cluster-scoped: an `example.com/v1`
//! Propagation lists namespaces and data, and the plugin applies a
//! ConfigMap `propagated` holding that data into each listed namespace
//! (not owned: a namespaced object's owner is best in its namespace). The
//! host must let a grants file list namespaces for it, system ones
//! included when named, and refuse a copy elsewhere naming the copy.

use std::collections::BTreeMap;

use kubewasm_guest::k8s_openapi::api::core::v1::ConfigMap;
use kubewasm_guest::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubewasm_guest::k8s_openapi::{ClusterResourceScope, Metadata, Resource};
use kubewasm_guest::{Context, Declaration, Outcome, Reconciler, Result, Secondary, Verb};
use serde::{Deserialize, Serialize};

/// A Propagation (cluster-scoped).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Propagation {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// What to copy where.
    pub spec: PropagationSpec,
}

/// What to copy where.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PropagationSpec {
    /// The namespaces.
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// The data.
    #[serde(default)]
    pub data: BTreeMap<String, String>,
}

impl Resource for Propagation {
    const API_VERSION: &'static str = "example.com/v1";
    const GROUP: &'static str = "example.com";
    const KIND: &'static str = "Propagation";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "propagations";
    type Scope = ClusterResourceScope;
}

impl Metadata for Propagation {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The plugin.
pub struct Propagate;

impl Reconciler for Propagate {
    fn declare() -> Declaration {
        Declaration::new::<Propagation>("propagate", env!("CARGO_PKG_VERSION"))
            .secondary(Secondary::of::<ConfigMap>().verbs([Verb::Apply]))
    }

    fn reconcile(ctx: &Context) -> Result<Outcome> {
        let Some(propagation) = ctx.primary::<Propagation>()? else {
            return Ok(Outcome::new());
        };
        let mut outcome = Outcome::new();
        for namespace in &propagation.spec.namespaces {
            let copy = ConfigMap {
                metadata: ObjectMeta {
                    name: Some("propagated".into()),
                    namespace: Some(namespace.clone()),
                    ..ObjectMeta::default()
                },
                data: Some(propagation.spec.data.clone()),
                ..ConfigMap::default()
            };
            outcome = outcome.apply_unowned(&copy);
        }
        Ok(outcome)
    }
}

kubewasm_guest::export!(Propagate);
