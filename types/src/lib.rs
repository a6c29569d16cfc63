//! The resource types kubewasm knows: every built-in type of the Kubernetes
//! release it speaks ([`KUBERNETES_RELEASE`], as k8s-openapi describes it and
//! its real server serves it by default), and the types a
//! CustomResourceDefinition serves.
//!
//! Both sides of the cluster read this one table: the embedded API server
//! serves from a [`registry::Registry`], and the host's REST mapper and
//! `kubewasm types` start from [`registry::Registry::builtin`]. It knows no
//! HTTP, no storage and no client.

mod builtin;
pub mod crd;

pub use builtin::{KUBERNETES_RELEASE, field_schema};
pub mod info;
pub mod registry;
pub mod release;
pub mod value;
