//! Request bodies into JSON values: JSON, YAML and Kubernetes protobuf,
//! each within [`crate::http::bounds`].
//!
//! # Rules
//! - JSON must be UTF-8 and nested at most 128 levels (serde_json's limit);
//!   numbers must fit an `i64`, a `u64` or a finite `f64`.
//! - YAML is decoded with its aliases expanded, and the expansion is
//!   counted as it happens: past [`MAX_DECODED`] bytes the body is refused
//!   before the expansion is built (CVE-2019-11253's class: a few KiB of
//!   aliases naming each other, or a long string named a thousand times).
//!   Keys must be strings, numbers or booleans; numbers must be finite.
//! - Protobuf is the `k8s\0` envelope of [`crate::schema::protobuf`].

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use crate::http::bounds::MAX_DECODED;
use crate::schema::protobuf::ProtobufError;

/// Why a body could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Not valid JSON.
    #[error("the body of the request is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// Not valid YAML, or past the bounds once expanded.
    #[error("the body of the request is not valid YAML: {0}")]
    Yaml(#[from] serde_yaml::Error),
    /// Not a valid protobuf envelope, or of a kind not decoded.
    #[error(transparent)]
    Protobuf(#[from] ProtobufError),
    /// A content type this server does not read.
    #[error("the body's media type \"{0}\" is not supported")]
    Unsupported(String),
}

/// The formats a body may come in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `application/json` (and any `+json` patch type).
    Json,
    /// `application/yaml` (and `application/apply-patch+yaml`).
    Yaml,
    /// `application/vnd.kubernetes.protobuf`.
    Protobuf,
}

impl Format {
    /// The format of a body of `content_type` (parameters ignored; none
    /// means JSON, as the real server assumes).
    ///
    /// # Errors
    /// [`DecodeError::Unsupported`].
    pub fn of(content_type: &str) -> Result<Self, DecodeError> {
        let essence = content_type.split(';').next().unwrap_or("").trim();
        match essence {
            "" | "application/json" | "*/*" => Ok(Self::Json),
            "application/yaml" | "application/apply-patch+yaml" => Ok(Self::Yaml),
            "application/vnd.kubernetes.protobuf" => Ok(Self::Protobuf),
            other if other.ends_with("+json") => Ok(Self::Json),
            other => Err(DecodeError::Unsupported(other.to_owned())),
        }
    }
}

/// Decodes a body in `format`.
///
/// # Errors
/// [`DecodeError`] saying what is wrong.
pub fn decode(format: Format, body: &[u8]) -> Result<Value, DecodeError> {
    match format {
        Format::Json => json(body),
        Format::Yaml => yaml(body),
        Format::Protobuf => Ok(crate::schema::protobuf::decode(body)?),
    }
}

/// Decodes JSON.
///
/// # Errors
/// [`DecodeError::Json`].
pub fn json(body: &[u8]) -> Result<Value, DecodeError> {
    Ok(serde_json::from_slice(body)?)
}

/// Decodes YAML (which includes JSON), expanding aliases within
/// [`MAX_DECODED`] bytes.
///
/// # Errors
/// [`DecodeError::Yaml`].
pub fn yaml(body: &[u8]) -> Result<Value, DecodeError> {
    let mut budget = MAX_DECODED;
    let deserializer = serde_yaml::Deserializer::from_slice(body);
    Ok(Bounded {
        budget: &mut budget,
    }
    .deserialize(deserializer)?)
}

/// Builds a JSON value, charging every node to a byte budget (the length
/// it would take as JSON, near enough).
struct Bounded<'b> {
    budget: &'b mut usize,
}

impl Bounded<'_> {
    fn charge<E: de::Error>(&mut self, bytes: usize) -> Result<(), E> {
        *self.budget = self.budget.checked_sub(bytes).ok_or_else(|| {
            E::custom(format!(
                "the document expands past the limit of {MAX_DECODED} bytes"
            ))
        })?;
        Ok(())
    }

    fn reborrow(&mut self) -> Bounded<'_> {
        Bounded {
            budget: self.budget,
        }
    }
}

impl<'de> DeserializeSeed<'de> for Bounded<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Bounded<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-compatible value")
    }

    fn visit_bool<E: de::Error>(mut self, v: bool) -> Result<Value, E> {
        self.charge(5)?;
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(mut self, v: i64) -> Result<Value, E> {
        self.charge(20)?;
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E: de::Error>(mut self, v: u64) -> Result<Value, E> {
        self.charge(20)?;
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(mut self, v: f64) -> Result<Value, E> {
        self.charge(24)?;
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom(format!("{v} is not a finite number")))
    }

    fn visit_str<E: de::Error>(mut self, v: &str) -> Result<Value, E> {
        self.charge(v.len() + 2)?;
        Ok(Value::String(v.to_owned()))
    }

    fn visit_unit<E: de::Error>(mut self) -> Result<Value, E> {
        self.charge(4)?;
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }

    fn visit_some<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        self.charge(2)?;
        while let Some(item) = seq.next_element_seed(self.reborrow())? {
            self.charge(1)?;
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        self.charge(2)?;
        while let Some(key) = map.next_key_seed(self.reborrow())? {
            let key = match key {
                Value::String(s) => s,
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                other => {
                    return Err(de::Error::custom(format!(
                        "a map key must be a string, not {other}"
                    )));
                }
            };
            self.charge(2)?;
            let value = map.next_value_seed(self.reborrow())?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn yaml_should_decode_like_json() {
        let v = yaml(b"a: 1\nb: [x, true, null, 1.5]\n3: c\n").expect("decodes");
        assert_eq!(v, json!({"a": 1, "b": ["x", true, null, 1.5], "3": "c"}));
        assert_eq!(
            yaml(br#"{"a": {"b": "c"}}"#).expect("json"),
            json!({"a": {"b": "c"}})
        );
    }

    #[test]
    fn alias_expansions_should_stop_at_the_budget() {
        // A long string named many times: small body, huge expansion.
        let mut bomb = format!("x: &a \"{}\"\ny: [", "x".repeat(30_000));
        bomb.push_str(&vec!["*a"; 1_500].join(","));
        bomb.push_str("]\n");
        let error = yaml(bomb.as_bytes()).expect_err("refused");
        assert!(error.to_string().contains("expands past"), "{error}");
        // Small aliases used a few times stay fine.
        let fine = yaml(b"x: &a {k: v}\ny: [*a, *a]\n").expect("decodes");
        assert_eq!(fine["y"], json!([{"k": "v"}, {"k": "v"}]));
    }

    #[test]
    fn nested_aliases_should_be_refused() {
        let mut bomb = String::from(
            "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
        );
        let mut prev = 'a';
        for name in "bcdefghi".chars() {
            bomb.push_str(&format!(
                "{name}: &{name} [{}]\n",
                vec![format!("*{prev}"); 9].join(",")
            ));
            prev = name;
        }
        assert!(yaml(bomb.as_bytes()).is_err());
    }

    #[test]
    fn non_json_values_should_be_refused() {
        assert!(yaml(b"a: .nan\n").is_err());
        assert!(yaml(b"? [a]\n: b\n").is_err());
        assert!(json(b"{\"a\": 1e400}").is_err());
        assert!(json(b"{\"a\": \"\xff\"}").is_err());
        assert!(json(&[b'['; 200]).is_err());
    }

    #[test]
    fn formats_should_follow_the_content_type() {
        assert_eq!(
            Format::of("application/json; charset=utf-8").ok(),
            Some(Format::Json)
        );
        assert_eq!(
            Format::of("application/merge-patch+json").ok(),
            Some(Format::Json)
        );
        assert_eq!(Format::of("application/yaml").ok(), Some(Format::Yaml));
        assert_eq!(
            Format::of("application/vnd.kubernetes.protobuf").ok(),
            Some(Format::Protobuf)
        );
        assert!(Format::of("text/plain").is_err());
    }
}
