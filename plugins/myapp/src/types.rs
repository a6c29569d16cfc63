//! The MyApp custom resource (`example.com/v1`, plural `myapps`).

use kubewasm_guest::k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use kubewasm_guest::k8s_openapi::{Metadata, NamespaceResourceScope, Resource};
use serde::{Deserialize, Serialize};

/// A MyApp: an application of `replicas` copies of `image` serving `port`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MyApp {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// What the user wants.
    pub spec: MyAppSpec,
    /// What the operator observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<MyAppStatus>,
}

/// The desired application.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MyAppSpec {
    /// Number of pods.
    #[serde(default = "one")]
    pub replicas: i32,
    /// Container image.
    pub image: String,
    /// Container and Service port.
    pub port: i32,
}

fn one() -> i32 {
    1
}

/// The observed application.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MyAppStatus {
    /// The Deployment's available replicas.
    pub available_replicas: i32,
    /// `Available`, with the usual condition fields.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

impl Resource for MyApp {
    const API_VERSION: &'static str = "example.com/v1";
    const GROUP: &'static str = "example.com";
    const KIND: &'static str = "MyApp";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "myapps";
    type Scope = NamespaceResourceScope;
}

impl Metadata for MyApp {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}
