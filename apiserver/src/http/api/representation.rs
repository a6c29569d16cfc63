//! What a read returns, by the client's `Accept`: the object, its metadata
//! only (`as=PartialObjectMetadata[List]`, what kube-rs's metadata watches
//! and the engine's caches ask for), or a `Table` (`as=Table`, what `kubectl
//! get` asks for, so it prints the columns users know).
//!
//! # Rules
//! - The first media type of `Accept` the server can produce wins, as
//!   content negotiation goes; `as=` with a group other than
//!   `meta.k8s.io` is skipped.
//! - Get, list and watch follow it alike. A watch of tables sends the
//!   column definitions with its first row only, as the real server does.

use std::sync::Arc;

use serde_json::{Value, json};

use super::shape::{list_item, shown};
use super::table;
use kubewasm_types::info::ResourceInfo;

/// The representation asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum As {
    /// The object itself.
    Object,
    /// `meta.k8s.io/v1` `PartialObjectMetadata`.
    Metadata,
    /// `meta.k8s.io/v1` `Table`.
    Table,
}

impl As {
    /// What `accept` asks for.
    pub(super) fn of(accept: &str) -> Self {
        for media in accept.split(',') {
            let mut params = media.split(';').map(str::trim);
            let essence = params.next().unwrap_or("");
            if !matches!(essence, "application/json" | "*/*" | "application/*" | "") {
                continue;
            }
            let mut kind = None;
            let mut group = None;
            for param in params {
                match param.split_once('=') {
                    Some(("as", v)) => kind = Some(v),
                    Some(("g", v)) => group = Some(v),
                    _ => {}
                }
            }
            match (kind, group) {
                (None, _) => return Self::Object,
                (Some(_), Some(g)) if g != "meta.k8s.io" => {}
                (Some("PartialObjectMetadata" | "PartialObjectMetadataList"), _) => {
                    return Self::Metadata;
                }
                (Some("Table"), _) => return Self::Table,
                _ => {}
            }
        }
        Self::Object
    }
}

/// An object's metadata as `PartialObjectMetadata`.
fn metadata_of(object: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// One object (a get, or a watch event's); `columns` says whether a
/// table carries its column definitions.
pub(super) fn object(
    representation: As,
    info: &ResourceInfo,
    object: &Value,
    columns: bool,
) -> Value {
    match representation {
        As::Object => shown(info, object),
        As::Metadata => metadata_of(object),
        As::Table => table_of(info, std::iter::once(object), json!({}), columns),
    }
}

/// A list: `metadata` is the list's (resourceVersion, continue).
pub(super) fn list(
    representation: As,
    info: &ResourceInfo,
    metadata: Value,
    items: &[&Arc<Value>],
) -> Value {
    match representation {
        As::Object => {
            let items: Vec<Value> = items.iter().map(|o| list_item(info, o)).collect();
            json!({"kind": info.list_kind, "apiVersion": info.api_version(),
                   "metadata": metadata, "items": items})
        }
        As::Metadata => {
            let items: Vec<Value> = items.iter().map(|o| metadata_of(o)).collect();
            json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                   "metadata": metadata, "items": items})
        }
        As::Table => table_of(info, items.iter().map(|o| o.as_ref()), metadata, true),
    }
}

fn table_of<'a>(
    info: &ResourceInfo,
    objects: impl Iterator<Item = &'a Value>,
    metadata: Value,
    columns: bool,
) -> Value {
    let definitions = table::columns(info);
    let rows: Vec<Value> = objects
        .map(|o| json!({"cells": table::cells(&definitions, o), "object": metadata_of(o)}))
        .collect();
    let definitions: Vec<Value> = if columns {
        definitions.iter().map(table::Column::definition).collect()
    } else {
        Vec::new()
    };
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata,
           "columnDefinitions": definitions, "rows": rows})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_should_pick_the_first_representation_served() {
        assert_eq!(As::of(""), As::Object);
        assert_eq!(As::of("application/json"), As::Object);
        assert_eq!(
            As::of(
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
            ),
            As::Table
        );
        assert_eq!(
            As::of("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"),
            As::Metadata
        );
        assert_eq!(
            As::of("application/json;as=Other;g=example.com, application/json"),
            As::Object
        );
        assert_eq!(
            As::of(
                "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1,application/json"
            ),
            As::Object
        );
    }
}
