//! A request as the API sees it, and what it gets back.

use std::collections::HashMap;

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::http::auth::{Impersonation, User};
use crate::http::decode::{self, DecodeError, Format};
use crate::http::error::ApiError;

/// What a request gets back.
#[derive(Debug)]
pub enum Reply {
    /// A JSON document with an HTTP status code.
    Json(u16, Value),
    /// Plain text (health checks).
    Text(u16, String),
    /// A 200 of another encoding: its content type and its bytes.
    Encoded(&'static str, Vec<u8>),
    /// An aggregated discovery document (`apidiscovery.k8s.io/v2`).
    Discovery(Value),
    /// A watch: newline-delimited JSON events, until the channel closes.
    Watch(mpsc::Receiver<Bytes>),
    /// A reply with warnings for the client (`Warning` headers, which
    /// kubectl prints and client-go logs).
    Warned(Vec<String>, Box<Reply>),
}

impl Reply {
    /// The status code of a JSON reply, warned or not.
    pub fn json_code(&self) -> Option<u16> {
        match self {
            Self::Json(code, _) => Some(*code),
            Self::Warned(_, reply) => reply.json_code(),
            Self::Text(..) | Self::Encoded(..) | Self::Discovery(_) | Self::Watch(_) => None,
        }
    }

    /// The reply itself and every warning it carries.
    pub fn warnings(self) -> (Vec<String>, Self) {
        match self {
            Self::Warned(mut warnings, reply) => {
                let (more, reply) = reply.warnings();
                warnings.extend(more);
                (warnings, reply)
            }
            reply => (Vec::new(), reply),
        }
    }
}

/// A parsed request.
#[derive(Debug)]
pub struct Request<'a> {
    /// HTTP method.
    pub method: &'a str,
    /// Path, without the query.
    pub path: &'a str,
    /// Decoded query parameters.
    pub query: HashMap<String, String>,
    /// Content type of the body.
    pub content_type: &'a str,
    /// What the client accepts (aggregated discovery is asked for here).
    pub accept: &'a str,
    /// The client's `User-Agent` (a write's field manager when it names
    /// none).
    pub user_agent: &'a str,
    /// The body.
    pub body: Bytes,
    /// Who sent it (see [`super::Api::authenticate`]).
    pub user: User,
    /// Whom it asks to act as (`Impersonate-*` headers).
    pub impersonate: Impersonation,
}

/// A body as a real server quotes it in a decoding error: `<empty>`, its
/// first 30 bytes when it starts as an object, else their hex.
fn summary(body: &[u8]) -> String {
    const MAX: usize = 30;
    let head = &body[..body.len().min(MAX)];
    let more = if body.len() > MAX { " ..." } else { "" };
    match body.first() {
        None => "<empty>".to_owned(),
        Some(b'{') => format!("{}{more}", String::from_utf8_lossy(head)),
        Some(_) => {
            let hex: String = head.iter().map(|b| format!("{b:02x}")).collect();
            format!("{hex}{more}")
        }
    }
}

/// The anonymous struct a real server's serializer reads a body's
/// `apiVersion` and `kind` into, as Go prints its type.
const TYPE_META: &str = r#"struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" }"#;

/// The JSON type of `value` as Go's decoder names it in an error.
pub(super) fn go_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The first character after a complete JSON value (past whitespace), if
/// any, quoted as Go's JSON scanner quotes it (`'}'`): found by reading the
/// one value and looking at what follows, not from the error's words.
fn trailing(body: &[u8]) -> Option<String> {
    let mut values = serde_json::Deserializer::from_slice(body).into_iter::<Value>();
    values.next()?.ok()?;
    let rest = std::str::from_utf8(body.get(values.byte_offset()..)?).ok()?;
    let c = rest
        .trim_start_matches([' ', '\t', '\n', '\r'])
        .chars()
        .next()?;
    Some(match c {
        '\'' => "'\\''".to_owned(),
        '"' => "'\"'".to_owned(),
        c if c.is_control() => format!("{:?}", c.to_string()),
        c => format!("'{c}'"),
    })
}

impl Request<'_> {
    /// Whether the request may write (any method but GET, HEAD and OPTIONS).
    pub fn may_write(&self) -> bool {
        !matches!(self.method, "GET" | "HEAD" | "OPTIONS")
    }

    /// The body, decoded by its content type within [`crate::http::bounds`].
    pub(super) fn document(&self) -> Result<Value, ApiError> {
        Ok(decode::decode(Format::of(self.content_type)?, &self.body)?)
    }

    /// [`Request::document`] of a body that must be an object of `kind`: a
    /// JSON body that does not parse is refused in a real server's words
    /// (the kind it must be, Go's parse error, the body's first 30 bytes).
    pub(super) fn object_document(&self, kind: &str) -> Result<Value, ApiError> {
        let format = Format::of(self.content_type)?;
        let unrecognized = |parse: &str| {
            ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type {kind}): couldn't get version/kind; json parse error: {parse} ({})",
                summary(&self.body)
            ))
        };
        match decode::decode(format, &self.body) {
            Ok(value) => {
                // The serializer reads `apiVersion` and `kind` first, as
                // strings of an anonymous struct.
                if !value.is_object() && !value.is_null() {
                    return Err(unrecognized(&format!(
                        "json: cannot unmarshal {} into Go value of type {TYPE_META}",
                        go_type(&value)
                    )));
                }
                let typed = value.as_object().into_iter().flatten();
                for (field, v) in typed.filter(|(f, _)| *f == "apiVersion" || *f == "kind") {
                    if !v.is_null() && !v.is_string() {
                        return Err(unrecognized(&format!(
                            "json: cannot unmarshal {} into Go struct field .{field} of type string",
                            go_type(v)
                        )));
                    }
                }
                Ok(value)
            }
            Err(DecodeError::Json(error)) => {
                let parse = if error.classify() == serde_json::error::Category::Eof {
                    "unexpected end of JSON input".to_owned()
                } else if let Some(c) = trailing(&self.body) {
                    format!("invalid character {c} after top-level value")
                } else {
                    error.to_string()
                };
                Err(unrecognized(&parse))
            }
            Err(other) => Err(other.into()),
        }
    }

    /// [`Request::document`], or `{}` when the body is empty (optional
    /// options: DeleteOptions, a TokenRequest).
    pub(super) fn document_or_empty(&self) -> Result<Value, ApiError> {
        if self.body.iter().all(u8::is_ascii_whitespace) {
            return Ok(json!({}));
        }
        self.document()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_character_after_the_value_should_be_named_as_go_names_it() {
        let named = |body: &[u8]| {
            serde_json::from_slice::<Value>(body).err()?;
            trailing(body)
        };
        assert_eq!(
            named(br#"{"tier": "web"}}, "data""#).as_deref(),
            Some("'}'")
        );
        assert_eq!(named(b"{\n  \"a\": 1\n}\n x").as_deref(), Some("'x'"));
        assert_eq!(named(b"{} '").as_deref(), Some(r"'\''"));
        assert_eq!(
            named(br#"{"a": "#),
            None,
            "an unfinished value is another error"
        );
    }
}
