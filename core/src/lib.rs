//! Types the kubewasm host and its plugins share: resource types, object
//! keys, verbs, and Kubernetes label selectors.

pub mod resource;
pub mod selector;

pub use resource::{InvalidKey, ObjectKey, ResourceType, Verb};
pub use selector::{Selector, SelectorError};
