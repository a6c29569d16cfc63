//! The native backend of `cargo test`: the harness's objects and clock,
//! thread-local during a call, read under the host's rules.

use std::cell::RefCell;
use std::rc::Rc;

use serde_json::Value;

use k8s_openapi::jiff::Timestamp;

use crate::error::{Error, Result};
use crate::types::Level;
use crate::types::{Declaration, ObjectKey, ResourceType, Verb};
use kubewasm_core::rules;

thread_local! {
    static FIXTURE: RefCell<Option<(Fixture, Declaration)>> = const { RefCell::new(None) };
    static NOW: std::cell::Cell<Option<Timestamp>> = const { std::cell::Cell::new(None) };
}

pub(crate) fn with<T>(
    objects: Fixture,
    declaration: Declaration,
    now: Option<Timestamp>,
    f: impl FnOnce() -> T,
) -> T {
    FIXTURE.with(|cell| *cell.borrow_mut() = Some((objects, declaration)));
    NOW.set(now);
    let result = f();
    FIXTURE.with(|cell| *cell.borrow_mut() = None);
    NOW.set(None);
    result
}

/// The harness's clock during a call, if it set one.
pub(crate) fn now() -> Option<Timestamp> {
    NOW.get()
}

/// Runs `f` on the objects of the declared type `resource` that the
/// plugin may see, after the host's grant check.
fn read<T>(
    resource: &ResourceType,
    verb: Verb,
    f: impl FnOnce(&ResourceType, Vec<&Cached>) -> Result<T>,
) -> Result<T> {
    FIXTURE.with(|cell| {
        let fixture = cell.borrow();
        let (objects, declaration) = fixture.as_ref().ok_or_else(|| {
            Error::msg("cache read outside a reconcile: use kubewasm_guest::testing::Harness")
        })?;
        let holdings = Declared(declaration);
        let declared = rules::check(&holdings, verb, resource)
            .map_err(|denied| Error::msg(format!("read denied: {denied}")))?;
        // The declared selector restricts every read of the type.
        let selector = held(declaration, resource).map_or("", |(_, _, selector)| selector);
        let selector = kubewasm_core::Selector::parse(selector)?;
        let visible = objects
            .iter()
            .filter(|(o, _)| is(o, declared) && selector.matches(o))
            .collect();
        f(declared, visible)
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
    read(resource, Verb::Get, |declared, objects| {
        // A name no object can have finds nothing, as on the host.
        if kubewasm_core::validation::name(declared, &key.name).is_err() {
            return Ok(None);
        }
        Ok(objects
            .into_iter()
            .find(|(o, _)| {
                meta(o, "name") == Some(&key.name)
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
    read(resource, Verb::List, |_, objects| {
        let mut found: Vec<&Cached> = objects
            .into_iter()
            .filter(|(o, _)| namespace.is_none() || meta(o, "namespace") == namespace)
            .filter(|(o, _)| selector.matches(o))
            .collect();
        found.sort_by_key(|(o, _)| (meta(o, "namespace"), meta(o, "name")));
        Ok(found.into_iter().map(|(_, text)| text.clone()).collect())
    })
}

pub(crate) fn log(level: Level, message: &str, fields: &[(&str, &str)]) {
    eprintln!("[{level:?}] {message} {fields:?}");
}

/// An object parsed, and as the JSON text a read returns.
pub(crate) type Cached = (Value, String);

/// The objects of a harness, shared with the backend during a call.
pub(crate) type Fixture = Rc<Vec<Cached>>;

/// A declaration as the host holds it when the operator grants all it
/// declares.
pub(crate) struct Declared<'a>(pub(crate) &'a Declaration);

impl rules::Holdings for Declared<'_> {
    fn plugin(&self) -> &str {
        &self.0.name
    }

    fn held(&self, resource: &ResourceType, verb: Verb) -> Option<(&ResourceType, bool)> {
        held(self.0, resource).map(|(declared, verbs, _)| (declared, verbs.contains(&verb)))
    }
}

/// The declared form of a type, what the plugin holds on it, and the label
/// selector its reads are restricted to: the host's rules
/// (`kubewasm_runtime::reads`), checked by the shared conformance fixtures.
fn held<'a>(
    declaration: &'a Declaration,
    resource: &ResourceType,
) -> Option<(&'a ResourceType, Vec<Verb>, &'a str)> {
    // Group, version and kind identify a type, as on the host.
    let same = |t: &ResourceType| {
        t.group == resource.group && t.version == resource.version && t.kind == resource.kind
    };
    if same(&declaration.primary) {
        let mut verbs = vec![Verb::Get, Verb::List, Verb::Watch];
        verbs.extend(&declaration.primary_verbs);
        return Some((&declaration.primary, verbs, &declaration.primary_selector));
    }
    declaration
        .secondaries
        .iter()
        .find(|s| same(&s.resource))
        .map(|s| (&s.resource, s.verbs.clone(), s.label_selector.as_str()))
}
