//! The generated code: one `bindgen!` for each version of the `controller`
//! world the host speaks. Nothing outside `bindings` sees it.

pub(super) mod v0_3 {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "controller",
        // Host functions are plain synchronous Rust: cache reads are memory
        // lookups and logging never blocks, so no async machinery per call.
        // They may trap (a plugin out of hostcall fuel is stopped at once).
        // Generated types derive nothing beyond the defaults.
        imports: { default: trappable },
    });
}

pub(super) mod v0_2 {
    wasmtime::component::bindgen!({
        path: "../wit/0.2.0",
        world: "controller",
        imports: { default: trappable },
        with: {
            "kubewasm:controller/types@0.2.0": crate::bindings::generated::v0_3::kubewasm::controller::types,
        },
    });
}

pub(super) mod v0_1 {
    wasmtime::component::bindgen!({
        path: "../wit/0.1.0",
        world: "controller",
        imports: { default: trappable },
        with: {
            "kubewasm:controller/types@0.1.0": crate::bindings::generated::v0_3::kubewasm::controller::types,
        },
    });
}

pub(super) use v0_3::exports::kubewasm::controller::plugin as exports;
pub(super) use v0_3::kubewasm::controller::{cache, log, types};

pub(super) use v0_1::exports::kubewasm::controller::plugin as v1;
pub(super) use v0_2::exports::kubewasm::controller::plugin as v2;
