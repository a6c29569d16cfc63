//! The operator's grants file (`--grants`): parsed and checked or refused,
//! and what parses bounds a plugin's declaration without panicking.
#![no_main]

use kubewasm_runtime::declaration::Declaration;
use kubewasm_runtime::grants::{Grants, OperatorGrants};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    let Ok(operator) = OperatorGrants::parse(text) else {
        return;
    };
    let declaration: Declaration = serde_json::from_str(include_str!("../declaration.json"))
        .expect("the sample declaration parses");
    if let Ok(declaration) = declaration.validate()
        && let Ok(grants) = Grants::new(&declaration, &operator)
    {
        for resource in declaration.resource_types() {
            let _ = grants.selector(resource);
        }
        let _ = grants.reads_namespace("default");
    }
});
