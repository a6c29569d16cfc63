//! The cluster's types, read from its discovery documents, for the
//! [`RestMapper`] every declaration is resolved against.

use http::Request;
use kube::Client;
use serde_json::Value;

use kubewasm_runtime::mapper::{MapperError, RestMapper};

/// Why discovery failed.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// A discovery request failed.
    #[error("discovery request {path} failed: {source}")]
    Request {
        /// The path.
        path: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// A discovery document did not parse as one.
    #[error("discovery document {path} is invalid: {source}")]
    Document {
        /// The path.
        path: String,
        /// Why.
        #[source]
        source: MapperError,
    },
}

async fn get(client: &Client, path: &str) -> Result<Value, DiscoveryError> {
    let request = Request::get(path)
        .body(Vec::new())
        .map_err(|e| DiscoveryError::Request {
            path: path.to_owned(),
            source: kube::Error::HttpError(e),
        })?;
    client
        .request::<Value>(request)
        .await
        .map_err(|source| DiscoveryError::Request {
            path: path.to_owned(),
            source,
        })
}

/// Every type the cluster serves: the core group and every version of
/// every API group, as kube-rs's discovery walks them.
///
/// # Errors
/// [`DiscoveryError`] naming the document that failed.
pub async fn mapper(client: &Client) -> Result<RestMapper, DiscoveryError> {
    let mut paths = vec!["/api/v1".to_owned()];
    let groups = get(client, "/apis").await?;
    for group in groups["groups"].as_array().into_iter().flatten() {
        for version in group["versions"].as_array().into_iter().flatten() {
            if let Some(gv) = version["groupVersion"].as_str() {
                paths.push(format!("/apis/{gv}"));
            }
        }
    }
    let mut mapper = RestMapper::default();
    for path in paths {
        let document = get(client, &path).await?;
        mapper
            .add_discovery(&document)
            .map_err(|source| DiscoveryError::Document { path, source })?;
    }
    Ok(mapper)
}
