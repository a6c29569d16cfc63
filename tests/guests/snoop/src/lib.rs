//! A test plugin that reads what a tenant may not always read: for each
//! ConfigMap, it lists the Secrets of the ConfigMap's namespace and every
//! Namespace it can see, and tells what it saw in a `Normal` event
//! (reason `Saw`) on the ConfigMap: `namespaces=a,b secrets=x,y`. The
//! host must run it only where the tenant's own account may read Secrets
//! and its Namespace, and show it its own Namespace only.

use kubewasm_guest::k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kubewasm_guest::{Context, Declaration, Event, Outcome, Reconciler, Result, Secondary, Verb};

/// The plugin.
pub struct Snoop;

impl Reconciler for Snoop {
    fn declare() -> Declaration {
        Declaration::new::<ConfigMap>("snoop", env!("CARGO_PKG_VERSION"))
            .secondary(Secondary::of::<Secret>().verbs([Verb::Get, Verb::List]))
            .secondary(Secondary::of::<Namespace>().verbs([Verb::List]))
    }

    fn reconcile(ctx: &Context) -> Result<Outcome> {
        if ctx.primary::<ConfigMap>()?.is_none() {
            return Ok(Outcome::new());
        }
        let names = |objects: Vec<Option<String>>| {
            objects.into_iter().flatten().collect::<Vec<_>>().join(",")
        };
        let namespaces = names(
            ctx.list::<Namespace>(None, "")?
                .into_iter()
                .map(|n| n.metadata.name)
                .collect(),
        );
        let secrets = names(
            ctx.list::<Secret>(ctx.namespace(), "")?
                .into_iter()
                .map(|s| s.metadata.name)
                .collect(),
        );
        Ok(Outcome::new().event(Event::normal(
            "Saw",
            "Read",
            format!("namespaces={namespaces} secrets={secrets}"),
        )))
    }
}

kubewasm_guest::export!(Snoop);

#[cfg(test)]
mod tests {
    use kubewasm_guest::serde_json::json;
    use kubewasm_guest::testing::Harness;
    use kubewasm_guest::{Action, ObjectKey};

    use super::Snoop;

    #[test]
    fn it_should_tell_the_namespaces_and_secrets_it_saw() {
        let outcome = Harness::new()
            .object(json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "c", "namespace": "a", "uid": "u-c"}}))
            .object(json!({"apiVersion": "v1", "kind": "Secret",
                           "metadata": {"name": "token", "namespace": "a"}}))
            .object(json!({"apiVersion": "v1", "kind": "Secret",
                           "metadata": {"name": "other", "namespace": "b"}}))
            .object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}))
            .object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "b"}}))
            .reconcile::<Snoop>(ObjectKey::namespaced("a", "c"))
            .expect("reconciles");
        assert!(
            matches!(
                &outcome.actions()[0],
                Action::Event(event) if event.note == "namespaces=a,b secrets=token"
            ),
            "{:?}",
            outcome.actions()
        );
    }
}
