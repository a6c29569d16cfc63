//! The OpenAPI documents clients download, as the real server of the
//! release publishes them.
//!
//! - [`v3`]: `/openapi/v3` and the documents it lists, what kubectl reads
//!   before `create -f`, `apply` and `explain` (it sends
//!   `fieldValidation=Strict` to the kinds these documents vouch for).
//! - [`v2`]: `/openapi/v2`, one document of every served kind, in JSON or in
//!   [`gnostic`]'s protobuf (the only form client-go's `OpenAPISchema()`
//!   reads). kubectl validates against it on the client whatever the v3
//!   documents cannot vouch for: the items of a `v1 List`.
//!
//! The built-in types' documents are the release's own, recorded from it
//! ([`release`]); a custom resource's are written from them as
//! apiextensions-apiserver writes them ([`custom`]).

mod custom;
pub mod gnostic;
mod release;
pub mod v2;
pub mod v3;

#[cfg(test)]
mod tests {
    use kubewasm_types::registry::Registry;

    /// The built-in types and the example plugin's MyApps.
    pub(super) fn with_myapps() -> Registry {
        let crd: serde_json::Value =
            serde_yaml::from_str(include_str!("../../../../plugins/myapp/crd.yaml"))
                .expect("the example CRD");
        let mut registry = Registry::builtin();
        for info in kubewasm_types::crd::served_types(&crd).expect("a valid CRD") {
            registry.insert(info);
        }
        registry
    }
}
