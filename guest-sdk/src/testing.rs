//! Run a plugin natively with plain `cargo test`: fixtures stand in for the
//! host's cache, and reads are checked against the plugin's declaration as
//! the host would check them.
//!
//! ```
//! use kubewasm_guest::testing::Harness;
//! use kubewasm_guest::{Context, Declaration, ObjectKey, Outcome, Reconciler, Result};
//! use kubewasm_guest::k8s_openapi::api::core::v1::ConfigMap;
//!
//! struct Echo;
//! impl Reconciler for Echo {
//!     fn declare() -> Declaration {
//!         Declaration::new::<ConfigMap>("echo", "0.1.0")
//!     }
//!     fn reconcile(ctx: &Context) -> Result<Outcome> {
//!         let found = ctx.primary::<ConfigMap>()?.is_some();
//!         kubewasm_guest::log::info("seen", &[("found", if found { "yes" } else { "no" })]);
//!         Ok(Outcome::new())
//!     }
//! }
//!
//! let harness = Harness::new().object(serde_json::json!({
//!     "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "default", "name": "a"}
//! }));
//! let outcome = harness.reconcile::<Echo>(ObjectKey::namespaced("default", "a")).unwrap();
//! assert!(outcome.actions().is_empty());
//! ```

use std::rc::Rc;

use serde_json::Value;

/// An object parsed, and as the JSON text a read returns.
type Cached = (Value, String);

/// The objects of a harness, shared with the backend during a call.
type Fixture = Rc<Vec<Cached>>;

use crate::Reconciler;
use crate::context::Context;
use crate::error::Result;
use crate::outcome::Outcome;
use crate::types::{Declaration, ObjectKey, Verb};

/// Fixtures and a configuration to run reconciles against.
#[derive(Clone, Debug, Default)]
pub struct Harness {
    /// Each object parsed and as the JSON text a read returns, as the
    /// host's cache keeps them.
    objects: Fixture,
    config: Option<Value>,
}

impl Harness {
    /// An empty harness.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an object to the cache.
    #[must_use]
    pub fn object(mut self, object: Value) -> Self {
        let text = object.to_string();
        Rc::make_mut(&mut self.objects).push((object, text));
        self
    }

    /// Sets the plugin configuration.
    #[must_use]
    pub fn config(mut self, config: Value) -> Self {
        self.config = Some(config);
        self
    }

    fn context<R: Reconciler>(&self, key: ObjectKey) -> (Declaration, Context) {
        let declaration = R::declare();
        let mut ctx = Context::new(declaration.primary.clone(), key);
        if let Some(config) = &self.config {
            ctx.config = config.to_string();
        }
        (declaration, ctx)
    }

    /// Runs [`Reconciler::reconcile`] for `key`.
    ///
    /// # Errors
    /// What the plugin returns, or a denied read.
    pub fn reconcile<R: Reconciler>(&self, key: ObjectKey) -> Result<Outcome> {
        let (declaration, ctx) = self.context::<R>(key);
        backend::with(Rc::clone(&self.objects), declaration, || {
            R::reconcile(&ctx).and_then(Outcome::into_result)
        })
    }

    /// Runs [`Reconciler::finalize`] for `key`.
    ///
    /// # Errors
    /// What the plugin returns, or a denied read.
    pub fn finalize<R: Reconciler>(&self, key: ObjectKey) -> Result<Outcome> {
        let (declaration, ctx) = self.context::<R>(key);
        backend::with(Rc::clone(&self.objects), declaration, || {
            R::finalize(&ctx).and_then(Outcome::into_result)
        })
    }
}

fn allows(declaration: &Declaration, resource: &crate::ResourceType, verb: Verb) -> bool {
    if &declaration.primary == resource {
        return matches!(verb, Verb::Get | Verb::List | Verb::Watch)
            || declaration.primary_verbs.contains(&verb);
    }
    declaration
        .secondaries
        .iter()
        .any(|s| &s.resource == resource && s.verbs.contains(&verb))
}

/// The native backend: a thread-local fixture set.
pub(crate) mod backend {
    use std::cell::RefCell;

    use serde_json::Value;

    use super::{Cached, Fixture, allows};
    use crate::error::{Error, Result};
    use crate::log::Level;
    use crate::types::{Declaration, ObjectKey, ResourceType, Verb};

    thread_local! {
        static FIXTURE: RefCell<Option<(Fixture, Declaration)>> = const { RefCell::new(None) };
    }

    pub(super) fn with<T>(objects: Fixture, declaration: Declaration, f: impl FnOnce() -> T) -> T {
        FIXTURE.with(|cell| *cell.borrow_mut() = Some((objects, declaration)));
        let result = f();
        FIXTURE.with(|cell| *cell.borrow_mut() = None);
        result
    }

    fn read<T>(
        resource: &ResourceType,
        verb: Verb,
        f: impl FnOnce(&[Cached]) -> Result<T>,
    ) -> Result<T> {
        FIXTURE.with(|cell| {
            let fixture = cell.borrow();
            let (objects, declaration) = fixture.as_ref().ok_or_else(|| {
                Error::msg("cache read outside a reconcile: use kubewasm_guest::testing::Harness")
            })?;
            if !allows(declaration, resource, verb) {
                return Err(Error::msg(format!(
                    "read denied: plugin `{}` may not {} {resource}",
                    declaration.name,
                    if verb == Verb::Get { "get" } else { "list" }
                )));
            }
            f(objects)
        })
    }

    fn is(object: &Value, resource: &ResourceType) -> bool {
        object.get("apiVersion").and_then(Value::as_str) == Some(resource.api_version().as_str())
            && object.get("kind").and_then(Value::as_str) == Some(resource.kind.as_str())
    }

    fn meta<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
        object.get("metadata")?.get(field)?.as_str()
    }

    pub(crate) fn get(resource: &ResourceType, key: &ObjectKey) -> Result<Option<String>> {
        read(resource, Verb::Get, |objects| {
            Ok(objects
                .iter()
                .find(|(o, _)| {
                    is(o, resource)
                        && meta(o, "name") == Some(&key.name)
                        && meta(o, "namespace") == key.namespace.as_deref()
                })
                .map(|(_, text)| text.clone()))
        })
    }

    pub(crate) fn list(
        resource: &ResourceType,
        namespace: Option<&str>,
        selector: &str,
    ) -> Result<Vec<String>> {
        let selector = kubewasm_core::Selector::parse(selector)?;
        read(resource, Verb::List, |objects| {
            let mut found: Vec<&Cached> = objects
                .iter()
                .filter(|(o, _)| {
                    is(o, resource) && (namespace.is_none() || meta(o, "namespace") == namespace)
                })
                .filter(|(o, _)| selector.matches(o))
                .collect();
            found.sort_by_key(|(o, _)| (meta(o, "namespace"), meta(o, "name")));
            Ok(found.into_iter().map(|(_, text)| text.clone()).collect())
        })
    }

    pub(crate) fn log(level: Level, message: &str, fields: &[(&str, &str)]) {
        eprintln!("[{level:?}] {message} {fields:?}");
    }
}
