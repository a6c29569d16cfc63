//! The four ways a write changes an object (merge patch, JSON patch,
//! strategic merge patch, server-side apply), on an object and a patch
//! both chosen by the fuzzer.
#![no_main]

use kubewasm_apiserver::mutation::{apply, patch, strategic};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|input: &[u8]| {
    // `object \0 patch`, each JSON.
    let Some(split) = input.iter().position(|b| *b == 0) else {
        return;
    };
    let (Ok(object), Ok(change)) = (
        serde_json::from_slice::<Value>(&input[..split]),
        serde_json::from_slice::<Value>(&input[split + 1..]),
    ) else {
        return;
    };
    let mut merged = object.clone();
    patch::merge_patch(&mut merged, &change);
    let mut patched = object.clone();
    let _ = patch::json_patch(&mut patched, &change);
    let mut strategic = object.clone();
    let _ = strategic::apply(&mut strategic, &change);
    for custom in [false, true] {
        for manager in ["a", "b"] {
            let request = apply::ApplyRequest {
                manager,
                force: manager == "b",
                api_version: "v1",
                custom,
                part: apply::Part::Whole,
            };
            if let Ok(mut applied) = apply::apply(&object, &change, request) {
                // Applying the same configuration again changes nothing, not
                // even a time: the entries' times are set in the past first,
                // so a new one is seen whatever the clock does meanwhile.
                if let Some(Value::Array(entries)) = applied.pointer_mut("/metadata/managedFields")
                {
                    for entry in entries.iter_mut().filter_map(Value::as_object_mut) {
                        if entry.contains_key("time") {
                            entry.insert("time".into(), "2000-01-01T00:00:00Z".into());
                        }
                    }
                }
                let again = apply::apply(&applied, &change, request);
                assert_eq!(
                    again.as_ref().ok(),
                    Some(&applied),
                    "apply is not idempotent"
                );
            }
        }
    }
});
