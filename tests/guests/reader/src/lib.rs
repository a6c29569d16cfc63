//! A test plugin of reads as triggers. A Secret labelled `summary=yes`
//! names a ConfigMap in its annotation `kubewasm.dev/reads` and the plugin
//! lists the ConfigMaps labelled `tier=web` of its namespace; it applies a
//! ConfigMap `<secret>-summary` saying what it read: `named` (the named
//! ConfigMap's `value`, or `absent`) and `listed` (the names listed). Its
//! ConfigMaps are declared with the `reads` mapping only: nothing but what
//! a reconcile read brings the Secret back.

use std::collections::BTreeMap;

use kubewasm_guest::k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kubewasm_guest::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubewasm_guest::{Context, Declaration, Mapping, Outcome, Reconciler, Result, Secondary, Verb};

/// The plugin.
pub struct Reader;

impl Reconciler for Reader {
    fn declare() -> Declaration {
        Declaration::new::<Secret>("reader", env!("CARGO_PKG_VERSION"))
            .primary_selector("summary=yes")
            .secondary(
                Secondary::of::<ConfigMap>()
                    .verbs([Verb::Get, Verb::List, Verb::Apply])
                    .mapping(Mapping::Reads),
            )
    }

    fn reconcile(ctx: &Context) -> Result<Outcome> {
        let Some(secret) = ctx.primary::<Secret>()? else {
            return Ok(Outcome::new());
        };
        let named = match secret
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("kubewasm.dev/reads"))
        {
            Some(name) => ctx
                .get::<ConfigMap>(&ctx.key().with_name(name.clone()))?
                .and_then(|cm| cm.data?.get("value").cloned())
                .unwrap_or_else(|| "absent".into()),
            None => "absent".into(),
        };
        let listed: Vec<String> = ctx
            .list::<ConfigMap>(ctx.namespace(), "tier=web")?
            .into_iter()
            .filter_map(|cm| cm.metadata.name)
            .collect();
        let summary = ConfigMap {
            metadata: ObjectMeta {
                name: Some(format!("{}-summary", ctx.name())),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([
                ("named".to_owned(), named),
                ("listed".to_owned(), listed.join(",")),
            ])),
            ..ConfigMap::default()
        };
        Ok(Outcome::new().apply(&summary))
    }
}

kubewasm_guest::export!(Reader);
