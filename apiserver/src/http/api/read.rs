//! Reads: get, and list with consistent paging.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine;
use kubewasm_core::ObjectKey;
use serde_json::{Value, json};

use super::Api;
use super::filter::Filter;
use super::query::parse_rv;
use super::representation::{self, As};
use super::request::Reply;
use super::route::Target;
use crate::http::error::ApiError;
use crate::store::ListAt;
use kubewasm_types::info::ResourceInfo;

impl Api {
    pub(super) fn get(
        &self,
        target: &Target,
        name: &str,
        representation: As,
    ) -> Result<Reply, ApiError> {
        let object = self
            .store
            .get(&target.info.storage_key(), &self.key(target, name))
            .ok_or_else(|| ApiError::not_found(&target.info, name))?;
        Ok(Reply::Json(
            200,
            representation::object(representation, &target.info, &object, true),
        ))
    }

    /// `pods/log`: what a simulated container wrote (a line saying it is
    /// simulated); a Pod not started yet has no log, as on a real node.
    pub(super) fn pod_log(
        &self,
        target: &Target,
        name: &str,
        query: &HashMap<String, String>,
    ) -> Result<Reply, ApiError> {
        let pod = self
            .store
            .get(&target.info.storage_key(), &self.key(target, name))
            .ok_or_else(|| ApiError::not_found(&target.info, name))?;
        if pod.pointer("/status/startTime").is_none() {
            return Err(ApiError::bad_request(format!(
                "container in pod \"{name}\" is waiting to start: ContainerCreating"
            )));
        }
        let container = query
            .get("container")
            .map(String::as_str)
            .or_else(|| {
                pod.pointer("/spec/containers/0/name")
                    .and_then(Value::as_str)
            })
            .unwrap_or("");
        Ok(Reply::Text(
            200,
            format!(
                "kubewasm: pod {}/{name} is simulated: container {container} runs no process and writes no log\n",
                target.namespace.as_deref().unwrap_or("")
            ),
        ))
    }

    pub(super) fn list(
        &self,
        target: &Target,
        query: &HashMap<String, String>,
        representation: As,
    ) -> Result<Reply, ApiError> {
        let filter = Filter::from_query(query, &target.info, self.config.shard_selectors)?;
        let limit = super::query::limit(query)?.unwrap_or(usize::MAX);
        let (at, after) = match query.get("continue").filter(|c| !c.is_empty()) {
            Some(token) => {
                let token = Continue::decode(token)?;
                if token.rv < self.store.oldest_rv() {
                    return Err(ApiError::expired(
                        "The provided continue parameter is too old to display a consistent list result. \
                         You can start a new list without the continue parameter.",
                    ));
                }
                (ListAt::Exact(token.rv), Some(token.after))
            }
            None => {
                let rv = query.get("resourceVersion").filter(|v| !v.is_empty());
                let at = match (rv, query.get("resourceVersionMatch").map(String::as_str)) {
                    (None, _) => ListAt::Latest,
                    (Some(rv), Some("Exact")) => ListAt::Exact(parse_rv(rv)?),
                    (Some(rv), _) if rv == "0" => ListAt::Latest,
                    (Some(rv), _) => ListAt::NotOlderThan(parse_rv(rv)?),
                };
                (at, None)
            }
        };
        let snapshot =
            self.store
                .list(&target.info.storage_key(), target.namespace.as_deref(), at)?;
        // The snapshot is in key order, the order continue tokens count in.
        let start = after.as_ref().map_or(0, |after| {
            snapshot
                .items
                .partition_point(|o| ObjectKey::of(o).is_some_and(|k| k <= *after))
        });
        let rest = &snapshot.items[start..];
        let mut matching = rest.iter().enumerate().filter(|(_, o)| filter.matches(o));
        let page: Vec<(usize, &Arc<Value>)> = matching.by_ref().take(limit).collect();
        let remaining = matching.count();
        // A full page continues while any object follows it, selected or
        // not: a real server stops reading at the limit, unaware whether
        // what follows matches.
        let more = page.len() == limit && page.last().is_some_and(|(i, _)| i + 1 < rest.len());
        let page: Vec<&Arc<Value>> = page.into_iter().map(|(_, o)| o).collect();
        let mut metadata = list_metadata(&target.info, snapshot.rv);
        // A custom resource's list is filtered but says nothing of it, as
        // a real server's (v1.37's unstructured lists carry no `shardInfo`).
        if let Some(info) = filter.shard_info().filter(|_| !target.info.custom) {
            metadata["shardInfo"] = info;
        }
        if more && let Some(last) = page.last().and_then(|o| ObjectKey::of(o)) {
            metadata["continue"] = Continue {
                rv: snapshot.rv,
                after: last,
            }
            .encode()
            .into();
            if filter.selects_all() {
                metadata["remainingItemCount"] = remaining.into();
            }
        }
        Ok(Reply::Json(
            200,
            representation::list(representation, &target.info, metadata, &page),
        ))
    }
}

/// A list's metadata at `rv`: a custom resource's list is unstructured,
/// whose `continue` a real server writes even when empty.
pub(super) fn list_metadata(info: &ResourceInfo, rv: u64) -> Value {
    if info.custom {
        json!({"resourceVersion": rv.to_string(), "continue": ""})
    } else {
        json!({"resourceVersion": rv.to_string()})
    }
}

/// A continue token: the snapshot's RV and the key of the last object
/// returned, opaque to clients (base64 of JSON, as the real server's).
#[derive(Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Continue {
    rv: u64,
    after: ObjectKey,
}

impl Continue {
    fn encode(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
    }

    fn decode(token: &str) -> Result<Self, ApiError> {
        let invalid = || ApiError::bad_request(format!("continue key is not valid: {token}"));
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token)
            .map_err(|_| invalid())?;
        serde_json::from_slice(&bytes).map_err(|_| invalid())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_should_round_trip_and_refuse_garbage() {
        let token = Continue {
            rv: 7,
            after: ObjectKey::namespaced("a-b", "x"),
        };
        assert_eq!(Continue::decode(&token.encode()).ok(), Some(token));
        for garbage in ["", "!!", "e30", "18446744073709551615:x"] {
            assert!(Continue::decode(garbage).is_err(), "{garbage}");
        }
    }
}
