//! The host runs the conformance fixtures of `tests/conformance/`: the same
//! cases the Rust, Python and JavaScript test harnesses run, so a plugin's
//! unit tests deny exactly what the host denies, reads and writes.

use kubewasm_runtime::action::{
    self, Desired, DesiredEvent, EventType, PlanContext, Preconditions,
};
use kubewasm_runtime::cache::MemoryCache;
use kubewasm_runtime::declaration::Declaration;
use kubewasm_runtime::grants::{Grants, OperatorGrants};
use kubewasm_runtime::reads::{self, ReadError};
use kubewasm_runtime::resource::{ObjectKey, ResourceType};
use serde_json::Value;

fn fixtures() -> Value {
    fixture("reads.json")
}

fn fixture(file: &str) -> Value {
    let path = kubewasm_tests::workspace_root()
        .join("tests/conformance")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("fixtures readable");
    serde_json::from_str(&text).expect("fixtures are JSON")
}

/// What the host answers to one case, in the fixtures' `expect` form.
fn answer(cache: &MemoryCache, grants: &Grants, case: &Value) -> Value {
    let resource: ResourceType = serde_json::from_value(case["type"].clone()).expect("type");
    let result = match case["read"].as_str() {
        Some("get") => {
            let key: ObjectKey = serde_json::from_value(case["key"].clone()).expect("key");
            reads::get(cache, grants, &resource, &key)
                .map(|found| serde_json::json!({"found": found.is_some()}))
        }
        Some("list") => reads::list(
            cache,
            grants,
            &resource,
            case["namespace"].as_str(),
            case["labelSelector"].as_str().unwrap_or_default(),
        )
        .map(|items| {
            let items: Vec<String> = items
                .iter()
                .map(|o| o.key().map(ToString::to_string).unwrap_or_default())
                .collect();
            serde_json::json!({"items": items})
        }),
        other => panic!("unknown read {other:?}"),
    };
    match result {
        Ok(answer) => answer,
        Err(ReadError::Denied(denied)) => serde_json::json!({"denied": denied.to_string()}),
        Err(ReadError::InvalidSelector(_)) => {
            serde_json::json!({"invalidSelector": case["labelSelector"]})
        }
    }
}

#[test]
fn the_host_should_answer_every_conformance_case() {
    let fixtures = fixtures();
    let scenarios = fixtures["scenarios"].as_array().expect("scenarios");
    let mut checked = 0;
    for scenario in scenarios {
        let name = scenario["name"].as_str().unwrap_or_default();
        let declaration: Declaration =
            serde_json::from_value(scenario["declaration"].clone()).expect("declaration");
        let declaration = declaration.validate().expect("valid declaration");
        let grants = Grants::new(&declaration, &OperatorGrants::unrestricted()).expect("granted");
        let objects = scenario["objects"].as_array().cloned().unwrap_or_default();
        let cache = MemoryCache::from_objects(objects).expect("objects");
        for (i, case) in scenario["cases"]
            .as_array()
            .expect("cases")
            .iter()
            .enumerate()
        {
            assert_eq!(
                answer(&cache, &grants, case),
                case["expect"],
                "scenario `{name}`, case #{}",
                i + 1
            );
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} cases");
}

/// A fixture action as the host gets it from a plugin.
fn desired(action: &Value) -> Desired {
    if let Some(object) = action.get("apply") {
        return Desired::Apply {
            object: object.to_string(),
            owned: action.get("owned").and_then(Value::as_bool).unwrap_or(true),
            force: true,
        };
    }
    if let Some(object) = action.get("applyStatus") {
        return Desired::ApplyStatus(object.to_string());
    }
    if let Some(delete) = action.get("delete") {
        return Desired::Delete(
            serde_json::from_value(delete["type"].clone()).expect("type"),
            serde_json::from_value(delete["key"].clone()).expect("key"),
            Preconditions::default(),
        );
    }
    let event = &action["event"];
    let text = |field: &str| event[field].as_str().unwrap_or_default().to_owned();
    Desired::Event(DesiredEvent {
        regarding: None,
        event_type: EventType::Normal,
        reason: text("reason"),
        action: text("action"),
        note: text("note"),
    })
}

#[test]
fn the_host_should_plan_every_write_conformance_case() {
    let fixtures = fixture("writes.json");
    let mut checked = 0;
    for scenario in fixtures["scenarios"].as_array().expect("scenarios") {
        let name = scenario["name"].as_str().unwrap_or_default();
        let declaration: Declaration =
            serde_json::from_value(scenario["declaration"].clone()).expect("declaration");
        let declaration = declaration.validate().expect("valid declaration");
        let grants = Grants::new(&declaration, &OperatorGrants::unrestricted()).expect("granted");
        let key: ObjectKey = serde_json::from_value(scenario["key"].clone()).expect("key");
        let cache = MemoryCache::from_objects(vec![scenario["primary"].clone()]).expect("objects");
        for (i, case) in scenario["cases"]
            .as_array()
            .expect("cases")
            .iter()
            .enumerate()
        {
            let actions = case["actions"].as_array().expect("actions");
            let planned = action::plan(
                PlanContext {
                    declaration: &declaration,
                    grants: &grants,
                    key: &key,
                    primary: Some(&scenario["primary"]),
                    cache: &cache,
                    now: jiff::Timestamp::UNIX_EPOCH,
                },
                actions.iter().map(desired).collect(),
            );
            let answer = match planned {
                Ok(_) => serde_json::json!({"ok": true}),
                Err(error) => serde_json::json!({"denied": error.to_string()}),
            };
            assert_eq!(answer, case["expect"], "scenario `{name}`, case #{}", i + 1);
            checked += 1;
        }
    }
    assert!(checked >= 7, "only {checked} cases");
}
