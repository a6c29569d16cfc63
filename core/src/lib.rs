//! Types the kubewasm host and its plugins share: resource types, object
//! keys, verbs, Kubernetes label selectors, cron schedules, name validation,
//! shard selectors, and the rules a plugin's reads and writes are held to.

pub mod resource;
pub mod rules;
pub mod schedule;
pub mod selector;
pub mod shard;
pub mod validation;

pub use resource::{InvalidKey, ObjectKey, ResourceType, Verb};
pub use selector::{Selector, SelectorError};
pub use shard::{Bound, ShardField, ShardRange, ShardSelector, ShardSelectorError};
