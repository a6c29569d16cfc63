//! A test plugin of scheduled calls. Every two seconds (`*/2 * * * * *`)
//! it counts the ConfigMaps labelled `tally=yes` in `default` and applies
//! the ConfigMap `report` there (unowned: a scheduled call has no primary)
//! with the count and the time the schedule named. Its primary, Secrets
//! labelled `reporter=primary`, it leaves alone.

use std::collections::BTreeMap;

use kubewasm_guest::k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kubewasm_guest::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubewasm_guest::{Context, Declaration, Error, Outcome, Reconciler, Result, Secondary, Verb};

/// The plugin.
pub struct Reporter;

impl Reconciler for Reporter {
    fn declare() -> Declaration {
        Declaration::new::<Secret>("reporter", env!("CARGO_PKG_VERSION"))
            .primary_selector("reporter=primary")
            .secondary(Secondary::of::<ConfigMap>().verbs([Verb::Get, Verb::List, Verb::Apply]))
            .schedule("*/2 * * * * *")
    }

    fn reconcile(_: &Context) -> Result<Outcome> {
        Ok(Outcome::new())
    }

    fn scheduled(ctx: &Context) -> Result<Outcome> {
        let at = ctx
            .scheduled_at()
            .ok_or_else(|| Error::msg("a scheduled call without its time"))?;
        let counted = ctx.list::<ConfigMap>(Some("default"), "tally=yes")?.len();
        let report = ConfigMap {
            metadata: ObjectMeta {
                name: Some("report".into()),
                namespace: Some("default".into()),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([
                ("count".to_owned(), counted.to_string()),
                ("at".to_owned(), at.to_string()),
            ])),
            ..ConfigMap::default()
        };
        Ok(Outcome::new().apply_unowned(&report))
    }
}

kubewasm_guest::export!(Reporter);

#[cfg(test)]
mod tests {
    use kubewasm_guest::serde_json::json;
    use kubewasm_guest::testing::Harness;

    use super::*;

    #[test]
    fn a_scheduled_call_should_report_the_tallied_config_maps() {
        let tallied = |name: &str, tally: &str| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": name, "namespace": "default", "labels": {"tally": tally}}})
        };
        let at = "2026-12-03T10:00:02Z".parse().expect("a time");
        let out = Harness::new()
            .object(tallied("one", "yes"))
            .object(tallied("two", "no"))
            .scheduled::<Reporter>(at)
            .expect("reports");
        let report = out.applied().next().expect("the report");
        assert_eq!(report["data"]["count"], "1");
        assert_eq!(report["data"]["at"], "2026-12-03T10:00:02Z");
    }
}
