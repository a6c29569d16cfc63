//! Types the kubewasm host and its plugins share: resource types, object
//! keys, verbs, Kubernetes label selectors and name validation.

pub mod resource;
pub mod selector;
pub mod shard;
pub mod validation;

pub use resource::{InvalidKey, ObjectKey, ResourceType, Verb};
pub use selector::{Selector, SelectorError};
pub use shard::{ShardField, ShardRange, ShardSelector, ShardSelectorError};
