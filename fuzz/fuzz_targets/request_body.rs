//! A request body in each format the embedded server reads (JSON, YAML,
//! protobuf), within its decoding bounds: decoded or refused, never a
//! panic, an unbounded allocation or a hang.
#![no_main]

use kubewasm_apiserver::http::decode::{Format, decode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let Some((first, body)) = input.split_first() else {
        return;
    };
    let format = match first % 3 {
        0 => Format::Json,
        1 => Format::Yaml,
        _ => Format::Protobuf,
    };
    if let Ok(value) = decode(format, body) {
        // What decodes serialises again (the server answers with it).
        let _ = serde_json::to_vec(&value);
    }
});
