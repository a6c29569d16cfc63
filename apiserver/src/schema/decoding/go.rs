//! Values as Go's `fmt` prints them in a real server's error messages.

use serde_json::Value;

/// A value as Go's `%v` prints what `json.Unmarshal` made of it: maps as
/// `map[k:v …]` by sorted keys, lists as `[a b]`, strings bare, `<nil>`.
/// A map's nulls are left out (a strategic merge patch's deletions, taken
/// out before a real server prints the patch).
pub fn go_printed(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => go_float(f),
            _ => n.to_string(),
        },
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(go_printed).collect();
            format!("[{}]", items.join(" "))
        }
        Value::Object(entries) => {
            let mut keys: Vec<&String> = entries
                .iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, _)| k)
                .collect();
            keys.sort();
            let entries: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{k}:{}", go_printed(&entries[k])))
                .collect();
            format!("map[{}]", entries.join(" "))
        }
    }
}

/// A scalar as Go's `%#v` prints it inside an `interface{}`: strings
/// quoted, numbers and booleans bare.
pub(super) fn go_quoted(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        other => go_printed(other),
    }
}

/// A float as Go's `%v` prints it: the shortest text, with an exponent
/// (two digits at least) below 1e-4 or from 1e21.
fn go_float(f: f64) -> String {
    if f == 0.0 || (1e-4..1e21).contains(&f.abs()) {
        return f.to_string();
    }
    let text = format!("{f:e}");
    let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
    let (sign, digits) = match exponent.strip_prefix('-') {
        Some(digits) => ('-', digits),
        None => ('+', exponent),
    };
    format!("{mantissa}e{sign}{digits:0>2}")
}
