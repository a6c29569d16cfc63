//! The generated bindings of the `controller` world. Not part of the API.

wit_bindgen::generate!({
    path: "../wit",
    world: "controller",
    export_macro_name: "__export_plugin",
    pub_export_macro: true,
    default_bindings_module: "kubewasm_guest::wit",
});
