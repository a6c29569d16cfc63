//! Run a plugin natively with plain `cargo test`: fixtures stand in for the
//! host's cache, and reads and writes are checked against the plugin's
//! declaration as the host checks them (a write the host would refuse fails
//! the reconcile with the host's exact refusal).
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

use crate::context::Context;
use crate::error::{Error, Result};
use crate::fixtures::{self, Cached, Declared, Fixture};
use crate::outcome::Outcome;
use crate::reconciler::Reconciler;
use crate::types::{Declaration, ObjectKey, ResourceType, Verb};
use kubewasm_core::rules;

/// Fixtures and a configuration to run reconciles against.
#[derive(Clone, Debug, Default)]
pub struct Harness {
    /// Each object parsed and as the JSON text a read returns, as the
    /// host's cache keeps them.
    objects: Fixture,
    config: Option<Value>,
    now: Option<k8s_openapi::jiff::Timestamp>,
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

    /// Sets the clock: [`crate::now`] returns `at` during the calls, as it
    /// returns the time of the call in the host (and `replay --now`'s).
    #[must_use]
    pub fn now(mut self, at: k8s_openapi::jiff::Timestamp) -> Self {
        self.now = Some(at);
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

    /// Runs `call` of the plugin declaring `declaration` on `ctx`, reading
    /// this harness's objects, its writes checked.
    fn run(
        &self,
        declaration: Declaration,
        ctx: &Context,
        call: fn(&Context) -> Result<Outcome>,
    ) -> Result<Outcome> {
        let checked = declaration.clone();
        fixtures::with(Rc::clone(&self.objects), declaration, self.now, || {
            call(ctx).and_then(Outcome::into_result)
        })
        .and_then(|outcome| check_writes(&checked, ctx.key(), &self.objects, outcome))
    }

    /// Runs [`Reconciler::reconcile`] for `key`.
    ///
    /// # Errors
    /// What the plugin returns, a denied read, or a denied write.
    pub fn reconcile<R: Reconciler>(&self, key: ObjectKey) -> Result<Outcome> {
        let (declaration, ctx) = self.context::<R>(key);
        self.run(declaration, &ctx, R::reconcile)
    }

    /// Runs [`Reconciler::finalize`] for `key`.
    ///
    /// # Errors
    /// What the plugin returns, a denied read, or a denied write.
    pub fn finalize<R: Reconciler>(&self, key: ObjectKey) -> Result<Outcome> {
        let (declaration, ctx) = self.context::<R>(key);
        self.run(declaration, &ctx, R::finalize)
    }

    /// Runs [`Reconciler::scheduled`] for the time `at` the schedule named
    /// (no primary: an owned apply is refused, as the host refuses it).
    ///
    /// # Errors
    /// What the plugin returns, a denied read, or a denied write.
    pub fn scheduled<R: Reconciler>(&self, at: k8s_openapi::jiff::Timestamp) -> Result<Outcome> {
        let (declaration, mut ctx) = self.context::<R>(ObjectKey::cluster(""));
        ctx.scheduled_at = Some(at);
        self.run(declaration, &ctx, R::scheduled)
    }

    /// Runs [`Reconciler::map_keys`] for `object`, a changed object of the
    /// secondary type `resource`, reading this harness's objects: the
    /// primary keys the host would queue.
    ///
    /// # Errors
    /// What the plugin returns, a denied read, or an object without a name.
    pub fn map_keys<R: Reconciler>(
        &self,
        resource: ResourceType,
        object: &Value,
    ) -> Result<Vec<ObjectKey>> {
        self.map_change::<R>(resource, object, None, false)
    }

    /// Runs [`Reconciler::map_keys`] for a change as the host gives it:
    /// `object` as it is now (or, `deleted`, as it was last) and its state
    /// before (`previous`, for a modified object).
    ///
    /// # Errors
    /// As [`Harness::map_keys`].
    pub fn map_change<R: Reconciler>(
        &self,
        resource: ResourceType,
        object: &Value,
        previous: Option<&Value>,
        deleted: bool,
    ) -> Result<Vec<ObjectKey>> {
        let key = ObjectKey::of(object)
            .ok_or_else(|| Error::msg("the changed object has no metadata.name"))?;
        let declaration = R::declare();
        let mut ctx = Context::new(resource, key);
        if let Some(config) = &self.config {
            ctx.config = config.to_string();
        }
        ctx.previous = previous.cloned();
        ctx.deleted = deleted;
        fixtures::with(Rc::clone(&self.objects), declaration, self.now, || {
            R::map_keys(&ctx, object)
        })
    }
}

/// The outcome, or the host's refusal of it, by the host's write rules
/// (`kubewasm_core::rules`, which the host's planner applies to its grants;
/// the shared fixtures `tests/conformance/writes.json` hold the other
/// harnesses to the same answers): every apply, status apply and delete
/// needs its verb declared on its type; its target's scope, namespace and
/// name must be valid (a namespaced object without a namespace goes to the
/// primary's), its labels too; an owned child needs the primary cached and
/// in its namespace.
fn check_writes(
    declaration: &Declaration,
    key: &ObjectKey,
    objects: &[Cached],
    outcome: Outcome,
) -> Result<Outcome> {
    use crate::outcome::Action;
    let declared = Declared(declaration);
    let primary = &declaration.primary;
    let cached_primary = objects.iter().map(|(o, _)| o).find(|o| {
        let field = |name: &str| o.get(name).and_then(Value::as_str).unwrap_or_default();
        field("apiVersion") == primary.api_version()
            && field("kind") == primary.kind
            && ObjectKey::of(o).as_ref() == Some(key)
    });
    for (index, action) in outcome.actions().iter().enumerate() {
        let refused = match action {
            Action::Apply { object, owned, .. } => {
                rules::object_target(&declared, Verb::Apply, object, key.namespace.as_deref())
                    .and_then(|(resource, target)| match owned {
                        true => rules::owner_uid(primary, key, cached_primary, &resource, &target)
                            .map(|_| ()),
                        false => Ok(()),
                    })
            }
            Action::ApplyStatus(object) => rules::object_target(
                &declared,
                Verb::ApplyStatus,
                object,
                key.namespace.as_deref(),
            )
            .map(|_| ()),
            Action::Delete(resource, target, _) => rules::check(&declared, Verb::Delete, resource)
                .map_err(rules::Refusal::from)
                .and_then(|resource| {
                    rules::check_target(&declared, Verb::Delete, resource, target)
                }),
            Action::Event(_) => Ok(()),
        };
        if let Err(refusal) = refused {
            return Err(Error::msg(refusal.at(index + 1).to_string()));
        }
    }
    Ok(outcome)
}

#[cfg(test)]
mod conformance {
    //! The shared conformance fixtures (`tests/conformance/reads.json`),
    //! which the host runs too: the harness must answer as the host does.

    use std::rc::Rc;

    use serde_json::{Value, json};

    use crate::fixtures as backend;
    use crate::types::{Declaration, ObjectKey, ResourceType, Secondary, Verb};

    fn fixtures() -> Value {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/conformance/reads.json"
        );
        let text = std::fs::read_to_string(path).expect("fixtures readable");
        serde_json::from_str(&text).expect("fixtures are JSON")
    }

    fn of<T: serde::de::DeserializeOwned + Default>(v: &Value) -> T {
        if v.is_null() {
            return T::default();
        }
        serde_json::from_value(v.clone()).expect("fixture field")
    }

    fn declaration(v: &Value) -> Declaration {
        let ty = |v: &Value| -> ResourceType { serde_json::from_value(v.clone()).expect("type") };
        let verbs: Vec<Verb> = of(&v["primaryVerbs"]);
        let mut declaration = Declaration::for_type(
            v["name"].as_str().unwrap_or_default(),
            v["version"].as_str().unwrap_or_default(),
            ty(&v["primary"]),
        )
        .primary_verbs(verbs)
        .primary_selector(v["primarySelector"].as_str().unwrap_or_default());
        for s in v["secondaries"].as_array().into_iter().flatten() {
            let verbs: Vec<Verb> = of(&s["verbs"]);
            declaration = declaration.secondary(
                Secondary::of_type(ty(&s["type"]))
                    .verbs(verbs)
                    .label_selector(s["labelSelector"].as_str().unwrap_or_default()),
            );
        }
        declaration
    }

    fn answer(case: &Value) -> Value {
        let resource: ResourceType = serde_json::from_value(case["type"].clone()).expect("type");
        let result = match case["read"].as_str() {
            Some("get") => {
                let key: ObjectKey = serde_json::from_value(case["key"].clone()).expect("key");
                backend::get(&resource, &key).map(|found| json!({"found": found.is_some()}))
            }
            _ => backend::list(
                &resource,
                case["namespace"].as_str(),
                case["labelSelector"].as_str().unwrap_or_default(),
            )
            .map(|items| {
                let items: Vec<String> = items
                    .iter()
                    .map(|text| {
                        let object: Value = serde_json::from_str(text).expect("json");
                        ObjectKey::of(&object)
                            .map(|k| k.to_string())
                            .unwrap_or_default()
                    })
                    .collect();
                json!({"items": items})
            }),
        };
        match result {
            Ok(answer) => answer,
            Err(error) => {
                let text = error.to_string();
                match text.strip_prefix("read denied: ") {
                    Some(denied) => json!({"denied": denied}),
                    None if text.starts_with(&format!(
                        "invalid label selector `{}`",
                        case["labelSelector"].as_str().unwrap_or_default()
                    )) =>
                    {
                        json!({"invalidSelector": case["labelSelector"]})
                    }
                    None => json!({"error": text}),
                }
            }
        }
    }

    /// A fixture action as a plugin returns it.
    fn with_action(outcome: crate::Outcome, action: &Value) -> crate::Outcome {
        if let Some(object) = action.get("apply") {
            let owned = action.get("owned").and_then(Value::as_bool).unwrap_or(true);
            return outcome.apply_json(object.clone(), owned);
        }
        if let Some(object) = action.get("applyStatus") {
            return outcome.apply_status_json(object.clone());
        }
        if let Some(delete) = action.get("delete") {
            return outcome.delete_of(
                serde_json::from_value(delete["type"].clone()).expect("type"),
                serde_json::from_value(delete["key"].clone()).expect("key"),
                crate::Preconditions::default(),
            );
        }
        let event = &action["event"];
        let text = |field: &str| event[field].as_str().unwrap_or_default().to_owned();
        outcome.event(crate::Event::normal(
            text("reason"),
            text("action"),
            text("note"),
        ))
    }

    #[test]
    fn the_harness_should_refuse_every_write_the_host_refuses() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/conformance/writes.json"
        );
        let fixtures: Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("fixtures")).expect("JSON");
        for scenario in fixtures["scenarios"].as_array().expect("scenarios") {
            let declaration = declaration(&scenario["declaration"]);
            for (i, case) in scenario["cases"]
                .as_array()
                .expect("cases")
                .iter()
                .enumerate()
            {
                let outcome = case["actions"]
                    .as_array()
                    .expect("actions")
                    .iter()
                    .fold(crate::Outcome::new(), with_action);
                let key: ObjectKey = serde_json::from_value(scenario["key"].clone()).expect("key");
                let primary = &scenario["primary"];
                let objects = [(primary.clone(), primary.to_string())];
                let got = match super::check_writes(&declaration, &key, &objects, outcome) {
                    Ok(_) => json!({"ok": true}),
                    Err(error) => json!({"denied": error.to_string()}),
                };
                assert_eq!(
                    got,
                    case["expect"],
                    "scenario `{}`, case #{}",
                    scenario["name"],
                    i + 1
                );
            }
        }
    }

    #[test]
    fn the_harness_should_answer_every_conformance_case_as_the_host_does() {
        let fixtures = fixtures();
        for scenario in fixtures["scenarios"].as_array().expect("scenarios") {
            let objects: Vec<(Value, String)> = scenario["objects"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|o| (o.clone(), o.to_string()))
                .collect();
            let declaration = declaration(&scenario["declaration"]);
            for (i, case) in scenario["cases"]
                .as_array()
                .expect("cases")
                .iter()
                .enumerate()
            {
                let got =
                    backend::with(Rc::new(objects.clone()), declaration.clone(), None, || {
                        answer(case)
                    });
                assert_eq!(
                    got,
                    case["expect"],
                    "scenario `{}`, case #{}",
                    scenario["name"],
                    i + 1
                );
            }
        }
    }
}
