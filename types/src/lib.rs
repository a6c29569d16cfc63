//! The resource types kubewasm knows: every built-in type of the Kubernetes
//! version it speaks (1.33, as k8s-openapi describes it), and the types a
//! CustomResourceDefinition serves.
//!
//! Both sides of the cluster read this one table: the embedded API server
//! serves from a [`registry::Registry`], and the host's REST mapper and
//! `kubewasm types` start from [`registry::Registry::builtin`]. It knows no
//! HTTP, no storage and no client.

mod builtin;
pub mod crd;

pub use builtin::field_schema;
pub mod info;
pub mod registry;
pub mod value;
