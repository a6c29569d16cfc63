//! A test plugin of children as a set. A ConfigMap labelled
//! `composite=yes` names its children in `data.children` (`a,b`): for each,
//! the plugin applies an owned ServiceAccount and an owned Secret,
//! `<configmap>-<child>`. ServiceAccounts are declared as a set (`prune`),
//! Secrets are not: a child dropped from the list loses its ServiceAccount
//! to the host and keeps its Secret. It manages a finalizer: a ConfigMap
//! deleted, or that loses its label (leaves the primary selector), gets
//! `finalize`, which deletes every child it names.

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
            .managed_finalizer()
    }

    fn reconcile(ctx: &Context) -> Result<Outcome> {
        let metadata = |child: &str| ObjectMeta {
            name: Some(format!("{}-{child}", ctx.name())),
            ..ObjectMeta::default()
        };
        let mut outcome = Outcome::new();
        for child in children(ctx)? {
            outcome = outcome
                .apply(&ServiceAccount {
                    metadata: metadata(&child),
                    ..ServiceAccount::default()
                })
                .apply(&Secret {
                    metadata: metadata(&child),
                    ..Secret::default()
                });
        }
        Ok(outcome)
    }

    fn finalize(ctx: &Context) -> Result<Outcome> {
        let mut outcome = Outcome::new();
        for child in children(ctx)? {
            let key = ctx.key().with_name(format!("{}-{child}", ctx.name()));
            outcome = outcome
                .delete::<ServiceAccount>(key.clone())
                .delete::<Secret>(key);
        }
        Ok(outcome)
    }
}

/// The children the primary names, if it is cached.
fn children(ctx: &Context) -> Result<Vec<String>> {
    let Some(parent) = ctx.primary::<ConfigMap>()? else {
        return Ok(Vec::new());
    };
    let listed = parent
        .data
        .as_ref()
        .and_then(|data| data.get("children"))
        .map(String::as_str)
        .unwrap_or_default();
    Ok(listed
        .split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
        .collect())
}

kubewasm_guest::export!(Composite);
