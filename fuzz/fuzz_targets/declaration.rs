//! A plugin's declaration, as its `declare` export returns it (the host
//! reads it into this same structure): validated or refused; what
//! validates yields its schedule, config schema and grants without
//! panicking.
#![no_main]

use kubewasm_runtime::declaration::Declaration;
use kubewasm_runtime::grants::{Grants, OperatorGrants};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let Ok(declaration) = serde_json::from_slice::<Declaration>(input) else {
        return;
    };
    let Ok(declaration) = declaration.validate() else {
        return;
    };
    let _ = declaration.cron();
    let _ = declaration.config_validator();
    let _ = declaration.field_manager();
    let _ = declaration.finalizer();
    let _ = Grants::new(&declaration, &OperatorGrants::unrestricted());
    // Validation is a fixed point.
    assert_eq!(declaration.clone().validate().ok(), Some(declaration));
});
