//! A test plugin of children as a set. A ConfigMap labelled
//! `composite=yes` names its children in `data.children` (`a,b`): for each,
//! the plugin applies an owned ServiceAccount and an owned Secret,
//! `<configmap>-<child>`. ServiceAccounts are declared as a set (`prune`),
//! Secrets are not: a child dropped from the list loses its ServiceAccount
//! to the host and keeps its Secret.

use kubewasm_guest::k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use kubewasm_guest::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubewasm_guest::{Context, Declaration, Outcome, Reconciler, Result};

/// The plugin.
pub struct Composite;

impl Reconciler for Composite {
    fn declare() -> Declaration {
        Declaration::new::<ConfigMap>("composite", env!("CARGO_PKG_VERSION"))
            .primary_selector("composite=yes")
            .owns_set::<ServiceAccount>()
            .owns::<Secret>()
    }

    fn reconcile(ctx: &Context) -> Result<Outcome> {
        let Some(parent) = ctx.primary::<ConfigMap>()? else {
            return Ok(Outcome::new());
        };
        let children = parent
            .data
            .as_ref()
            .and_then(|data| data.get("children"))
            .map(String::as_str)
            .unwrap_or_default();
        let metadata = |child: &str| ObjectMeta {
            name: Some(format!("{}-{child}", ctx.name())),
            ..ObjectMeta::default()
        };
        let mut outcome = Outcome::new();
        for child in children.split(',').map(str::trim).filter(|c| !c.is_empty()) {
            outcome = outcome
                .apply(&ServiceAccount {
                    metadata: metadata(child),
                    ..ServiceAccount::default()
                })
                .apply(&Secret {
                    metadata: metadata(child),
                    ..Secret::default()
                });
        }
        Ok(outcome)
    }
}

kubewasm_guest::export!(Composite);
