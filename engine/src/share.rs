//! A replica's share of a sharded type, as its informer holds it.
//!
//! In a ring ([`super::ring`]) a replica holds some slots of the hash space;
//! the informer of a plugin's primary (and, placed by namespace, of its
//! namespaced secondaries) holds only the objects of those slots. The
//! share is asked of the server as a KEP-5866 `shardSelector`
//! (`shardRange(object.metadata.uid, '0x…', '0x…')` terms joined by `||`, one
//! per run of adjacent slots) when the server serves it ([`served`]); and it
//! is always applied in the host by the same rule
//! ([`ShardSelector::matches`], the server's own), so a store holds the
//! share only, whatever the server does with the parameter.

use std::sync::Arc;

use http::{Request, Uri};
use kube::core::DynamicObject;
use kubewasm_core::shard::{ShardField, ShardRange, ShardSelector};
use kubewasm_runtime::cache::CachedObject;
use serde_json::Value;

use super::ring::{SLOTS, range_of};

/// The objects of some slots, placed by one field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Share {
    selector: Option<ShardSelector>,
}

impl Share {
    /// The objects of `slots` (bit `n`: slot `n`) placed by `field`.
    pub fn new(field: ShardField, slots: u64) -> Self {
        let mut ranges: Vec<ShardRange> = Vec::new();
        for slot in (0..SLOTS).filter(|s| slots & (1 << s) != 0) {
            let range = range_of(slot);
            match ranges.last_mut() {
                Some(last) if last.end == u128::from(range.start) => last.end = range.end,
                _ => ranges.push(range),
            }
        }
        Self {
            selector: ShardSelector::new(field, ranges),
        }
    }

    /// Its selector, as the server takes it; `None`: the share is empty.
    pub fn selector(&self) -> Option<&ShardSelector> {
        self.selector.as_ref()
    }

    /// Whether an object of this uid and namespace is in the share.
    pub fn admits(&self, uid: Option<&str>, namespace: Option<&str>) -> bool {
        self.selector.as_ref().is_some_and(|selector| {
            selector.matches(|field| match field {
                ShardField::Uid => uid,
                ShardField::Namespace => namespace,
            })
        })
    }

    /// Whether `object` is in the share.
    pub fn admits_object(&self, object: &DynamicObject) -> bool {
        self.admits(
            object.metadata.uid.as_deref(),
            object.metadata.namespace.as_deref(),
        )
    }

    /// Whether `object` (as cached) is in the share.
    pub fn admits_cached(&self, object: &CachedObject) -> bool {
        self.admits(object.uid(), object.namespace())
    }
}

/// `client`, with `selector` added to the query of every request it sends
/// (an informer's lists and watches).
pub fn client_with(client: &kube::Client, selector: &ShardSelector) -> kube::Client {
    let added: Arc<str> = Arc::from(format!(
        "shardSelector={}",
        form_urlencoded::byte_serialize(selector.to_string().as_bytes()).collect::<String>()
    ));
    crate::around::around(client.clone(), move |client, request| {
        let added = Arc::clone(&added);
        async move {
            let (mut parts, body) = request.into_parts();
            let query = match parts.uri.query() {
                Some(q) if !q.is_empty() => format!("{q}&{added}"),
                _ => added.to_string(),
            };
            let mut uri = parts.uri.clone().into_parts();
            uri.path_and_query = Some(
                format!("{}?{query}", parts.uri.path())
                    .parse()
                    .map_err(|e: http::uri::InvalidUri| kube::Error::Service(Box::new(e)))?,
            );
            parts.uri = Uri::from_parts(uri).map_err(|e| kube::Error::Service(Box::new(e)))?;
            client.send(Request::from_parts(parts, body)).await
        }
    })
}

/// A shard selector no server that reads the parameter accepts.
const UNPARSABLE: &str = "shardRange(";

/// Whether the server filters by the selector `sharded` adds
/// ([`client_with`]) to lists at `url` (a resource's collection): a list of
/// at most one object echoes it in `metadata.shardInfo` (a built-in type's),
/// or, since a custom resource's list is filtered but carries no
/// `shardInfo` (a real v1.37 server's), `plain` sending a selector that
/// cannot be parsed is refused. A server that ignores the parameter answers
/// both as if it were not there.
pub async fn served(
    sharded: &kube::Client,
    plain: &kube::Client,
    url: &str,
) -> Result<bool, kube::Error> {
    let list: Value = sharded.request(list_one(url, "")?).await?;
    if list
        .pointer("/metadata/shardInfo/selector")
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty())
    {
        return Ok(true);
    }
    match plain.request::<Value>(list_one(url, UNPARSABLE)?).await {
        Ok(_) => Ok(false),
        // Refused as invalid: 400, or the 500 a real v1.37 server answers.
        Err(kube::Error::Api(status)) if matches!(status.code, 400 | 422 | 500) => Ok(true),
        Err(error) => Err(error),
    }
}

/// A list of at most one object at `url`, with `selector` as its
/// `shardSelector` unless empty.
fn list_one(url: &str, selector: &str) -> Result<http::Request<Vec<u8>>, kube::Error> {
    let mut request = kube::core::Request::new(url)
        .list(&kube::api::ListParams::default().limit(1))
        .map_err(kube::Error::BuildRequest)?;
    if !selector.is_empty() {
        let uri = format!(
            "{}&shardSelector={}",
            request.uri(),
            form_urlencoded::byte_serialize(selector.as_bytes()).collect::<String>()
        );
        *request.uri_mut() = uri
            .parse()
            .map_err(|e: http::uri::InvalidUri| kube::Error::Service(Box::new(e)))?;
    }
    Ok(request)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

    fn object(uid: &str, namespace: Option<&str>) -> DynamicObject {
        DynamicObject {
            types: None,
            metadata: ObjectMeta {
                name: Some("x".into()),
                uid: Some(uid.into()),
                namespace: namespace.map(str::to_owned),
                ..ObjectMeta::default()
            },
            data: Value::Null,
        }
    }

    #[test]
    fn adjacent_slots_should_join_in_one_range_and_the_rest_stand_apart() {
        let share = Share::new(ShardField::Uid, 0b1011);
        let terms = share.selector().expect("slots held").terms();
        assert_eq!(terms.len(), 2, "{terms:?}");
        assert_eq!(terms[0].1.start, range_of(0).start);
        assert_eq!(terms[0].1.end, range_of(1).end);
        assert_eq!(terms[1].1, range_of(3));
        let all = Share::new(ShardField::Uid, (1 << SLOTS) - 1);
        assert_eq!(
            all.selector().expect("every slot").terms(),
            [(ShardField::Uid, ShardRange::ALL)]
        );
        assert!(Share::new(ShardField::Uid, 0).selector().is_none());
    }

    #[test]
    fn a_share_should_admit_what_its_slots_hold_by_the_servers_rule() {
        use super::super::ring::slot_of;
        use kubewasm_core::shard::fnv1a64;
        let uids: Vec<String> = (0..200).map(|i| format!("{i}-uid-{i:04}")).collect();
        let (half, all) = ((1u64 << (SLOTS / 2)) - 1, (1u64 << SLOTS) - 1);
        let low = Share::new(ShardField::Uid, half);
        let high = Share::new(ShardField::Uid, all & !half);
        for uid in &uids {
            let o = object(uid, Some("default"));
            assert_ne!(
                low.admits_object(&o),
                high.admits_object(&o),
                "{uid} in exactly one"
            );
            assert_eq!(
                low.admits_object(&o),
                slot_of(fnv1a64(uid.as_bytes())) < SLOTS / 2
            );
        }
        assert!(!Share::new(ShardField::Uid, 0).admits_object(&object("a", None)));
        // Placed by namespace: every object of a namespace together.
        let by_ns = Share::new(ShardField::Namespace, 1 << slot_of(fnv1a64(b"team-a")));
        assert!(by_ns.admits_object(&object("1", Some("team-a"))));
        assert!(by_ns.admits_cached(&CachedObject::new(
            serde_json::json!({"metadata": {"name": "b", "uid": "2", "namespace": "team-a"}})
        )));
    }
}
