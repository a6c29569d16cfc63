//! The ClusterRole aggregation controller: a ClusterRole with an
//! `aggregationRule` gets the rules of every ClusterRole its
//! `clusterRoleSelectors` select, in name order, without duplicates (the
//! seeded `admin`, `edit` and `view` are filled so).

use kubewasm_core::ObjectKey;
use serde_json::{Value, json};

use super::client::{Client, ClientError, Kind, kinds};
use super::reconcile::{Next, Reconciler};
use crate::objects::selects;
use crate::store::{Event, Store};

/// The aggregation controller.
#[derive(Debug)]
pub struct Aggregation {
    client: Client,
}

impl Aggregation {
    /// A controller writing through `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

impl Reconciler for Aggregation {
    fn primary(&self) -> Kind {
        kinds::CLUSTERROLE
    }

    /// Any ClusterRole's change concerns every aggregated one.
    fn keys(&self, store: &Store, event: &Event) -> Vec<ObjectKey> {
        if event.resource != kinds::CLUSTERROLE.key() {
            return Vec::new();
        }
        store
            .objects(&kinds::CLUSTERROLE.key(), None)
            .iter()
            .filter(|r| r.get("aggregationRule").is_some())
            .filter_map(|r| ObjectKey::of(r))
            .collect()
    }

    async fn reconcile(&self, key: &ObjectKey) -> Result<Next, ClientError> {
        let store = self.client.store();
        let Some(role) = store.get(&kinds::CLUSTERROLE.key(), key) else {
            return Ok(Next::Done);
        };
        let Some(selectors) = role
            .pointer("/aggregationRule/clusterRoleSelectors")
            .and_then(Value::as_array)
        else {
            return Ok(Next::Done);
        };
        let all = store.objects(&kinds::CLUSTERROLE.key(), None);
        let mut rules: Vec<Value> = Vec::new();
        for other in all
            .iter()
            .filter(|r| r["metadata"]["name"] != key.name.as_str())
        {
            let labels = other.pointer("/metadata/labels").and_then(Value::as_object);
            if selectors.iter().any(|s| selects(s, labels)) {
                for rule in other["rules"].as_array().into_iter().flatten() {
                    if !rules.contains(rule) {
                        rules.push(rule.clone());
                    }
                }
            }
        }
        if role.get("rules") != Some(&Value::Array(rules.clone())) {
            self.client
                .patch(
                    kinds::CLUSTERROLE,
                    None,
                    &key.name,
                    None,
                    &json!({"rules": rules}),
                )
                .await?;
        }
        Ok(Next::Done)
    }
}
