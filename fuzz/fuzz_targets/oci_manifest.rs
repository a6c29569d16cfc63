//! What a registry sends for a plugin: its manifest (one Wasm layer of
//! the CNCF or the older layout) and, for a signed plugin, the signature
//! manifest's layers and payloads. Accepted or refused with a reason.
#![no_main]

use kubewasm_engine::oci::plugin_layer_of;
use kubewasm_engine::signature::{PublicKeys, check};
use libfuzzer_sys::fuzz_target;
use oci_client::manifest::OciImageManifest;

const KEY: &str = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEjXf5Bv1ze1noY/1FloLeMqarkpF4
SIiaPOlvOM6t0lF0TpAzJILOVsWf61DkJcU4jS+yFJFG18ihl+WJwGtGcQ==
-----END PUBLIC KEY-----
";

fuzz_target!(|input: &[u8]| {
    // `manifest \0 payload`.
    let (manifest, payload) = match input.iter().position(|b| *b == 0) {
        Some(split) => (&input[..split], &input[split + 1..]),
        None => (input, &[][..]),
    };
    if let Ok(layer) = plugin_layer_of(manifest) {
        assert!(layer.size >= 0, "a negative layer size accepted");
    }
    let Ok(parsed) = serde_json::from_slice::<OciImageManifest>(manifest) else {
        return;
    };
    let mut keys = PublicKeys::default();
    keys.add_pem("fuzz", KEY).expect("the fixed key parses");
    if let Ok(text) = std::str::from_utf8(payload) {
        // A key file as an operator hands it.
        let _ = PublicKeys::default().add_pem("fuzzed", text);
    }
    for layer in &parsed.layers {
        let _ = check(payload, layer, "sha256:0", &keys);
    }
});
