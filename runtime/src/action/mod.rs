//! From what a plugin desires to what the host sends.
//!
//! A plugin returns [`Desired`] actions. [`plan`] checks each against the
//! plugin's [`Grants`](crate::grants::Grants) and turns it into an [`Action`]: a complete object
//! with the plugin's field manager, the controller owner reference to the
//! primary, the namespace filled in. [`Action::request`] gives the exact API
//! request the applier sends, which is also what `kubewasm replay` prints.
//!
//! # Guarantees
//! - Nothing a plugin was not granted leaves this module: the whole outcome
//!   is refused if a single action is denied, so no partial write happens.
//! - Server-side apply bodies never carry `resourceVersion`, `uid`,
//!   `managedFields` or other server-owned metadata, so an object copied from
//!   the (possibly stale) cache cannot cause a conflict.
//! - Children are never pruned implicitly: only a `Delete` deletes, or the
//!   host's delete of a child of a type declared with `prune` that a
//!   reconcile no longer applies ([`prune`]: opt-in, never by surprise).
//! - Every name, namespace and label a plugin returns passes Kubernetes'
//!   rules ([`kubewasm_core::validation`]) before a request is built, and
//!   every write (apply, status, delete, event) lands in a namespace the
//!   plugin is granted ([`Grants::check_namespace`](crate::grants::Grants::check_namespace)); paths are built from
//!   validated parts only, each segment percent-encoded as well.

mod desired;
mod event;
mod plan;
mod planned;
mod prune;
mod request;

pub use desired::{Desired, DesiredEvent, EventType, Preconditions};
pub use event::EventBody;
pub(crate) use event::truncate;
pub use kubewasm_core::rules::ActionError;
pub use plan::{PlanContext, plan, plan_scheduled};
pub use planned::Action;
pub use prune::stale_children as prune;
pub use request::{ApiRequest, Applied, Method, resource_path};
